package model

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gotok/gguf"
	"gotok/model/synth"
	"gotok/quant"
)

// synthFile writes a tiny synthetic model of architecture a (4 layers) and
// parses it, after edit changes the writer.
func synthFile(t *testing.T, a string, headDim int, edit func(w *gguf.Writer)) *gguf.File {
	t.Helper()
	shape := synth.Presets["tiny"]
	shape.Arch, shape.HeadDim, shape.Layers, shape.RopeBase = a, headDim, 4, 1e6
	w, err := synth.Generate(synth.Options{Shape: shape, Type: quant.F32, EmbedType: quant.F32, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(w)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestArchConfigs: each family's description as its metadata and llama.cpp
// set it up.
func TestArchConfigs(t *testing.T) {
	llama := LlamaBlock(16)
	for _, tc := range []struct {
		arch    string
		headDim int
		block   Block
		attn    []LayerAttention
	}{
		{"llama", 0, llama, make([]LayerAttention, 4)},
		{"qwen2", 0, llama, make([]LayerAttention, 4)},
		{"qwen3", 32, Block{QKNorm: QKNormHead, EmbedScale: 1, ResidualScale: 1, LogitScale: 1, AttnScale: float32(1 / math.Sqrt(32))},
			make([]LayerAttention, 4)},
		// Granite's logit_scale 0.5 divides: a multiplier of 2.
		{"granite", 0, Block{EmbedScale: 2, ResidualScale: 0.5, AttnScale: 0.1, LogitScale: 2}, make([]LayerAttention, 4)},
		{"olmo2", 0, Block{NoPreNorm: true, PostNorm: true, QKNorm: QKNormFull, EmbedScale: 1, ResidualScale: 1, LogitScale: 1, AttnScale: 0.25},
			make([]LayerAttention, 4)},
		// Gemma 3: pattern 2, so layers 1 and 3 are global.
		{"gemma3", 32, Block{PostNorm: true, QKNorm: QKNormHead, Act: GELUTanh, EmbedScale: 8, ResidualScale: 1, LogitScale: 1,
			AttnScale: float32(1 / math.Sqrt(32)), FinalSoftcap: 8},
			[]LayerAttention{{Window: 4, LocalRope: true}, {}, {Window: 4, LocalRope: true}, {}}},
		// Gemma 2: the default pattern 2.
		{"gemma2", 0, Block{PostNorm: true, Act: GELUTanh, EmbedScale: 8, ResidualScale: 1, LogitScale: 1, AttnScale: 0.25,
			AttnSoftcap: 1.5, FinalSoftcap: 8},
			[]LayerAttention{{Window: 4, LocalRope: true}, {}, {Window: 4, LocalRope: true}, {}}},
		{"smollm3", 0, llama, []LayerAttention{{}, {}, {}, {NoRope: true}}},
		{"mistral", 0, llama, []LayerAttention{{Window: 4}, {Window: 4}, {Window: 4}, {Window: 4}}},
		{"mistral3", 0, Block{EmbedScale: 1, ResidualScale: 1, LogitScale: 1, AttnScale: 0.25, AttnTempScale: 0.5, AttnTempFloor: 8},
			make([]LayerAttention, 4)},
		// Phi-3's window is read and, as in llama.cpp, not applied.
		{"phi3", 0, llama, make([]LayerAttention, 4)},
	} {
		m, err := FromFile(synthFile(t, tc.arch, tc.headDim, nil))
		if err != nil {
			t.Errorf("%s: %v", tc.arch, err)
			continue
		}
		c := m.Config
		if c.Block != tc.block || !reflect.DeepEqual(c.LayerAttn, tc.attn) {
			t.Errorf("%s:\n got %+v %+v\nwant %+v %+v", tc.arch, c.Block, c.LayerAttn, tc.block, tc.attn)
		}
		if want := !slices.Contains([]string{"llama", "mistral", "mistral3", "smollm3", "granite"}, tc.arch); c.Rope.Neox != want {
			t.Errorf("%s: NeoX rotation %v", tc.arch, c.Rope.Neox)
		}
		switch tc.arch {
		case "gemma3":
			if c.LocalRope.Base != 10000 || c.Rope.Base != 1e6 || c.LocalRope.Neox != true {
				t.Errorf("gemma3: local base %g, global %g", c.LocalRope.Base, c.Rope.Base)
			}
		case "gemma2":
			if c.LocalRope.Base != c.Rope.Base {
				t.Errorf("gemma2: local base %g, global %g", c.LocalRope.Base, c.Rope.Base)
			}
		case "mistral3":
			// 1 + 0.5·ln(⌊p/8⌋ + 1): 1 up to position 7, then 1 + 0.5·ln 2.
			if c.Block.AttnTemp(7) != 1 || math.Abs(float64(c.Block.AttnTemp(8))-(1+0.5*math.Ln2)) > 1e-6 {
				t.Errorf("mistral3: temperatures %g, %g", c.Block.AttnTemp(7), c.Block.AttnTemp(8))
			}
		case "qwen2":
			if m.Layers[0].Bq == nil {
				t.Error("qwen2: no biases bound")
			}
		case "phi3":
			// The fused tensors split into rows: Q, K, V; gate, up.
			qkv, _ := m.File.Tensor("blk.0.attn_qkv.weight")
			l := m.Layers[0]
			if &l.Wq.Data[0] != &qkv.Data[0] || &l.Wk.Data[0] != &qkv.Data[64*64*4] || &l.Wv.Data[0] != &qkv.Data[(64+32)*64*4] ||
				l.Wq.Rows != 64 || l.Wk.Rows != 32 || l.Wv.Rows != 32 {
				t.Error("phi3: attn_qkv split wrong")
			}
			up, _ := m.File.Tensor("blk.0.ffn_up.weight")
			if &l.Gate.Data[0] != &up.Data[0] || &l.Up.Data[0] != &up.Data[192*64*4] || l.Gate.Rows != 192 || l.Up.Rows != 192 {
				t.Error("phi3: ffn_up split wrong")
			}
			r := c.Rope
			if r.Factors == nil || r.LongFactors == nil || r.ShortContext != 32 || math.Abs(r.AttnFactor-1.2) > 1e-6 {
				t.Errorf("phi3: LongRoPE %+v", r)
			}
			if short, long := r.ForContext(32), r.ForContext(33); &short.Factors[0] != &r.Factors[0] || &long.Factors[0] != &r.LongFactors[0] {
				t.Error("phi3: ForContext picks the wrong factors")
			}
		}
	}
}

// TestArchRefusals: what a family does not have is refused by name.
func TestArchRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, arch string
		edit       func(w *gguf.Writer)
		want       string
	}{
		{"rope_freqs outside llama", "qwen3", func(w *gguf.Writer) {
			w.AddTensor("rope_freqs.weight", quant.F32, []uint64{8}, make([]byte, 32))
		}, "rope_freqs.weight is not supported"},
		{"granite's multipliers elsewhere", "qwen3", func(w *gguf.Writer) { w.Set("qwen3.residual_scale", float32(0.5)) }, "residual_scale"},
		{"softcap on qwen3", "qwen3", func(w *gguf.Writer) { w.Set("qwen3.attn_logit_softcapping", float32(50)) }, "attn_logit_softcapping"},
		{"gemma3 attention softcap", "gemma3", func(w *gguf.Writer) { w.Set("gemma3.attn_logit_softcapping", float32(50)) }, "attn_logit_softcapping"},
		{"per-layer window pattern", "gemma3", func(w *gguf.Writer) {
			w.Set("gemma3.attention.sliding_window_pattern", []bool{true, false, true, false})
		}, "sliding_window_pattern"},
		{"zero logit scale", "granite", func(w *gguf.Writer) { w.Set("granite.logit_scale", float32(0)) }, "logit_scale"},
		{"negative window", "mistral", func(w *gguf.Writer) { w.Set("mistral.attention.sliding_window", int32(-1)) }, "sliding_window"},
		{"LongRoPE outside phi3", "qwen3", func(w *gguf.Writer) {
			w.AddTensor("rope_factors_long.weight", quant.F32, []uint64{16}, make([]byte, 64))
		}, "rope_factors_long.weight is not supported"},
		{"unknown architecture", "llama", func(w *gguf.Writer) { w.Set("general.architecture", "mamba") }, "mamba"},
	} {
		f := synthFile(t, tc.arch, map[string]int{"qwen3": 32, "gemma3": 32}[tc.arch], tc.edit)
		_, err := FromFile(f)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}

// TestFeatures names what goes beyond the llama block, so a backend can
// refuse it; the llama block has none.
func TestFeatures(t *testing.T) {
	for _, a := range []string{"llama", "qwen2"} {
		m, err := FromFile(synthFile(t, a, 0, nil))
		if err != nil {
			t.Fatal(err)
		}
		if f := m.Config.Features(); len(f) != 0 {
			t.Errorf("%s: features %q", a, f)
		}
	}
	m, err := FromFile(synthFile(t, "gemma3", 32, nil))
	if err != nil {
		t.Fatal(err)
	}
	f := m.Config.Features()
	for _, want := range []string{"post-norms", "per-head Q/K RMS norm", "GELU-tanh FFN", "embedding scale", "sliding-window attention"} {
		if !slices.Contains(f, want) {
			t.Errorf("gemma3: features %q lack %q", f, want)
		}
	}
}

// TestSlidingWindowPatterns: OLMo 3's windows (olmo2 architecture) as a
// period or one boolean per layer, with its local layers' unscaled
// rotation; Granite's RoPE switch.
func TestSlidingWindowPatterns(t *testing.T) {
	local := LayerAttention{Window: 16, LocalRope: true}
	for _, tc := range []struct {
		name string
		set  map[string]any
		want []LayerAttention
	}{
		{"default period 4", map[string]any{"olmo2.attention.sliding_window": uint32(16)}, []LayerAttention{local, local, local, {}}},
		{"period 2", map[string]any{"olmo2.attention.sliding_window": uint32(16), "olmo2.attention.sliding_window_pattern": uint32(2)},
			[]LayerAttention{local, {}, local, {}}},
		{"per layer", map[string]any{"olmo2.attention.sliding_window": uint32(16),
			"olmo2.attention.sliding_window_pattern": []bool{false, true, true, false}}, []LayerAttention{{}, local, local, {}}},
	} {
		m, err := FromFile(synthFile(t, "olmo2", 0, func(w *gguf.Writer) {
			w.Set("olmo2.rope.scaling.type", "yarn")
			w.Set("olmo2.rope.scaling.factor", float32(8))
			for k, v := range tc.set {
				w.Set(k, v)
			}
		}))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := m.Config
		if !reflect.DeepEqual(c.LayerAttn, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, c.LayerAttn, tc.want)
		}
		if lr := c.LocalRope; lr.FreqScale != 1 || lr.ExtFactor != 0 || lr.AttnFactor != 1 || lr.Base != c.Rope.Base || !lr.Neox ||
			c.Rope.FreqScale != 0.125 {
			t.Errorf("%s: local rotation %+v, global %+v", tc.name, lr, c.Rope)
		}
	}
	_, err := FromFile(synthFile(t, "olmo2", 0, func(w *gguf.Writer) {
		w.Set("olmo2.attention.sliding_window", uint32(16))
		w.Set("olmo2.attention.sliding_window_pattern", []bool{true})
	}))
	if err == nil || !strings.Contains(err.Error(), "sliding_window_pattern") {
		t.Errorf("a pattern for 1 of 4 layers: %v", err)
	}

	m, err := FromFile(synthFile(t, "granite", 0, func(w *gguf.Writer) { w.Set("granite.rope.scaling.finetuned", false) }))
	if err != nil {
		t.Fatal(err)
	}
	for l, la := range m.Config.LayerAttn {
		if !la.NoRope {
			t.Errorf("granite without rope.scaling.finetuned: layer %d rotates", l)
		}
	}
}

// A fused Q/K/V bias of the wrong length is an error, not a panic.
func TestFusedBiasWrongLength(t *testing.T) {
	f := synthFile(t, "qwen2", 0, func(w *gguf.Writer) {
		w.AddTensor("blk.0.attn_qkv.weight", quant.F32, []uint64{64, 128}, make([]byte, 64*128*4))
		w.AddTensor("blk.0.attn_qkv.bias", quant.F32, []uint64{100}, make([]byte, 400))
	})
	if _, err := FromFile(f); err == nil || !strings.Contains(err.Error(), "attn_qkv.bias") {
		t.Errorf("FromFile = %v, want an error naming blk.0.attn_qkv.bias", err)
	}
}

// Every field of Block and LayerAttention that moves away from the plain
// llama block must show in Features: the CUDA engine refuses what Features
// lists, so a field it forgot would run wrong on the GPU.
func TestFeaturesCoverEveryField(t *testing.T) {
	const headDim = 64
	base := func() Config {
		return Config{HeadDim: headDim, Block: LlamaBlock(headDim), LayerAttn: make([]LayerAttention, 2)}
	}
	// change sets field v to a value other than the llama block's.
	change := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64, reflect.Int32:
			v.SetInt(v.Int() + 1)
		case reflect.Float32, reflect.Float64:
			v.SetFloat(v.Float() + 0.5)
		default:
			t.Fatalf("field of kind %v: teach this test how to change it", v.Kind())
		}
	}
	// AttnTempFloor only matters with AttnTempScale, which is a feature.
	skip := map[string]bool{"AttnTempFloor": true}
	bt := reflect.TypeFor[Block]()
	for i := range bt.NumField() {
		name := bt.Field(i).Name
		if skip[name] {
			continue
		}
		c := base()
		change(reflect.ValueOf(&c.Block).Elem().Field(i))
		if len(c.Features()) == 0 {
			t.Errorf("Block.%s changed, but Features() is empty", name)
		}
	}
	lt := reflect.TypeFor[LayerAttention]()
	for i := range lt.NumField() {
		c := base()
		change(reflect.ValueOf(&c.LayerAttn[1]).Elem().Field(i))
		if len(c.Features()) == 0 {
			t.Errorf("LayerAttention.%s changed, but Features() is empty", lt.Field(i).Name)
		}
	}
}
