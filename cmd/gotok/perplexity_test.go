package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// storyFile writes the samples in stories260K's README to a text file.
func storyFile(t *testing.T, sh, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sh, "models", "llama2c", "stories260K.README.md"))
	if err != nil {
		t.Skip(err)
	}
	var parts []string
	for _, m := range regexp.MustCompile("(?s)```\n\\$ ./run [^\n]*\n(.*?)\n```").FindAllSubmatch(data, -1) {
		parts = append(parts, string(m[1]))
	}
	path := filepath.Join(dir, "story.txt")
	if err := os.WriteFile(path, []byte(strings.Join(parts, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPerplexityCommand(t *testing.T) {
	sh := shared(t)
	model := filepath.Join(sh, "models", "stories260K.gguf")
	dir := t.TempDir()
	text := storyFile(t, sh, dir)
	base := filepath.Join(dir, "base.kld")

	out, errOut, err := cli(t, "perplexity", "-m", model, "--device", "cpu", "-f", text, "-c", "64", "--kl-divergence-base", base)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	m := regexp.MustCompile(`^Final estimate: PPL = (\d+\.\d{4}) \+/- (\d+\.\d{5})\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("stdout %q", out)
	}
	ppl, _ := strconv.ParseFloat(m[1], 64)
	if !(ppl > 1 && ppl < 10) {
		t.Errorf("PPL %v", ppl)
	}
	if !regexp.MustCompile(`\[1\]\d+\.\d{4},\[2\]\d+\.\d{4},.*\[8\]` + regexp.QuoteMeta(m[1]) + `,`).MatchString(errOut) {
		t.Errorf("no running estimates ending in the final one on stderr:\n%s", errOut)
	}
	// One trailing newline is dropped, as llama.cpp's -f does: the same
	// tokens, the same result.
	data, _ := os.ReadFile(text)
	withNewline := filepath.Join(dir, "story-nl.txt")
	os.WriteFile(withNewline, append(data, '\n'), 0o644)
	out2, errOut2, err := cli(t, "perplexity", "-m", model, "--device", "cpu", "-f", withNewline, "-c", "64")
	tokens := regexp.MustCompile(`\d+ tokens, 8 chunks`)
	if err != nil || out2 != out || tokens.FindString(errOut2) != tokens.FindString(errOut) {
		t.Errorf("with a trailing newline: %v, %q (%q), without: %q (%q)", err, out2, tokens.FindString(errOut2), out, tokens.FindString(errOut))
	}
	if st, err := os.Stat(base); err != nil || st.Size() == 0 {
		t.Fatalf("base file: %v", err)
	}

	// The model against its own saved log-probabilities.
	out, errOut, err = cli(t, "perplexity", "-m", model, "--device", "cpu", "--kl-divergence-base", base, "--kl-divergence")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	// PPL(Q) is printed to six places, the final estimate to four: the
	// same to its rounding (the f16 KV cache rounds K and V a little
	// differently on the two runs' paths).
	if q := regexp.MustCompile(`Mean PPL\(Q\) *: *(\d+\.\d+) ±`).FindStringSubmatch(out); q == nil {
		t.Errorf("no PPL(Q) in:\n%s", out)
	} else if v, _ := strconv.ParseFloat(q[1], 64); math.Abs(v-ppl) > 6e-5 {
		t.Errorf("PPL(Q) %v against its base, %v before", v, ppl)
	}
	for _, want := range []string{"Same top p: 100.000 ±", "Mean    KLD:  -0.0000"} {
		if !strings.Contains(out, want) && !strings.Contains(out, strings.Replace(want, "-0.0000", " 0.0000", 1)) {
			t.Errorf("kl-divergence output lacks %q:\n%s", want, out)
		}
	}
	r := regexp.MustCompile(`Mean PPL\(Q\)/PPL\(base\) *: *(\d+\.\d+) ±`).FindStringSubmatch(out)
	if r == nil {
		t.Fatalf("no PPL ratio in:\n%s", out)
	}
	if ratio, _ := strconv.ParseFloat(r[1], 64); ratio < 0.9999 || ratio > 1.0001 {
		t.Errorf("PPL ratio against itself %v", ratio)
	}
	if !strings.Contains(errOut, "   8 ") {
		t.Errorf("no row for chunk 8 on stderr:\n%s", errOut)
	}
}

func TestPerplexityCommandErrors(t *testing.T) {
	sh := shared(t)
	model := filepath.Join(sh, "models", "stories260K.gguf")
	dir := t.TempDir()
	text := storyFile(t, sh, dir)
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("Once upon a time there was a cat."), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", filepath.Join(dir, "missing.txt"), "-c", "64"}, "no such file"},
		{[]string{"-c", "64"}, "-f TEXT is required"},
		{[]string{"-f", short, "-c", "64", "--kl-divergence-base", filepath.Join(dir, "never.kld")}, "you need at least 128 tokens"},
		{[]string{"-f", text, "-c", "4096"}, "exceeds the 2048 the model was trained for"},
		{[]string{"-f", text}, "you need at least 4096 tokens"}, // -c 0: the model's 2048
		{[]string{"--kl-divergence"}, "needs --kl-divergence-base"},
		{[]string{"--kl-divergence", "--kl-divergence-base", filepath.Join(dir, "missing.kld")}, "no such file"},
		{[]string{"--kl-divergence", "--kl-divergence-base", text}, "does not look like"},
	} {
		args := append([]string{"perplexity", "-m", model, "--device", "cpu"}, c.args...)
		_, _, err := cli(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	// The failed run that was to save log-probabilities left nothing.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files left behind: %v", names)
	}
}
