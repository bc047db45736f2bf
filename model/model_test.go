package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
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
		ContextLen: 256, RMSEps: 1e-5, Rope: Rope{Dim: 16, Base: 10000, FreqScale: 1, AttnFactor: 1}, TiedEmbeddings: true,
		Block:     Block{EmbedScale: 1, ResidualScale: 1, AttnScale: 0.25, LogitScale: 1},
		LayerAttn: make([]LayerAttention, 2)}
	if !reflect.DeepEqual(c, want) {
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
		{"rope scaling", func(w *gguf.Writer) { w.Set("llama.rope.scaling.type", "longrope") }, "longrope"},
		{"vocab size", func(w *gguf.Writer) { w.Set("llama.vocab_size", uint32(7)) }, "vocab_size"},
		{"more layers than tensors", func(w *gguf.Writer) { w.Set("llama.block_count", uint32(3)) }, "no blk.2 tensors"},
		{"absurd layer count", func(w *gguf.Writer) { w.Set("llama.block_count", uint32(2_000_000_000)) }, "block_count"},
		{"dim mismatch", func(w *gguf.Writer) { w.Set("llama.embedding_length", uint32(128)) }, "shape"},
		{"ffn mismatch", func(w *gguf.Writer) { w.Set("llama.feed_forward_length", uint32(100)) }, "shape"},
		{"split", func(w *gguf.Writer) { w.Set("split.count", uint16(3)); w.Set("split.no", uint16(0)) }, "part 1 of a 3-part GGUF model: gotok loads single-file models only"},
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

// TestMetadataRefused: a key that changes the maths is applied or the file
// is refused, naming the key; keys at their "off" value pass.
func TestMetadataRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(w *gguf.Writer)
		want string // "" when the file loads
	}{
		{"unknown key", func(w *gguf.Writer) { w.Set("llama.attention.new_thing", float32(2)) }, "llama.attention.new_thing"},
		{"experts", func(w *gguf.Writer) { w.Set("llama.expert_count", uint32(8)) }, "llama.expert_count"},
		{"no experts", func(w *gguf.Writer) { w.Set("llama.expert_count", uint32(0)) }, ""},
		{"sliding window", func(w *gguf.Writer) { w.Set("llama.attention.sliding_window", uint32(4096)) }, ""},
		{"sliding window pattern", func(w *gguf.Writer) { w.Set("llama.attention.sliding_window_pattern", uint32(2)) }, "sliding_window_pattern"},
		{"softcap", func(w *gguf.Writer) { w.Set("llama.final_logit_softcapping", float32(30)) }, "final_logit_softcapping"},
		{"softcap off", func(w *gguf.Writer) { w.Set("llama.final_logit_softcapping", float32(0)) }, ""},
		{"multiplier", func(w *gguf.Writer) { w.Set("llama.residual_scale", float32(0.22)) }, "residual_scale"},
		{"unit multiplier", func(w *gguf.Writer) { w.Set("llama.logit_scale", float32(1)) }, ""},
		{"attention scale", func(w *gguf.Writer) { w.Set("llama.attention.scale", float32(0.1)) }, "attention.scale"},
		{"not causal", func(w *gguf.Writer) { w.Set("llama.attention.causal", false) }, "causal"},
		{"layer norm", func(w *gguf.Writer) { w.Set("llama.attention.layer_norm_epsilon", float32(1e-5)) }, "layer_norm_epsilon"},
		{"parallel residual", func(w *gguf.Writer) { w.Set("llama.use_parallel_residual", true) }, "use_parallel_residual"},
		{"longrope", func(w *gguf.Writer) { w.Set("llama.rope.scaling.type", "longrope") }, "longrope"},
		{"split", func(w *gguf.Writer) { w.Set("split.count", uint16(3)) }, "split"},
		{"adapter", func(w *gguf.Writer) { w.Set("adapter.type", "lora") }, "adapter"},
		{"other namespaces pass", func(w *gguf.Writer) { w.Set("quantize.imatrix.file", "x.dat") }, ""},
		{"yarn", func(w *gguf.Writer) {
			w.Set("llama.rope.scaling.type", "yarn")
			w.Set("llama.rope.scaling.factor", float32(4))
		}, ""},
	} {
		f, err := tinyFile(t, tc.edit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = FromFile(f)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}

// TestRopeScalingFromMetadata: the factor applies under either key and is
// linear unless the file says otherwise (as in llama.cpp); "none" turns it
// off; YaRN keeps its magnitude correction.
func TestRopeScalingFromMetadata(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        map[string]any
		freqScale  float64
		ext        float64
		attnFactor float64
	}{
		{"none given", nil, 1, 0, 1},
		{"factor alone is linear", map[string]any{"llama.rope.scaling.factor": float32(4)}, 0.25, 0, 1},
		{"old key", map[string]any{"llama.rope.scale_linear": float32(2)}, 0.5, 0, 1},
		{"type none", map[string]any{"llama.rope.scaling.type": "none", "llama.rope.scaling.factor": float32(4)}, 1, 0, 1},
		{"yarn", map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": float32(4),
			"llama.rope.scaling.original_context_length": uint32(128)}, 0.25, 1, 1},
		{"attn factor", map[string]any{"llama.rope.scaling.attn_factor": float32(1.5)}, 1, 0, 1.5},
	} {
		f, err := tinyFile(t, func(w *gguf.Writer) {
			for k, v := range tc.set {
				w.Set(k, v)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		m, err := FromFile(f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r := m.Config.Rope
		if r.FreqScale != tc.freqScale || r.ExtFactor != tc.ext || math.Abs(r.AttnFactor-tc.attnFactor) > 1e-9 {
			t.Errorf("%s: freq scale %g, ext %g, attn factor %g; want %g, %g, %g", tc.name, r.FreqScale, r.ExtFactor, r.AttnFactor,
				tc.freqScale, tc.ext, tc.attnFactor)
		}
	}
}

// TestTensorsAllBound: a tensor the engine does not use is refused by
// name; rope_freqs.weight is bound as the rotation's factors.
func TestTensorsAllBound(t *testing.T) {
	f32 := func(n int, v float32) []byte {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		add   string
		shape []uint64
		data  []byte
		want  string
	}{
		{"qk norm", "blk.0.attn_q_norm.weight", []uint64{16}, f32(16, 1), "tensor blk.0.attn_q_norm.weight is not supported"},
		{"output bias", "output.bias", []uint64{320}, f32(320, 0), "tensor output.bias is not supported"},
		{"post norm", "blk.1.post_ffw_norm.weight", []uint64{64}, f32(64, 1), "tensor blk.1.post_ffw_norm.weight is not supported"},
		{"rope factors", "rope_freqs.weight", []uint64{8}, f32(8, 2), ""},
		{"rope factors shape", "rope_freqs.weight", []uint64{16}, f32(16, 2), "rope_freqs.weight has shape"},
		{"rope factors zero", "rope_freqs.weight", []uint64{8}, f32(8, 0), "rope_freqs.weight[0]"},
	} {
		f, err := tinyFile(t, func(w *gguf.Writer) { w.AddTensor(tc.add, quant.F32, tc.shape, tc.data) })
		if err != nil {
			t.Fatal(err)
		}
		m, err := FromFile(f)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "":
			if r := m.Config.Rope; len(r.Factors) != 8 || r.Factors[7] != 2 {
				t.Errorf("%s: factors %v", tc.name, r.Factors)
			}
		case err == nil || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
