package gotok

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"gotok/model/synth"
	"gotok/quant"
)

// FuzzLoadMetadata edits a tiny model's hyperparameters (the llama.* keys a
// hostile or broken file may set to anything) and loads it on the CPU:
// Load either refuses the file with an error or gives a model that
// generates a few tokens; nothing panics or hangs.
func FuzzLoadMetadata(f *testing.F) {
	f.Add(uint32(2), uint32(64), uint32(192), uint32(4), uint32(2), uint32(16), uint32(16), uint32(256), float32(1e-5), float32(10000), uint32(0))
	f.Add(uint32(2), uint32(64), uint32(192), uint32(4), uint32(4), uint32(16), uint32(8), uint32(1), float32(0), float32(0), uint32(3))
	f.Add(uint32(2), uint32(64), uint32(192), uint32(4), uint32(1), uint32(0), uint32(0), uint32(1<<31), float32(math.NaN()), float32(math.Inf(1)), uint32(1))
	f.Fuzz(func(t *testing.T, layers, dim, ffn, heads, kvHeads, keyLen, ropeDim, ctxLen uint32, eps, base float32, window uint32) {
		w, err := synth.Generate(synth.Options{Shape: synth.Presets["tiny"], Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		w.Set("llama.block_count", layers)
		w.Set("llama.embedding_length", dim)
		w.Set("llama.feed_forward_length", ffn)
		w.Set("llama.attention.head_count", heads)
		w.Set("llama.attention.head_count_kv", kvHeads)
		if keyLen != 0 {
			w.Set("llama.attention.key_length", keyLen)
			w.Set("llama.attention.value_length", keyLen)
		}
		w.Set("llama.rope.dimension_count", ropeDim)
		w.Set("llama.context_length", ctxLen)
		w.Set("llama.attention.layer_norm_rms_epsilon", eps)
		w.Set("llama.rope.freq_base", base)
		if window != 0 {
			w.Set("llama.attention.sliding_window", window)
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path); err != nil {
			return
		}
		m, err := Load(path, Options{Device: "cpu", Threads: 1, ContextLen: 64})
		if err != nil {
			return
		}
		defer m.Close()
		_, err = m.Generate(context.Background(), "hello", GenerateOptions{MaxTokens: 3}, func(string) error { return nil })
		if err != nil {
			t.Logf("generate: %v", err)
		}
	})
}
