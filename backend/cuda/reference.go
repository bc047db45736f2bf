package cuda

import (
	"math"

	"gotok/model"
	"gotok/quant"
)

// The CPU twins of the kernels: plain loops in float64, the oracles the GPU
// tests compare against. They read weights in GGML's own layout, so they
// check the upload re-layout too.

// refDequant returns a rows×cols matrix in GGML layout as float64 rows.
func refDequant(typ quant.Type, data []byte, rows, cols int) ([][]float64, error) {
	rb := len(data) / rows
	out := make([][]float64, rows)
	tmp := make([]float32, cols)
	for r := range out {
		if err := quant.Dequantize(typ, data[r*rb:(r+1)*rb], tmp); err != nil {
			return nil, err
		}
		out[r] = make([]float64, cols)
		for i, v := range tmp {
			out[r][i] = float64(v)
		}
	}
	return out, nil
}

// refRMSNorm returns x/rms(x)*w, or x itself when w is nil.
func refRMSNorm(x, w []float32, eps float32) []float64 {
	scale := rmsScale(x, w, eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) * scale
		if w != nil {
			out[i] *= float64(w[i])
		}
	}
	return out
}

// rmsScale is 1/rms(x), or 1 when w is nil (no norm).
func rmsScale(x, w []float32, eps float32) float64 {
	if w == nil {
		return 1
	}
	ss := 0.0
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	return 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
}

// refQ8RMSNorm is refRMSNorm of the activations the int8 decode kernels
// multiply (kernels/decode.cuh, q8_stage): x·w rounded in blocks of 32 to
// int8 codes and the scale amax/127, half away from zero, in float32 as
// the kernel rounds them.
func refQ8RMSNorm(x, w []float32, eps float32) []float64 {
	scale := rmsScale(x, w, eps)
	out := make([]float64, len(x))
	for b := 0; b < len(x); b += 32 {
		v := make([]float32, min(32, len(x)-b))
		var amax float32
		for i := range v {
			v[i] = x[b+i]
			if w != nil {
				v[i] *= w[b+i]
			}
			amax = max(amax, float32(math.Abs(float64(v[i]))))
		}
		d := amax / 127
		if d == 0 {
			continue
		}
		id := 1 / d
		for i := range v {
			out[b+i] = float64(d) * math.Round(float64(v[i]*id)) * scale
		}
	}
	return out
}

// refQ8Groups is h as int8 blocks hold it, n values to a scale amax/127,
// rounded half away from zero, in float32 as the kernels round them: the
// split FFN's hidden units (kernels/ffn.cu, h8_store: n = 16) and the
// attention heads' outputs (act_q8.cu's q8_row: n = 32).
func refQ8Groups(h []float32, n int) []float64 {
	out := make([]float64, len(h))
	for b := 0; b < len(h); b += n {
		v := h[b:min(b+n, len(h))]
		var amax float32
		for _, x := range v {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		if d == 0 {
			continue
		}
		id := 1 / d
		for i, x := range v {
			out[b+i] = float64(d) * math.Round(float64(x*id))
		}
	}
	return out
}

// refNorm is the norm's output as a decode kernel multiplies it:
// refRMSNorm, or rounded to int8 where int8 says the kernel quantizes its
// activations (kernelSet.int8).
func refNorm(x, w []float32, eps float32, int8 bool) []float64 {
	if int8 {
		return refQ8RMSNorm(x, w, eps)
	}
	return refRMSNorm(x, w, eps)
}

// refMatvec returns W·x.
func refMatvec(w [][]float64, x []float64) []float64 {
	y := make([]float64, len(w))
	for r, row := range w {
		s := 0.0
		for i, v := range row {
			s += v * x[i]
		}
		y[r] = s
	}
	return y
}

// refRopeTable is the (cos, sin) table the engine uploads: for each position
// and rotated pair, model.Rope's rotation, in float64 as the CPU engine
// computes it.
func refRopeTable(ctx int, r model.Rope) []float32 {
	t := make([]float32, ctx*r.Dim)
	a := r.Angles()
	for p := 0; p < ctx; p++ {
		a.CosSin(p, t[p*r.Dim:(p+1)*r.Dim])
	}
	return t
}

// plainRope is an unscaled rotation of dim dimensions with base 10000.
func plainRope(dim int) model.Rope {
	return model.Rope{Dim: dim, Base: 10000, FreqScale: 1, AttnFactor: 1}
}

// refRope rotates each head of v in place with the table row of pos.
func refRope(v []float64, heads, headDim, ropeDim int, neox bool, cs []float32, pos int) {
	half := ropeDim / 2
	for h := 0; h < heads; h++ {
		x := v[h*headDim : (h+1)*headDim]
		for i := 0; i < half; i++ {
			a, b := 2*i, 2*i+1
			if neox {
				a, b = i, i+half
			}
			c, s := float64(cs[2*(pos*half+i)]), float64(cs[2*(pos*half+i)+1])
			x0, x1 := x[a], x[b]
			x[a] = x0*c - x1*s
			x[b] = x0*s + x1*c
		}
	}
}

// refAttention returns softmax(softcap(q·Kᵀ·scale))·V per head over the
// positions n-window … n-1 (window 0: all n; cap 0: no soft-cap); caches
// are [kvHead][ctx][headDim].
func refAttention(q, kc, vc []float32, nHead, nKV, headDim, ctx, n, window int, scale, cap float32) []float64 {
	out := make([]float64, nHead*headDim)
	group := nHead / nKV
	lo := 0
	if window > 0 {
		lo = max(0, n-window)
	}
	for h := 0; h < nHead; h++ {
		kvh := h / group
		s := make([]float64, n)
		m := math.Inf(-1)
		for t := lo; t < n; t++ {
			d := 0.0
			for i := 0; i < headDim; i++ {
				d += float64(q[h*headDim+i]) * float64(kc[(kvh*ctx+t)*headDim+i])
			}
			s[t] = refSoftcap(d*float64(scale), cap)
			m = math.Max(m, s[t])
		}
		z := 0.0
		for t := lo; t < n; t++ {
			s[t] = math.Exp(s[t] - m)
			z += s[t]
		}
		for t := lo; t < n; t++ {
			for i := 0; i < headDim; i++ {
				out[h*headDim+i] += s[t] / z * float64(vc[(kvh*ctx+t)*headDim+i])
			}
		}
	}
	return out
}

// refSoftcap is cap·tanh(x/cap), or x when cap is 0.
func refSoftcap(x float64, cap float32) float64 {
	if cap == 0 {
		return x
	}
	return float64(cap) * math.Tanh(x/float64(cap))
}

// refGLU returns act(g)·u elementwise: SiLU, or GELU with its tanh
// approximation.
func refGLU(g, u []float64, act model.Activation) []float64 {
	h := make([]float64, len(g))
	for i, x := range g {
		if act == model.GELUTanh {
			h[i] = 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * u[i]
		} else {
			h[i] = x / (1 + math.Exp(-x)) * u[i]
		}
	}
	return h
}

// refArgmax returns the index of the largest value, the lowest among equals;
// NaN never wins.
func refArgmax(x []float32) int {
	best := -1
	for i, v := range x {
		if v == v && (best < 0 || v > x[best]) {
			best = i
		}
	}
	return max(best, 0)
}

// relErr is ‖got−want‖/‖want‖, +Inf if got has a NaN or Inf.
func relErr(got []float32, want []float64) float64 {
	num, den := 0.0, 0.0
	for i, g := range got {
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			return math.Inf(1)
		}
		d := float64(g) - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}
