package cpu

import (
	"math"

	"gotok/model"
	"gotok/quant"
)

// rmsNorm writes x / rms(x) * w to out. The sum of squares is a float32
// dot product: its 32 partial sums keep the rounding error near 1e-7, and
// a float64 loop, one dependent addition per element, cost 5% of prefill.
func rmsNorm(out, x, w []float32, eps float32) {
	ss := float64(quant.Dot(x, x))
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// rope rotates query and key heads by position. The batch's rotations are
// computed once per forward pass (set) and applied in every layer.
type rope struct {
	r      model.Rope
	angles model.Angles // r's rates, computed once
	half   int
	cs     []float32 // per batch token: cos, sin of each pair
}

func newRope(r model.Rope, maxBatch int) *rope {
	return &rope{r: r, angles: r.Angles(), half: r.Pairs(), cs: make([]float32, maxBatch*r.Dim)}
}

// set computes the rotations of the batch's tokens, at positions pos.
func (r *rope) set(pos []int) {
	for t, p := range pos {
		r.angles.CosSin(p, r.cs[t*2*r.half:(t+1)*2*r.half])
	}
}

// apply rotates each head of x (heads × headDim) as batch token t.
func (r *rope) apply(x []float32, heads, headDim, t int) {
	half := r.half
	cs := r.cs[t*2*half : (t+1)*2*half]
	for h := 0; h < heads; h++ {
		v := x[h*headDim : (h+1)*headDim]
		for i := 0; i < half; i++ {
			a, b := 2*i, 2*i+1
			if r.r.Neox {
				a, b = i, i+half
			}
			c, s := cs[2*i], cs[2*i+1]
			x0, x1 := v[a], v[b]
			v[a] = x0*c - x1*s
			v[b] = x0*s + x1*c
		}
	}
}

func scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// softcap squashes x to (-c, c): c·tanh(x/c), with tanh(y) = 2/(1+e^(−2y))
// − 1 so that quant's vector exponential does the work (math.Tanh on every
// logit cost a tenth of a decode step). e^(−2y) overflowing to +Inf gives
// −c, underflowing to 0 gives c.
func softcap(x []float32, c float32) {
	k := -2 / c
	for i, v := range x {
		x[i] = v * k
	}
	quant.ExpSum(x, 0)
	for i, e := range x {
		x[i] = c * (2/(1+e) - 1)
	}
}

// geluTanhGLU writes gelu(gate) ⊙ up to dst, with GELU's tanh
// approximation 0.5·g·(1 + tanh(z)), z = √(2/π)·(g + 0.044715·g³), as Gemma
// and ggml compute it. It overwrites gate and up.
//
// 0.5·(1 + tanh(z)) is sigmoid(2z), so gelu(g)·u = h·sigmoid(h)·(u·g/h)
// with h = 2z: quant.SwiGLU of h and u·g/h, whose vector exponential is
// many times faster than math.Tanh. g/h = 1/(2√(2/π)·(1 + 0.044715·g²))
// has no pole, so no element needs a special case.
func geluTanhGLU(dst, gate, up []float32) {
	const twoC = 2 * 0.79788456080286535587989211986876 // 2·√(2/π)
	for i, g := range gate {
		k := twoC * (1 + 0.044715*g*g)
		gate[i] = g * k
		up[i] /= k
	}
	quant.SwiGLU(dst, gate, up)
}
