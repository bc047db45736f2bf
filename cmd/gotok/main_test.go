package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gotok/gguf"
	"gotok/internal/sharedtest"
	"gotok/quant"
)

// cli runs the CLI in-process and returns stdout, stderr and the error.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// shared is the project's shared/ folder with stories260K, or skips.
func shared(t *testing.T) string {
	t.Helper()
	return sharedtest.Dir(t, "models/stories260K.gguf")
}

func infoJSON(t *testing.T, path string) modelInfo {
	t.Helper()
	out, _, err := cli(t, "info", "-m", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info modelInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("info --json: %v\n%s", err, out)
	}
	return info
}

// The values below were read from the files' metadata by hand once.
func TestInfoStories260K(t *testing.T) {
	path := filepath.Join(shared(t), "models", "stories260K.gguf")
	info := infoJSON(t, path)
	c := info.Config
	if c == nil {
		t.Fatalf("no config: %s", info.ConfigError)
	}
	if info.Architecture != "llama" || info.GGUFVersion != 3 || c.NumLayers != 5 || c.Dim != 64 || c.FFNDim != 172 ||
		c.NumHeads != 8 || c.NumKVHeads != 4 || c.HeadDim != 8 || c.VocabSize != 512 || c.ContextLen != 2048 ||
		c.Rope.Dim != 8 || c.Rope.Base != 10000 || c.RMSEps != 1e-5 || c.TiedEmbeddings || c.Rope.Neox {
		t.Errorf("stories260K config %+v", *c)
	}
	tok := info.Tokenizer
	if tok.Model != "llama" || tok.VocabSize != 512 || tok.Special["bos"] != 1 || tok.Special["eos"] != 2 || tok.Special["unknown"] != 0 {
		t.Errorf("stories260K tokenizer %+v", tok)
	}
	if len(info.Tensors) != 48 || info.Params != 292_800 || info.ChatTemplate {
		t.Errorf("stories260K: %d tensors, %d params, chat template %v", len(info.Tensors), info.Params, info.ChatTemplate)
	}
	if r := info.Tensors[0]; r.Name != "token_embd.weight" || r.Type != "F32" || r.Bytes != 131072 {
		t.Errorf("first tensor %+v", r)
	}
	text, _, err := cli(t, "info", "-m", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"architecture:  llama", "heads:         8 (KV heads 4, head dim 8)", "blk.4.ffn_down.weight", "total: 48 tensors"} {
		if !strings.Contains(text, want) {
			t.Errorf("info output lacks %q:\n%s", want, text)
		}
	}
}

func TestGenSmolLMPreset(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 90 MB model")
	}
	tokJSON := filepath.Join(shared(t), "tokenizer-tests", "smollm2-135m-instruct", "tokenizer.json")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	for _, p := range []string{a, b} {
		if _, _, err := cli(t, "gen", "-o", p, "--preset", "smollm-135m", "--tokenizer", tokJSON, "--seed", "3"); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Error("two runs of gen with the same seed differ")
	}
	// llama.cpp's SmolLM-135M.Q4_0.gguf is 91.7 MB; ours must be within 1%.
	if n := float64(len(da)); n < 0.99*91.7e6 || n > 1.01*91.7e6 {
		t.Errorf("smollm-135m Q4_0 is %d bytes, want 91.7 MB ± 1%%", len(da))
	}
	info := infoJSON(t, a)
	c := info.Config
	if c.NumLayers != 30 || c.Dim != 576 || c.NumHeads != 9 || c.NumKVHeads != 3 || c.HeadDim != 64 || c.FFNDim != 1536 ||
		c.VocabSize != 49152 || c.Rope.Base != 100000 || !c.TiedEmbeddings || info.FileType != "Q4_0" {
		t.Errorf("smollm-135m config %+v, file type %s", *c, info.FileType)
	}
	if info.Tokenizer.Model != "gpt2" || info.Tokenizer.Pre != "smollm" || info.Tokenizer.VocabSize != 49152 {
		t.Errorf("smollm-135m tokenizer %+v", info.Tokenizer)
	}
	types := map[string]string{}
	for _, r := range info.Tensors {
		types[r.Name] = r.Type
	}
	if types["token_embd.weight"] != "Q8_0" || types["blk.0.attn_q.weight"] != "Q4_0" || types["blk.29.ffn_down.weight"] != "Q4_0" || types["output_norm.weight"] != "F32" {
		t.Errorf("tensor types %v", types)
	}
	if _, ok := types["output.weight"]; ok {
		t.Error("tied model has output.weight")
	}
}

func TestGenTinyRunsAndIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tiny.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "tiny", "--type", "q8_0"); err != nil {
		t.Fatal(err)
	}
	out1, _, err := cli(t, "run", "-m", p, "-p", "the cat", "-n", "20", "--temp", "0.8", "--seed", "5", "--device", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	out2, _, _ := cli(t, "run", "-m", p, "-p", "the cat", "-n", "20", "--temp", "0.8", "--seed", "5", "--device", "cpu")
	if out1 != out2 || out1 == "" {
		t.Errorf("same seed, different output: %q vs %q", out1, out2)
	}
}

// gen --arch writes another family's block, which run loads and info names.
func TestGenArch(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gemma3.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "tiny", "--arch", "gemma3", "--layers", "3", "--type", "q8_0"); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, "info", "-m", p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "gemma3") || !strings.Contains(out, "sliding-window attention") {
		t.Errorf("info does not name gemma3 and its features:\n%s", out)
	}
	if _, _, err := cli(t, "run", "-m", p, "-p", "the cat", "-n", "8", "--temp", "0", "--device", "cpu"); err != nil {
		t.Fatal(err)
	}
}

func TestQuantizeStories260K(t *testing.T) {
	src := filepath.Join(shared(t), "models", "stories260K.gguf")
	dir := t.TempDir()
	for _, typ := range []string{"q8_0", "q4_0"} {
		dst := filepath.Join(dir, typ+".gguf")
		_, stderr, err := cli(t, "quantize", src, dst, "--type", typ)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(dst)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := f.Tensor("blk.0.attn_q.weight")
		down, _ := f.Tensor("blk.0.ffn_down.weight") // rows of 172: not a multiple of 32
		norm, _ := f.Tensor("blk.0.attn_norm.weight")
		if !strings.EqualFold(q.Type.String(), typ) || down.Type.String() != "F32" || norm.Type.String() != "F32" {
			t.Errorf("%s: attn_q %s, ffn_down %s, attn_norm %s", typ, q.Type, down.Type, norm.Type)
		}
		f.Close()
		if !strings.Contains(stderr, "blk.0.ffn_down.weight") {
			t.Errorf("quantize did not say which tensors kept their type:\n%s", stderr)
		}
		out, _, err := cli(t, "run", "-m", dst, "-p", "Once upon a time", "-n", "30", "--temp", "0", "--device", "cpu")
		if err != nil {
			t.Fatal(err)
		}
		if len(strings.Fields(out)) < 10 {
			t.Errorf("%s model wrote %q", typ, out)
		}
	}
}

func TestBadInvocations(t *testing.T) {
	t.Setenv("GOTOK_MODEL", "")
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.gguf")
	os.WriteFile(junk, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644)
	cases := [][]string{
		{"run", "-p", "hi"}, // no model
		{"info", "-m", filepath.Join(dir, "missing.gguf")},
		{"info", "-m", junk},
		{"run", "-m", junk, "-p", "x"},
		{"gen", "-o", filepath.Join(dir, "x.gguf"), "--preset", "nope"},
		{"gen", "-o", filepath.Join(dir, "x.gguf"), "--preset", "tiny", "--type", "q9_9"},
		{"gen", "--preset", "tiny"}, // no -o
		{"gen", "-o", filepath.Join(dir, "x.gguf"), "--preset", "tiny", "--arch", "mamba"},
		{"quantize", junk, filepath.Join(dir, "y.gguf"), "--type", "q8_0"},
		{"bench", "-m", junk},
		{"run", "--bogus-flag"},
	}
	for _, args := range cases {
		if _, _, err := cli(t, args...); err == nil {
			t.Errorf("gotok %v: no error", args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "y.gguf")); err == nil {
		t.Error("failed quantize left an output file")
	}
}

func TestRunErrorsOnPromptPastContext(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tiny.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "tiny"); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("hello world ", 100)
	_, _, err := cli(t, "run", "-m", p, "-p", long, "--ctx", "32", "--device", "cpu")
	if err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("prompt past the context: err = %v", err)
	}
	_, _, err = cli(t, "run", "-m", p, "-p", "hi", "--device", "tpu")
	if err == nil || !strings.Contains(err.Error(), "device") {
		t.Errorf("bad device: err = %v", err)
	}
}

// TestRunVerboseSaysMemory: run -v reports what the backend holds, the
// KV cache at its size for the context asked for.
func TestRunVerboseSaysMemory(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tiny.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "tiny"); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := cli(t, "run", "-m", p, "-p", "hi", "-n", "2", "--ctx", "64", "--device", "cpu", "-v")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(errOut, "memory:")
	if i < 0 {
		t.Fatalf("run -v says nothing of memory:\n%s", errOut)
	}
	line, _, _ := strings.Cut(errOut[i:], "\n")
	for _, want := range []string{"MiB of host memory", "weights", "KV cache", "the rest"} {
		if !strings.Contains(line, want) {
			t.Errorf("run -v: %q lacks %q", line, want)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "tiny"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOTOK_MODEL", p)
	out, _, err := cli(t, "bench", "-p", "16,32", "-n", "8", "-r", "2", "--json", "--device", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want pp16, pp32, tg8", len(rows))
	}
	for i, want := range [][2]float64{{16, 0}, {32, 0}, {0, 8}} {
		r := rows[i]
		if r["n_prompt"] != want[0] || r["n_gen"] != want[1] || !(r["avg_ts"].(float64) > 0) || r["stddev_ts"] == nil || r["model_filename"] != "tiny.gguf" ||
			r["type_k"] != "f16" || r["type_v"] != "f16" { // the CPU's default cache, as llama-bench names it
			t.Errorf("row %d: %v", i, r)
		}
	}
	table, _, err := cli(t, "bench", "-p", "16", "-n", "4", "-r", "1", "--device", "cpu")
	if err != nil || !strings.Contains(table, "pp16") || !strings.Contains(table, "tg4") {
		t.Errorf("bench table: %v\n%s", err, table)
	}
	out, _, err = cli(t, "bench", "-p", "16", "-n", "4", "--npl", "1,3", "--json", "--device", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	var batched []map[string]any
	if err := json.Unmarshal([]byte(out), &batched); err != nil || len(batched) != 2 {
		t.Fatalf("bench --npl --json: %v\n%s", err, out)
	}
	for i, b := range []float64{1, 3} {
		r := batched[i]
		if r["pl"] != b || r["n_kv"] != b*20 || !(r["speed_tg"].(float64) > 0) || !(r["speed_pp"].(float64) > 0) {
			t.Errorf("bench --npl row %d: %v", i, r)
		}
	}
	if _, _, err := cli(t, "bench", "-p", "16", "-n", "4", "--npl", "0", "--device", "cpu"); err == nil {
		t.Error("bench --npl 0: no error")
	}
	// A depth past the model's context: without --ctx, room is made for
	// it (as llama-bench does); with a --ctx too small, a clear error.
	ctxLen := 0
	for _, r := range rows {
		ctxLen = int(r["n_ctx"].(float64))
	}
	deep := strconv.Itoa(ctxLen)
	out, _, err = cli(t, "bench", "-p", "8", "-n", "4", "-d", deep, "-r", "1", "--json", "--device", "cpu")
	if err != nil {
		t.Fatalf("bench -d %s: %v", deep, err)
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 || rows[0]["n_ctx"] != float64(ctxLen+8) {
		t.Errorf("bench -d %s: %v\n%s", deep, err, out)
	}
	if _, _, err := cli(t, "bench", "-p", "8", "-n", "4", "-d", deep, "-c", "64", "-r", "1", "--device", "cpu"); err == nil || !strings.Contains(err.Error(), "--ctx") {
		t.Errorf("bench -d %s -c 64: err = %v, want one saying to raise --ctx", deep, err)
	}
}

func TestQuantizeKeepsQuantizedUnlessAllowed(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "q4.gguf")
	if _, _, err := cli(t, "gen", "-o", src, "--preset", "tiny", "--type", "q4_0"); err != nil {
		t.Fatal(err)
	}
	typeOf := func(path, name string) string {
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ti, _ := f.Tensor(name)
		return ti.Type.String()
	}
	kept, requant := filepath.Join(dir, "kept.gguf"), filepath.Join(dir, "requant.gguf")
	if _, stderr, err := cli(t, "quantize", src, kept, "--type", "q8_0"); err != nil || !strings.Contains(stderr, "--allow-requantize") {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if got := typeOf(kept, "blk.0.attn_q.weight"); got != "Q4_0" {
		t.Errorf("without --allow-requantize attn_q became %s", got)
	}
	if _, _, err := cli(t, "quantize", src, requant, "--type", "q8_0", "--allow-requantize"); err != nil {
		t.Fatal(err)
	}
	if got := typeOf(requant, "blk.0.attn_q.weight"); got != "Q8_0" {
		t.Errorf("with --allow-requantize attn_q is %s", got)
	}
	if st, err := os.Stat(requant); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("output mode %v, %v", st.Mode(), err)
	}
}

func TestGenWithTokenizerFromGGUF(t *testing.T) {
	src := filepath.Join(shared(t), "models", "stories260K.gguf")
	p := filepath.Join(t.TempDir(), "t.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "tiny", "--tokenizer", src); err != nil {
		t.Fatal(err)
	}
	info := infoJSON(t, p)
	if info.Tokenizer.Model != "llama" || info.Tokenizer.VocabSize != 512 || info.Config.VocabSize != 512 {
		t.Errorf("tokenizer %+v, vocab %d", info.Tokenizer, info.Config.VocabSize)
	}
	out, _, err := cli(t, "run", "-m", p, "-p", "Once upon", "-n", "5", "--temp", "0", "--device", "cpu")
	if err != nil || out == "" {
		t.Errorf("run: %q, %v", out, err)
	}
}

// TestQuantizeMix writes llama.cpp's Q4_K_M mix from an F16 model: the
// output head Q6_K, the V and down projections of layers 2 and 3 Q6_K (of
// 4: use_more_bits), the rest Q4_K, file type 15; --pure writes Q4_K
// everywhere; and the file runs.
func TestQuantizeMix(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "f16.gguf")
	if _, _, err := cli(t, "gen", "-o", src, "--preset", "test-256", "--type", "f16"); err != nil {
		t.Fatal(err)
	}
	mixed, pure := filepath.Join(dir, "q4_k_m.gguf"), filepath.Join(dir, "pure.gguf")
	_, stderr, err := cli(t, "quantize", src, mixed, "--type", "Q4_K_M")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "Q6_K") || !strings.Contains(stderr, "Q4_K") {
		t.Errorf("summary does not count the types:\n%s", stderr)
	}
	f, err := gguf.Open(mixed)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors {
		want := "Q4_K"
		switch {
		case len(ti.Shape) != 2 || strings.Contains(ti.Name, "_norm"):
			want = ti.Type.String() // kept
		case ti.Name == "output.weight",
			strings.HasPrefix(ti.Name, "blk.2.") || strings.HasPrefix(ti.Name, "blk.3."):
			if ti.Name == "output.weight" || strings.HasSuffix(ti.Name, "attn_v.weight") || strings.HasSuffix(ti.Name, "ffn_down.weight") {
				want = "Q6_K"
			}
		}
		if ti.Type.String() != want {
			t.Errorf("%s: %s, want %s", ti.Name, ti.Type, want)
		}
	}
	if ft := f.Metadata.IntOr("general.file_type", -1); ft != 15 {
		t.Errorf("general.file_type %d, want 15 (Q4_K_M)", ft)
	}
	f.Close()
	if _, _, err := cli(t, "quantize", src, pure, "--type", "q4_k_m", "--pure"); err != nil {
		t.Fatal(err)
	}
	f, err = gguf.Open(pure)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := f.Tensor("output.weight"); out.Type != quant.Q4_K {
		t.Errorf("--pure output.weight: %s, want Q4_K", out.Type)
	}
	f.Close()
	out, _, err := cli(t, "run", "-m", mixed, "-p", "hello", "-n", "8", "--temp", "0", "--device", "cpu")
	if err != nil || out == "" {
		t.Errorf("running the Q4_K_M file: %v (%q)", err, out)
	}
	if _, _, err := cli(t, "quantize", src, filepath.Join(dir, "x.gguf"), "--type", "iq2_xs"); err == nil {
		t.Error("iq2_xs (no encoder) was accepted")
	}
	q3 := filepath.Join(dir, "q3_k_m.gguf")
	if _, _, err := cli(t, "quantize", src, q3, "--type", "q3_k_m"); err != nil {
		t.Fatal(err)
	}
	if out, _, err := cli(t, "run", "-m", q3, "-p", "hello", "-n", "4", "--temp", "0", "--device", "cpu"); err != nil || out == "" {
		t.Errorf("running the Q3_K_M file: %v (%q)", err, out)
	}
}
