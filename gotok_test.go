package gotok

import (
	"context"
	"errors"
	"gotok/quant"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotok/internal/sharedtest"
)

// sharedDir is the project's shared/ folder with stories260K, or skips.
func sharedDir(t *testing.T) string {
	t.Helper()
	return sharedtest.Dir(t, "models/stories260K.gguf")
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

// TestStories260KGreedyMatchesGolden runs the golden sample with each KV
// cache type (an f16 cache agrees for 200 tokens too).
func TestStories260KGreedyMatchesGolden(t *testing.T) {
	for _, kv := range []string{"f32", "f16"} {
		t.Run(kv, func(t *testing.T) { testGreedyMatchesGolden(t, kv) })
	}
}

func testGreedyMatchesGolden(t *testing.T, kv string) {
	shared := sharedDir(t)
	golden := goldenText(t, shared)
	m, err := Load(filepath.Join(shared, "models", "stories260K.gguf"), Options{Device: "cpu", KVType: kv})
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

func TestLoadRefusesKVType(t *testing.T) {
	shared := sharedDir(t)
	_, err := Load(filepath.Join(shared, "models", "stories260K.gguf"), Options{Device: "cpu", KVType: "q8_0"})
	if err == nil || !strings.Contains(err.Error(), "q8_0") {
		t.Fatalf("KVType q8_0: error %v, want one naming it", err)
	}
	// f32 on CUDA is refused for what it is, whether or not a GPU is here.
	_, err = Load(filepath.Join(shared, "models", "stories260K.gguf"), Options{Device: "cuda", KVType: "f32"})
	if err == nil || errors.Is(err, ErrNoCUDA) || !strings.Contains(err.Error(), "f16 only") {
		t.Fatalf("KVType f32 on CUDA: error %v, want one saying the cache is f16 only", err)
	}
}

// TestKVTypeDefault: "" is f16 (on CUDA its only type), and Model.KVType
// says which the model got.
func TestKVTypeDefault(t *testing.T) {
	for _, tc := range []struct {
		kv   string
		want quant.Type
	}{{"", quant.F16}, {"f32", quant.F32}, {"f16", quant.F16}} {
		if got, err := (Options{KVType: tc.kv}).kvType(); err != nil || got != tc.want {
			t.Errorf("KVType %q: %v, %v; want %v", tc.kv, got, err, tc.want)
		}
	}
	path := filepath.Join(sharedDir(t), "models", "stories260K.gguf")
	for kv, want := range map[string]string{"": "f16", "f32": "f32", "f16": "f16"} {
		m, err := Load(path, Options{Device: "cpu", KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.KVType(); got != want {
			t.Errorf("KVType %q on the CPU: the model has %q, want %q", kv, got, want)
		}
		m.Close()
	}
	// f32 on device auto: the CPU engine, the only one with it, GPU or not.
	m, err := Load(path, Options{Device: "auto", KVType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.KVType(); got != "f32" || !strings.HasPrefix(m.backend.Name(), "cpu") {
		t.Errorf("KVType f32 on device auto: %q on %s, want f32 on the CPU", got, m.backend.Name())
	}
}
