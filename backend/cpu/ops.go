package cpu

import (
	"math"
)

// rmsNorm writes x / rms(x) * w to out.
func rmsNorm(out, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// ropeTable holds the inverse frequencies of the rotated dimension pairs.
type ropeTable struct {
	invFreq []float64
	neox    bool
	scale   float64
	cos     []float32
	sin     []float32
}

func newRopeTable(dim int, base, freqScale float32, neox bool) *ropeTable {
	r := &ropeTable{neox: neox, scale: float64(freqScale)}
	for i := 0; i < dim/2; i++ {
		r.invFreq = append(r.invFreq, math.Pow(float64(base), -float64(2*i)/float64(dim)))
	}
	r.cos = make([]float32, dim/2)
	r.sin = make([]float32, dim/2)
	return r
}

// apply rotates each head of x (heads × headDim) for position pos.
func (r *ropeTable) apply(x []float32, heads, headDim, pos int) {
	for i, f := range r.invFreq {
		s, c := math.Sincos(float64(pos) * r.scale * f)
		r.cos[i], r.sin[i] = float32(c), float32(s)
	}
	half := len(r.invFreq)
	for h := 0; h < heads; h++ {
		v := x[h*headDim : (h+1)*headDim]
		for i := 0; i < half; i++ {
			a, b := 2*i, 2*i+1
			if r.neox {
				a, b = i, i+half
			}
			c, s := r.cos[i], r.sin[i]
			x0, x1 := v[a], v[b]
			v[a] = x0*c - x1*s
			v[b] = x0*s + x1*c
		}
	}
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// softmax normalizes x in place.
func softmax(x []float32) {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range x {
		x[i] *= inv
	}
}
