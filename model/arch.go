package model

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"gotok/gguf"
)

// Block is how an architecture's decoder block differs from llama's. The
// zero value (with the unit multipliers ConfigFromMetadata fills in) is the
// llama block:
//
//	x += Wo·attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x))
//	x += Wdown·(silu(Wgate·n(x)) ⊙ Wup·n(x))
//
// with n an RMS norm. Each backend runs one generic block that reads this
// description; a feature a backend does not implement must make it refuse
// the model (Features names them).
type Block struct {
	// NoPreNorm: the attention and FFN inputs are not normalized (OLMo 2,
	// which normalizes the branch outputs instead).
	NoPreNorm bool
	// PostNorm: each branch's output is RMS-normalized before it joins the
	// residual stream (Gemma 2/3 in addition to the pre-norms, OLMo 2
	// instead of them).
	PostNorm bool
	// QKNorm normalizes queries and keys after their projection (and
	// biases), before RoPE.
	QKNorm QKNorm
	// Act is the FFN's gate activation.
	Act Activation
	// EmbedScale multiplies the token embeddings (Gemma: √d_model; Granite:
	// embedding_scale).
	EmbedScale float32
	// ResidualScale multiplies each branch's output before it joins the
	// residual stream (Granite).
	ResidualScale float32
	// AttnScale multiplies the attention scores q·k (llama: 1/√head_dim;
	// Granite's attention.scale replaces it).
	AttnScale float32
	// LogitScale multiplies the logits (Granite divides by logit_scale).
	LogitScale float32
	// AttnSoftcap and FinalSoftcap, when non-zero, squash the attention
	// scores (after AttnScale) and the logits (after LogitScale) to
	// cap·tanh(x/cap) (Gemma 2, and Gemma 3's final logits when set).
	AttnSoftcap, FinalSoftcap float32
	// AttnTempScale, when non-zero, multiplies the rotated queries of the
	// token at position p by 1 + AttnTempScale·ln(⌊p/AttnTempFloor⌋ + 1)
	// (Llama 4's and Ministral 3's attention temperature tuning).
	AttnTempScale float32
	AttnTempFloor int
}

// AttnTemp is the query multiplier of the token at position pos (1 without
// temperature tuning), computed as llama.cpp computes it.
func (b *Block) AttnTemp(pos int) float32 {
	if b.AttnTempScale == 0 {
		return 1
	}
	return float32(math.Log(math.Floor(float64(pos)/float64(b.AttnTempFloor))+1)*float64(b.AttnTempScale) + 1)
}

// LlamaBlock is the llama block of heads of headDim dimensions.
func LlamaBlock(headDim int) Block {
	return Block{EmbedScale: 1, ResidualScale: 1, LogitScale: 1, AttnScale: float32(1 / math.Sqrt(float64(headDim)))}
}

// QKNorm is where the queries and keys are RMS-normalized.
type QKNorm int

const (
	QKNormNone QKNorm = iota
	// QKNormHead normalizes each head with one head_dim weight shared by
	// the heads (Qwen3, Gemma 3).
	QKNormHead
	// QKNormFull normalizes the whole projection, all heads together, with
	// a weight per element (OLMo 2).
	QKNormFull
)

// Activation is the FFN's gate activation.
type Activation int

const (
	// SiLU: silu(gate) ⊙ up (SwiGLU).
	SiLU Activation = iota
	// GELUTanh: gelu(gate) ⊙ up with GELU's tanh approximation (GeGLU).
	GELUTanh
)

// LayerAttention is how one layer attends.
type LayerAttention struct {
	// Window is the number of positions a token attends to, its own
	// included (sliding-window attention); 0: all positions up to its own.
	Window int
	// LocalRope: the layer rotates with Config.LocalRope, not Config.Rope
	// (Gemma 3's local layers).
	LocalRope bool
	// NoRope: the layer does not rotate its queries and keys (SmolLM3's
	// every fourth layer).
	NoRope bool
}

// Features names what of the block and its attention goes beyond the
// llama block (Q/K/V biases, NeoX rotation and per-frequency RoPE factors
// aside), in words a user can read in an error: a backend refuses a model
// whose features it does not implement.
func (c *Config) Features() []string {
	b := &c.Block
	var f []string
	add := func(on bool, name string) {
		if on {
			f = append(f, name)
		}
	}
	add(b.NoPreNorm, "no pre-norm")
	add(b.PostNorm, "post-norms")
	add(b.QKNorm == QKNormHead, "per-head Q/K RMS norm")
	add(b.QKNorm == QKNormFull, "Q/K RMS norm over the whole projection")
	add(b.Act == GELUTanh, "GELU-tanh FFN")
	add(b.EmbedScale != 1, "embedding scale")
	add(b.ResidualScale != 1, "residual scale")
	add(b.AttnScale != float32(1/math.Sqrt(float64(c.HeadDim))), "attention scale other than 1/√head_dim")
	add(b.LogitScale != 1, "logit scale")
	add(b.AttnSoftcap != 0, "attention soft-capping")
	add(b.AttnTempScale != 0, "attention temperature scaling")
	add(b.FinalSoftcap != 0, "final logit soft-capping")
	var window, local, noRope bool
	for _, la := range c.LayerAttn {
		window = window || la.Window > 0
		local = local || la.LocalRope
		noRope = noRope || la.NoRope
	}
	add(window, "sliding-window attention")
	add(local, "per-layer RoPE base")
	add(noRope, "layers without RoPE")
	add(c.Rope.LongFactors != nil, "LongRoPE factors chosen by context")
	return f
}

// arch is one architecture: how its block differs from llama's, the
// metadata keys it reads for that, and the rotation it uses. Adding a
// family means an entry here, the tensors it needs in FromFile, and a test.
type arch struct {
	ropeNeox bool
	qkvBias  bool
	// ropeFreqs: the file may carry llama3's rope_freqs.weight.
	ropeFreqs bool
	// longRope: the file may carry LongRoPE's rope_factors_long.weight and
	// rope_factors_short.weight.
	longRope bool
	// fusedUp: ffn_up.weight holds the gate rows, then the up rows.
	fusedUp bool
	// keys are the metadata keys (after the "ARCH." prefix) setup reads.
	keys []string
	// setup fills in the block and per-layer attention from the metadata.
	setup func(c *Config, m *gguf.Metadata) error
}

var archs = map[string]arch{
	"llama":   {ropeFreqs: true, keys: []string{"attention.sliding_window"}, setup: setupWindow},
	"mistral": {ropeFreqs: true, keys: []string{"attention.sliding_window"}, setup: setupWindow},
	"qwen2":   {ropeNeox: true, qkvBias: true},
	// Ministral 3 and Mistral Small 3.x: the llama block, with attention
	// temperature tuning when the file sets it.
	"mistral3": {keys: []string{"attention.temperature_scale"}, setup: setupTemperature},
	// Phi-3 and Phi-4-mini: the llama block with fused projections.
	// llama.cpp disables Phi-3's sliding window (its converters set it
	// wrong), and so does gotok: the key is read and not applied.
	"phi3": {ropeNeox: true, longRope: true, fusedUp: true, keys: []string{"attention.sliding_window"}},
	"smollm3": {setup: func(c *Config, m *gguf.Metadata) error {
		// llama.cpp's fixed step: every fourth layer has no rotation.
		for l := range c.LayerAttn {
			c.LayerAttn[l].NoRope = (l+1)%4 == 0
		}
		return nil
	}},
	"qwen3": {ropeNeox: true, setup: func(c *Config, m *gguf.Metadata) error {
		c.Block.QKNorm = QKNormHead
		return nil
	}},
	"granite": {
		ropeFreqs: true,
		keys:      []string{"embedding_scale", "residual_scale", "attention.scale", "logit_scale", "rope.scaling.finetuned"},
		setup:     setupGranite,
	},
	"olmo2": {
		ropeNeox: true,
		keys:     []string{"attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa"},
		setup:    setupOLMo2,
	},
	"gemma2": {
		ropeNeox: true,
		keys: []string{"attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
			"attn_logit_softcapping", "final_logit_softcapping"},
		setup: func(c *Config, m *gguf.Metadata) error { return setupGemma(c, m, 2) },
	},
	"gemma3": {
		ropeNeox: true,
		keys: []string{"attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
			"final_logit_softcapping"},
		setup: func(c *Config, m *gguf.Metadata) error { return setupGemma(c, m, 3) },
	},
}

// archNames lists the supported architectures for error messages.
var archNames = strings.Join(slices.Sorted(maps.Keys(archs)), ", ")

// setupTemperature reads attention.temperature_scale; the positions come
// in steps of the original context (llama.cpp's n_ctx_orig_yarn).
func setupTemperature(c *Config, m *gguf.Metadata) error {
	a := c.Arch
	s := m.FloatOr(a+".attention.temperature_scale", 0)
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return fmt.Errorf("model: %s.attention.temperature_scale = %g", a, s)
	}
	if s == 0 {
		return nil
	}
	floor := m.IntOr(a+".rope.scaling.original_context_length", int64(c.ContextLen))
	if floor <= 0 || floor > math.MaxInt32 {
		return fmt.Errorf("model: %s: attention temperature scaling needs an original context, not %d", a, floor)
	}
	c.Block.AttnTempScale, c.Block.AttnTempFloor = float32(s), int(floor)
	return nil
}

// setupWindow reads a sliding window that applies to every layer (Mistral).
// llama.cpp's llama graph ignores the key; a model trained with a window
// attends within it (as transformers runs it), which differs from
// llama.cpp only past Window positions.
func setupWindow(c *Config, m *gguf.Metadata) error {
	w := m.IntOr(c.Arch+".attention.sliding_window", 0)
	if w < 0 || w > math.MaxInt32 {
		return fmt.Errorf("model: %s.attention.sliding_window = %d is out of range", c.Arch, w)
	}
	for l := range c.LayerAttn {
		c.LayerAttn[l].Window = int(w)
	}
	return nil
}

// setupGranite reads Granite's multipliers as llama.cpp applies them: the
// embeddings times embedding_scale, each branch's output times
// residual_scale, attention scores times attention.scale (in place of
// 1/√head_dim), the logits divided by logit_scale; and its switch for RoPE.
func setupGranite(c *Config, m *gguf.Metadata) error {
	a, b := c.Arch, &c.Block
	var err error
	get := func(key string, into *float32, positive bool) {
		v, ok := m.Float(a + "." + key)
		if !ok || err != nil {
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || (positive && !(v > 0)) || (!positive && v < 0) {
			err = fmt.Errorf("model: %s.%s = %g is out of range", a, key, v)
			return
		}
		if v != 0 { // llama.cpp reads 0 as "not set"
			*into = float32(v)
		}
	}
	// Granite reads rope.scaling.finetuned (default true) as "rotate at
	// all" (llama.cpp's granite graph builds no positions without it).
	if !m.BoolOr(a+".rope.scaling.finetuned", true) {
		for l := range c.LayerAttn {
			c.LayerAttn[l].NoRope = true
		}
	}
	get("embedding_scale", &b.EmbedScale, false)
	get("residual_scale", &b.ResidualScale, false)
	get("attention.scale", &b.AttnScale, false)
	var logitScale float32 = 1
	get("logit_scale", &logitScale, true)
	b.LogitScale = 1 / logitScale
	return err
}

// setupOLMo2 reads OLMo 2 (post-norms, Q/K norms over the whole
// projections) and OLMo 3, which has the same block with sliding windows:
// a period (default 4, the last layer of each global) or a per-layer array
// of booleans, true for a windowed layer. The windowed layers rotate
// without the file's RoPE scaling, at the global base, as llama.cpp's olmo2
// graph does (rope.freq_base_swa is read and not used there either).
func setupOLMo2(c *Config, m *gguf.Metadata) error {
	a := c.Arch
	c.Block.NoPreNorm, c.Block.PostNorm, c.Block.QKNorm = true, true, QKNormFull
	window := m.IntOr(a+".attention.sliding_window", 0)
	if window < 0 || window > math.MaxInt32 {
		return fmt.Errorf("model: %s.attention.sliding_window = %d is out of range", a, window)
	}
	if window == 0 {
		return nil
	}
	local := make([]bool, c.NumLayers)
	key := a + ".attention.sliding_window_pattern"
	if v, ok := m.Value(key); ok {
		if bs, ok := v.Any().([]bool); ok {
			if len(bs) != c.NumLayers {
				return fmt.Errorf("model: %s has %d entries for %d layers", key, len(bs), c.NumLayers)
			}
			copy(local, bs)
		} else if p, ok := m.Int(key); ok && p >= 0 && p <= math.MaxInt32 {
			setPeriod(local, p)
		} else {
			return fmt.Errorf("model: %s = %v is neither a period nor one boolean per layer", key, v)
		}
	} else {
		setPeriod(local, 4)
	}
	c.LocalRope = Rope{Dim: c.Rope.Dim, Neox: c.Rope.Neox, Base: c.Rope.Base, FreqScale: 1, AttnFactor: 1}
	for l, w := range local {
		if w {
			c.LayerAttn[l] = LayerAttention{Window: int(window), LocalRope: true}
		}
	}
	return nil
}

// setPeriod marks the windowed layers of llama.cpp's set_swa_pattern: all
// but the last of each period; a period of 0 makes every layer windowed.
func setPeriod(local []bool, period int64) {
	for l := range local {
		local[l] = period == 0 || int64(l)%period < period-1
	}
}

// setupGemma reads Gemma 2 and 3 as llama.cpp runs them: GELU-tanh FFN,
// pre- and post-norms (the converter folds Gemma's (1 + w) into the stored
// norm weights, so they are plain RMS norm gains here), embeddings scaled
// by √d_model, queries scaled by 1/√head_dim (1/√(d_model/heads) for the
// 27B models, as in Google's reference), and sliding-window attention on
// every layer but the last of each period of the pattern. Gemma 3 adds
// Q/K norms and rotates its local layers with rope.freq_base_swa (default
// 10000), unscaled; Gemma 2 soft-caps attention scores and logits.
func setupGemma(c *Config, m *gguf.Metadata, version int) error {
	a, b := c.Arch, &c.Block
	b.PostNorm, b.Act = true, GELUTanh
	b.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	big := (version == 2 && c.NumLayers == 46) || (version == 3 && c.NumLayers == 62)
	if big {
		b.AttnScale = float32(1 / math.Sqrt(float64(c.Dim/c.NumHeads)))
	}
	window, period := int64(0), int64(6)
	if version == 2 {
		window, period = 4096, 2
		b.AttnSoftcap = float32(m.FloatOr(a+".attn_logit_softcapping", 50))
		b.FinalSoftcap = float32(m.FloatOr(a+".final_logit_softcapping", 30))
	} else {
		b.QKNorm = QKNormHead
		b.FinalSoftcap = float32(m.FloatOr(a+".final_logit_softcapping", 0))
	}
	for _, v := range []float32{b.AttnSoftcap, b.FinalSoftcap} {
		if !(v >= 0) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("model: %s soft-capping %g is out of range", a, v)
		}
	}
	window = m.IntOr(a+".attention.sliding_window", window)
	if _, ok := m.Value(a + ".attention.sliding_window_pattern"); ok {
		p, ok := m.Int(a + ".attention.sliding_window_pattern")
		if !ok {
			return fmt.Errorf("model: %s.attention.sliding_window_pattern is not an integer (per-layer patterns are not supported)", a)
		}
		period = p
	}
	if window < 0 || window > math.MaxInt32 || period < 0 || period > math.MaxInt32 {
		return fmt.Errorf("model: %s sliding window %d, pattern %d", a, window, period)
	}
	if window == 0 {
		return nil // no sliding window: every layer global
	}
	c.LocalRope = c.Rope
	if version == 3 {
		c.LocalRope.FreqScale, c.LocalRope.Factors = 1, nil
		c.LocalRope.Base = m.FloatOr(a+".rope.freq_base_swa", 10000)
	} else {
		c.LocalRope.Base = m.FloatOr(a+".rope.freq_base_swa", c.Rope.Base)
	}
	if !(c.LocalRope.Base > 1) || math.IsInf(c.LocalRope.Base, 0) {
		return fmt.Errorf("model: %s.rope.freq_base_swa %g", a, c.LocalRope.Base)
	}
	local := make([]bool, c.NumLayers)
	setPeriod(local, period)
	for l, w := range local {
		if w {
			c.LayerAttn[l] = LayerAttention{Window: int(window), LocalRope: true}
		}
	}
	return nil
}
