package gguf_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gotok/gguf"
	"gotok/quant"
)

// sharedModel finds shared/models/name in the working directory or one of
// its parents (the shared directory sits beside the checkout, not in it).
func sharedModel(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		path := filepath.Join(dir, "shared", "models", name)
		if _, err := os.Stat(path); err == nil {
			return path
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("%s not found in shared/models beside the checkout or any parent of the working directory; the shared directory is absent", name)
		}
		dir = parent
	}
}

// TestStories260K reads a real llama.cpp-converted model and writes it back
// byte for byte.
func TestStories260K(t *testing.T) {
	path := sharedModel(t, "stories260K.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if f.Version != 3 || len(f.Tensors) != 48 || f.Alignment != 32 {
		t.Errorf("version %d, %d tensors, alignment %d; want 3, 48, 32", f.Version, len(f.Tensors), f.Alignment)
	}
	if arch := f.StringOr("general.architecture", ""); arch != "llama" {
		t.Errorf("architecture %q", arch)
	}
	ints := map[string]int64{
		"llama.block_count":             5,
		"llama.embedding_length":        64,
		"llama.feed_forward_length":     172,
		"llama.attention.head_count":    8,
		"llama.attention.head_count_kv": 4,
		"llama.context_length":          2048,
		"llama.rope.dimension_count":    8,
	}
	for key, want := range ints {
		if got, ok := f.Int(key); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, ok, want)
		}
	}
	if eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); !ok || eps != float64(float32(1e-5)) {
		t.Errorf("rms epsilon %g, %v", eps, ok)
	}
	if v, _ := f.Value("llama.attention.layer_norm_rms_epsilon"); v.Type != gguf.TypeFloat32 {
		t.Errorf("rms epsilon is %s, want float32", v.Type)
	}
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Ints("tokenizer.ggml.token_type")
	if !ok || len(tokens) != 512 || len(scores) != 512 || len(types) != 512 {
		t.Errorf("vocabulary: %d tokens, %d scores, %d types; want 512 each", len(tokens), len(scores), len(types))
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Type != quant.F32 || !reflect.DeepEqual(emb.Shape, []uint64{64, 512}) || emb.Size != 64*512*4 || emb.Offset != 0 {
		t.Fatalf("token_embd.weight: %+v", emb)
	}
	// The first tensor's view starts at the data offset of the file.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(emb.Data[:64], raw[f.DataOffset:f.DataOffset+64]) {
		t.Error("token_embd.weight data is not the file's bytes at the data offset")
	}
	// Every weight of this all-F32 model is a finite float.
	for _, ti := range f.Tensors {
		for i := 0; i < len(ti.Data); i += 4 {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(ti.Data[i:])); math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("tensor %s element %d is %g", ti.Name, i/4, v)
			}
		}
	}

	// Read and written back, the file must come out identical: same order of
	// keys and tensors, same types, same padding.
	if got := rewrite(t, f); !bytes.Equal(got, raw) {
		n := 0
		for n < min(len(got), len(raw)) && got[n] == raw[n] {
			n++
		}
		t.Fatalf("rewritten model differs from the original at byte %d (%d vs %d bytes)", n, len(got), len(raw))
	}
}
