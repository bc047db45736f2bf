package model

import (
	"bytes"
	"strings"
	"testing"

	"gotok/gguf"
	"gotok/model/synth"
	"gotok/quant"
)

// tinyFile writes the tiny preset, lets edit change the writer's metadata
// through extra Set calls, and parses it back.
func tinyFile(t *testing.T, edit func(w *gguf.Writer)) (*gguf.File, error) {
	t.Helper()
	w, err := synth.Generate(synth.Options{Shape: synth.Presets["tiny"], Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(w)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return gguf.Parse(buf.Bytes())
}

func TestFromFileTiny(t *testing.T) {
	f, err := tinyFile(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := FromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	want := Config{Arch: "llama", NumLayers: 2, Dim: 64, NumHeads: 4, NumKVHeads: 2, HeadDim: 16, FFNDim: 192, VocabSize: 320,
		ContextLen: 256, RMSEps: 1e-5, RopeBase: 10000, RopeDim: 16, RopeFreqScale: 1, TiedEmbeddings: true}
	if c != want {
		t.Errorf("config\n got %+v\nwant %+v", c, want)
	}
	if &m.Output.Data[0] != &m.TokenEmbd.Data[0] || m.Layers[1].Down.Rows != 64 || m.Layers[1].Down.Cols != 192 {
		t.Error("tensor binding wrong")
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(w *gguf.Writer)
		want string
	}{
		{"arch", func(w *gguf.Writer) { w.Set("general.architecture", "mamba") }, "not supported"},
		{"no layers", func(w *gguf.Writer) { w.Set("llama.block_count", "five") }, "block_count"},
		{"zero heads", func(w *gguf.Writer) { w.Set("llama.attention.head_count", uint32(0)) }, "head_count"},
		{"kv heads", func(w *gguf.Writer) { w.Set("llama.attention.head_count_kv", uint32(3)) }, "KV heads"},
		{"rope dim", func(w *gguf.Writer) { w.Set("llama.rope.dimension_count", uint32(100)) }, "rope dimension"},
		{"rope scaling", func(w *gguf.Writer) { w.Set("llama.rope.scaling.type", "yarn") }, "yarn"},
		{"vocab size", func(w *gguf.Writer) { w.Set("llama.vocab_size", uint32(7)) }, "vocab_size"},
		{"more layers than tensors", func(w *gguf.Writer) { w.Set("llama.block_count", uint32(3)) }, "no blk.2 tensors"},
		{"absurd layer count", func(w *gguf.Writer) { w.Set("llama.block_count", uint32(2_000_000_000)) }, "block_count"},
		{"dim mismatch", func(w *gguf.Writer) { w.Set("llama.embedding_length", uint32(128)) }, "shape"},
		{"ffn mismatch", func(w *gguf.Writer) { w.Set("llama.feed_forward_length", uint32(100)) }, "shape"},
	}
	for _, tc := range cases {
		f, err := tinyFile(t, tc.edit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = FromFile(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

func TestUnsupportedTensorType(t *testing.T) {
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	for k, v := range map[string]uint32{"block_count": 1, "embedding_length": 32, "feed_forward_length": 32, "attention.head_count": 1, "context_length": 8} {
		w.Set("llama."+k, v)
	}
	w.AddTensor("token_embd.weight", quant.IQ2_XXS, []uint64{256, 4}, make([]byte, 4*66))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	_, err = FromFile(f)
	if err == nil || !strings.Contains(err.Error(), "token_embd.weight") || !strings.Contains(err.Error(), "IQ2_XXS") {
		t.Errorf("err = %v, want it to name the tensor and its type", err)
	}
}

func TestPartialQKVBiasesAreAnError(t *testing.T) {
	f, err := tinyFile(t, func(w *gguf.Writer) {
		w.Set("general.architecture", "qwen2")
		for k, v := range map[string]uint32{"block_count": 2, "context_length": 256, "embedding_length": 64, "feed_forward_length": 192, "attention.head_count": 4, "attention.head_count_kv": 2} {
			w.Set("qwen2."+k, v)
		}
		w.AddTensor("blk.0.attn_q.bias", quant.F32, []uint64{64}, make([]byte, 64*4))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = FromFile(f)
	if err == nil || !strings.Contains(err.Error(), "biases") {
		t.Errorf("err = %v, want an error about partial biases", err)
	}
}
