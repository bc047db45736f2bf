package gotok

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sharedDir finds the project's shared/ folder beside the checkout, or
// where $GOTOK_SHARED says (on a machine where the checkout travels alone).
func sharedDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("GOTOK_SHARED"); d != "" {
		return d
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		p := filepath.Join(filepath.Dir(d), "shared")
		if _, err := os.Stat(filepath.Join(p, "models", "stories260K.gguf")); err == nil {
			return p
		}
	}
	t.Skip("../shared/models/stories260K.gguf not found beside the checkout")
	return ""
}

// goldenText is karpathy's greedy sample of stories260K from the README that
// ships beside the model.
func goldenText(t *testing.T, shared string) string {
	data, err := os.ReadFile(filepath.Join(shared, "models", "llama2c", "stories260K.README.md"))
	if err != nil {
		t.Skip(err)
	}
	m := regexp.MustCompile("(?s)-t 0.0\n(.*?)\n```").FindSubmatch(data)
	if m == nil {
		t.Fatal("golden sample not found in stories260K.README.md")
	}
	return string(m[1])
}

func TestStories260KGreedyMatchesGolden(t *testing.T) {
	shared := sharedDir(t)
	golden := goldenText(t, shared)
	m, err := Load(filepath.Join(shared, "models", "stories260K.gguf"), Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var sb strings.Builder
	st, err := m.Generate(context.Background(), "", GenerateOptions{MaxTokens: 256, IgnoreEOS: true},
		func(s string) error { sb.WriteString(s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.GeneratedTokens < 200 {
		t.Fatalf("generated %d tokens, want at least 200", st.GeneratedTokens)
	}
	got := strings.TrimLeft(sb.String(), " ")
	// Compare the text of the first 200 tokens: decode them again.
	n := len(got)
	if n > len(golden) {
		n = len(golden)
	}
	prefix := commonPrefixString(got, golden)
	toks := m.Tokenizer().Encode(got[:prefix], false, false)
	if len(toks) < 200 {
		t.Fatalf("greedy text agrees with the golden sample for only %d tokens (%d bytes):\n got: %q\nwant: %q", len(toks), prefix, got[:min(n, prefix+80)], golden[:min(len(golden), prefix+80)])
	}
}

func commonPrefixString(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
