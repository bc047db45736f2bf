package model

import (
	"fmt"
	"math"

	"gotok/gguf"
)

// Rope is how a model rotates its query and key heads by position (RoPE):
// the plain rotation, linear position scaling, per-frequency factors
// (Llama 3.x's rope_freqs.weight) and YaRN. Both backends build their
// rotation tables from Angles, so a variant is added here, once.
type Rope struct {
	Dim  int     // leading dimensions of each head that rotate, in Dim/2 pairs
	Neox bool    // pairs (i, i+Dim/2) instead of (2i, 2i+1)
	Base float64 // frequency base θ: pair i turns at Base^(-2i/Dim) per position
	// FreqScale multiplies the angles (linear scaling: 1/factor; 1 = none).
	FreqScale float64
	// Factors divide each pair's frequency (Llama 3.x files carry them as
	// rope_freqs.weight, Phi-3's LongRoPE as rope_factors_short.weight);
	// nil when the model has none.
	Factors []float32
	// LongFactors replace Factors when the context a backend runs with is
	// longer than ShortContext (LongRoPE: rope_factors_long.weight, chosen
	// as llama.cpp chooses it, by the context, not the position); nil when
	// the model has none.
	LongFactors  []float32
	ShortContext int
	// AttnFactor scales cos and sin (1 = none): the magnitude correction
	// of YaRN and of scaled rotary embeddings generally.
	AttnFactor float64
	// YaRN (ExtFactor > 0): pairs that turn fast keep the unscaled angle,
	// slow ones the scaled angle, with a linear ramp between the pairs that
	// turn BetaFast and BetaSlow times over OrigContext positions.
	ExtFactor          float64
	BetaFast, BetaSlow float64
	OrigContext        int
}

// ForContext is the rotation of a backend whose context is ctxLen tokens.
func (r Rope) ForContext(ctxLen int) Rope {
	if r.LongFactors != nil && ctxLen > r.ShortContext {
		r.Factors = r.LongFactors
	}
	r.LongFactors = nil
	return r
}

// Pairs is the number of rotated pairs per head.
func (r *Rope) Pairs() int { return r.Dim / 2 }

// Angles is a rotation's per-pair rates, computed once for many
// positions: pair i turns by pos·Rate[i] at position pos.
type Angles struct {
	Rate   []float64 // the pair's frequency with its factor and YaRN's ramp folded in
	Mscale float64   // the magnitude correction
}

// Angles returns r's rates.
func (r *Rope) Angles() Angles {
	half := r.Pairs()
	low, high := r.yarnRamp()
	a := Angles{Rate: make([]float64, half), Mscale: r.AttnFactor}
	if r.ExtFactor != 0 {
		a.Mscale *= 1 + 0.1*math.Log(1/r.FreqScale)
	}
	for i := range half {
		freq := math.Pow(r.Base, -float64(2*i)/float64(r.Dim))
		if r.Factors != nil {
			freq /= float64(r.Factors[i])
		}
		// The angle is FreqScale·pos·freq; with YaRN, mixed with the
		// unscaled pos·freq by the ramp, which is 1 for pairs below low
		// (they keep the unscaled angle) and 0 past high.
		scale := r.FreqScale
		if r.ExtFactor != 0 {
			y := (float64(i) - low) / math.Max(0.001, high-low)
			mix := (1 - math.Min(1, math.Max(0, y))) * r.ExtFactor
			scale = scale*(1-mix) + mix
		}
		a.Rate[i] = freq * scale
	}
	return a
}

// CosSin writes the rotation of each pair at position pos into cs: cos and
// sin of pair i at cs[2i] and cs[2i+1] (len(cs) ≥ Dim), the magnitude
// correction folded in. The angles are computed in float64.
func (a Angles) CosSin(pos int, cs []float32) {
	for i, rate := range a.Rate {
		s, c := math.Sincos(float64(pos) * rate)
		cs[2*i], cs[2*i+1] = float32(c*a.Mscale), float32(s*a.Mscale)
	}
}

// yarnRamp returns the pair indices where YaRN's ramp starts and ends:
// the pairs that turn BetaFast and BetaSlow times over OrigContext
// positions, floored and ceiled into [0, Dim-1] as ggml does.
func (r *Rope) yarnRamp() (low, high float64) {
	if r.ExtFactor == 0 {
		return 0, 0
	}
	corr := func(turns float64) float64 {
		return float64(r.Dim) * math.Log(float64(r.OrigContext)/(turns*2*math.Pi)) / (2 * math.Log(r.Base))
	}
	return math.Max(0, math.Floor(corr(r.BetaFast))), math.Min(float64(r.Dim-1), math.Ceil(corr(r.BetaSlow)))
}

// ropeFromMetadata reads the rotation of architecture a with heads of
// headDim dimensions. Factors, a tensor, are bound later (FromFile).
func ropeFromMetadata(m *gguf.Metadata, a string, headDim, contextLen int) (Rope, error) {
	r := Rope{
		Dim:        int(m.IntOr(a+".rope.dimension_count", int64(headDim))),
		Base:       m.FloatOr(a+".rope.freq_base", 10000),
		FreqScale:  1,
		AttnFactor: m.FloatOr(a+".rope.scaling.attn_factor", 1),
	}
	if r.Dim <= 0 || r.Dim > headDim || r.Dim%2 != 0 {
		return r, fmt.Errorf("model: rope dimension %d does not fit head dimension %d", r.Dim, headDim)
	}
	if !(r.Base > 1) || math.IsInf(r.Base, 0) {
		return r, fmt.Errorf("model: rope base %g", r.Base)
	}
	if !(r.AttnFactor > 0) || math.IsInf(r.AttnFactor, 0) {
		return r, fmt.Errorf("model: %s.rope.scaling.attn_factor %g", a, r.AttnFactor)
	}
	// As llama.cpp reads it: the factor under either key, linear unless
	// the file says otherwise, and no scaling at all for type "none".
	factor, ok := m.Float(a + ".rope.scaling.factor")
	if !ok {
		factor, ok = m.Float(a + ".rope.scale_linear")
	}
	if !ok || factor == 0 {
		factor = 1
	}
	if !(factor > 0) || math.IsInf(factor, 0) {
		return r, fmt.Errorf("model: rope scaling factor %g", factor)
	}
	switch st := m.StringOr(a+".rope.scaling.type", "linear"); st {
	case "none":
	case "linear":
		r.FreqScale = 1 / factor
	case "yarn":
		r.FreqScale = 1 / factor
		r.ExtFactor = m.FloatOr(a+".rope.scaling.yarn_ext_factor", 1)
		r.BetaFast = m.FloatOr(a+".rope.scaling.yarn_beta_fast", 32)
		r.BetaSlow = m.FloatOr(a+".rope.scaling.yarn_beta_slow", 1)
		r.OrigContext = int(m.IntOr(a+".rope.scaling.original_context_length", int64(contextLen)))
		if r.OrigContext <= 0 || !(r.ExtFactor >= 0 && r.ExtFactor <= 1) || !(r.BetaFast > 0) || !(r.BetaSlow > 0) {
			return r, fmt.Errorf("model: bad YaRN parameters (original context %d, ext factor %g, beta %g/%g)",
				r.OrigContext, r.ExtFactor, r.BetaFast, r.BetaSlow)
		}
		if r.ExtFactor != 0 {
			// llama.cpp divides the attention factor by the magnitude
			// correction CosSin applies, and multiplies back the
			// correction of yarn_log_multiplier when the file sets it.
			corr := 1 + 0.1*math.Log(factor)
			mscale := 1.0
			if lm := m.FloatOr(a+".rope.scaling.yarn_log_multiplier", 0); lm != 0 && factor > 1 {
				mscale = corr / (0.1*lm*math.Log(factor) + 1)
			} else if factor > 1 {
				mscale = corr
			}
			r.AttnFactor *= mscale / corr
		}
	default:
		return r, fmt.Errorf("model: rope scaling %q is not supported", st)
	}
	return r, nil
}
