package cuda

import (
	"math"
	"math/rand/v2"

	"gotok/quant"
)

// CPU twins of the prefill kernels, in float64. Where a kernel rounds to
// f16 on purpose (weights dequantized into a gemm tile, K and V in the
// attention tile) the twin rounds the same way, so the bounds measure the
// kernel's arithmetic rather than the format.

// f16Round rounds v to the nearest f16 (ties to even, as cvt.rn does).
func f16Round(v float64) float64 { return float64(quant.F16ToF32(quant.F32ToF16(float32(v)))) }

// randHalves returns n random f16 values (normal, std) as little-endian
// bits and as the values they hold.
func randHalves(r *rand.Rand, n int, std float64) ([]byte, []float64) {
	b := make([]byte, 2*n)
	v := make([]float64, n)
	for i := range v {
		h := quant.F32ToF16(float32(r.NormFloat64() * std))
		b[2*i], b[2*i+1] = byte(h), byte(h>>8)
		v[i] = float64(quant.F16ToF32(h))
	}
	return b, v
}

// halvesF32 decodes little-endian f16 bits.
func halvesF32(b []byte) []float32 {
	f := make([]float32, len(b)/2)
	for i := range f {
		f[i] = quant.F16ToF32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
	}
	return f
}

// refF16Rows rounds dequantized weights to f16, as gemm's tile load does.
func refF16Rows(w [][]float64) [][]float64 {
	out := make([][]float64, len(w))
	for i, row := range w {
		out[i] = make([]float64, len(row))
		for j, v := range row {
			out[i][j] = f16Round(v)
		}
	}
	return out
}

// refBF16 is to_bf16.cu's twin: each value rounded to bf16.
func refBF16(a []float64) []float64 {
	out := make([]float64, len(a))
	for i, v := range a {
		out[i] = float64(quant.BF16ToF32(quant.F32ToBF16(float32(v))))
	}
	return out
}

// refGemm returns A·Wᵀ, a row-major [m][k], as [m][len(w)].
func refGemm(a []float64, m, k int, w [][]float64) []float64 {
	c := make([]float64, m*len(w))
	for i := 0; i < m; i++ {
		ar := a[i*k : (i+1)*k]
		for j, wr := range w {
			s := 0.0
			for e, v := range wr {
				s += v * ar[e]
			}
			c[i*len(w)+j] = s
		}
	}
	return c
}

// refPrefillNorm returns rmsnorm(row)·w for each of m rows of k.
func refPrefillNorm(x, w []float32, eps float32, m, k int) []float64 {
	var out []float64
	for i := 0; i < m; i++ {
		out = append(out, refRMSNorm(x[i*k:(i+1)*k], w, eps)...)
	}
	return out
}

// refPrefillRope returns the roped queries [m][nHead·hd], times the
// attention temperature of their position (temp[p]; nil: none), and writes the roped K and the
// V rows of m tokens at pos0.. into copies of the caches.
func refPrefillRope(qkv, bias []float32, m, nHead, nKV, hd, ropeDim int, neox bool, cs, temp []float32, pos0 int,
	kc, vc []float32, ctx int) (q []float64, kOut, vOut []float32) {
	w := (nHead + 2*nKV) * hd
	kOut, vOut = append([]float32(nil), kc...), append([]float32(nil), vc...)
	for t := 0; t < m; t++ {
		row := make([]float64, w)
		for i := range row {
			row[i] = float64(qkv[t*w+i])
			if bias != nil {
				row[i] += float64(bias[i])
			}
		}
		qr, kr, vr := row[:nHead*hd], row[nHead*hd:(nHead+nKV)*hd], row[(nHead+nKV)*hd:]
		refRope(qr, nHead, hd, ropeDim, neox, cs, pos0+t)
		refRope(kr, nKV, hd, ropeDim, neox, cs, pos0+t)
		if temp != nil {
			for i := range qr {
				qr[i] *= float64(temp[pos0+t])
			}
		}
		q = append(q, qr...)
		for h := 0; h < nKV; h++ {
			for d := 0; d < hd; d++ {
				kOut[(h*ctx+pos0+t)*hd+d] = float32(kr[h*hd+d])
				vOut[(h*ctx+pos0+t)*hd+d] = float32(vr[h*hd+d])
			}
		}
	}
	return q, kOut, vOut
}

// refPrefillAttention returns, for each of m tokens at positions pos0.. and
// each query head, softmax(softcap(q·Kᵀ·scale))·V over keys 0..pos0+t (the
// last window of them when window > 0), with K and V rounded to f16 as the
// kernel's tiles hold them. q is [m][nHead·hd].
func refPrefillAttention(q []float64, kc, vc []float32, m, pos0, nHead, nKV, hd, ctx, window int, scale, cap float32) []float64 {
	out := make([]float64, m*nHead*hd)
	group := nHead / nKV
	for t := 0; t < m; t++ {
		n := pos0 + t + 1
		lo := 0
		if window > 0 {
			lo = max(0, n-window)
		}
		for h := 0; h < nHead; h++ {
			kvh := h / group
			qh := q[(t*nHead+h)*hd : (t*nHead+h+1)*hd]
			s := make([]float64, n)
			mx := math.Inf(-1)
			for j := lo; j < n; j++ {
				d := 0.0
				for i := 0; i < hd; i++ {
					d += qh[i] * f16Round(float64(kc[(kvh*ctx+j)*hd+i]))
				}
				s[j] = refSoftcap(d*float64(scale), cap)
				mx = math.Max(mx, s[j])
			}
			z := 0.0
			for j := lo; j < n; j++ {
				s[j] = math.Exp(s[j] - mx)
				z += s[j]
			}
			o := out[(t*nHead+h)*hd : (t*nHead+h+1)*hd]
			for j := lo; j < n; j++ {
				for i := 0; i < hd; i++ {
					o[i] += s[j] / z * f16Round(float64(vc[(kvh*ctx+j)*hd+i]))
				}
			}
		}
	}
	return out
}
