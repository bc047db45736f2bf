package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotQ45Q8_0 checks the Q4_1, Q5_0 and Q5_1 × Q8_0 dot products (the
// AVX2 kernels where the CPU has them, and the Go loops) against a float64
// sum of the dequantized operands, on fresh random rows of 1 to 70 blocks.
func TestDotQ45Q8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 45))
	for _, tc := range []struct {
		typ Type
		dot func(w, x []byte, n int) float32
	}{{Q4_1, DotQ4_1Q8_0}, {Q5_0, DotQ5_0Q8_0}, {Q5_1, DotQ5_1Q8_0}} {
		for _, nb := range []int{1, 2, 3, 7, 18, 70} {
			n := 32 * nb
			wf, xf := make([]float32, n), make([]float32, n)
			for i := range wf {
				wf[i] = float32(r.NormFloat64()) + 0.3 // a mean, so the min term matters
				xf[i] = float32(r.NormFloat64())
			}
			w := make([]byte, nb*tc.typ.BlockBytes())
			x := make([]byte, nb*q8_0Bytes)
			if err := Quantize(tc.typ, wf, w); err != nil {
				t.Fatal(err)
			}
			if err := Quantize(Q8_0, xf, x); err != nil {
				t.Fatal(err)
			}
			wd, xd := make([]float32, n), make([]float32, n)
			Dequantize(tc.typ, w, wd)
			Dequantize(Q8_0, x, xd)
			want, scale := 0.0, 0.0
			for i := range wd {
				want += float64(wd[i]) * float64(xd[i])
				scale += math.Abs(float64(wd[i]) * float64(xd[i]))
			}
			for name, got := range map[string]float32{
				"dispatch": tc.dot(w, x, nb),
				"generic":  dotQ45Q8_0Generic(tc.typ, w, x, nb),
			} {
				if d := math.Abs(float64(got) - want); !(d <= 1e-5*scale) {
					t.Errorf("%s %s %d blocks: %v, want %v (|Δ| %.3g of Σ|wx| %.3g)", tc.typ, name, nb, got, want, d, scale)
				}
			}
		}
	}
}

// TestMatVecRowsQ8_0 checks the matrix-vector products of Q4_1, Q5_0,
// Q5_1 and IQ4_NL rows against the row kernels, bit for bit: the same arithmetic, a
// row at a time.
func TestMatVecRowsQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 46))
	for _, tc := range []struct {
		typ Type
		dot func(w, x []byte, n int) float32
	}{{Q4_1, DotQ4_1Q8_0}, {Q5_0, DotQ5_0Q8_0}, {Q5_1, DotQ5_1Q8_0}, {IQ4_NL, DotIQ4_NLQ8_0}} {
		for _, sh := range []struct{ rows, nb int }{{1, 1}, {3, 2}, {17, 7}, {64, 18}, {5, 48}} {
			n := 32 * sh.nb
			wf, xf := make([]float32, sh.rows*n), make([]float32, n)
			for i := range wf {
				wf[i] = float32(r.NormFloat64()) + 0.3
			}
			for i := range xf {
				xf[i] = float32(r.NormFloat64())
			}
			w := make([]byte, sh.rows*sh.nb*tc.typ.BlockBytes())
			x := make([]byte, sh.nb*q8_0Bytes)
			if err := Quantize(tc.typ, wf, w); err != nil {
				t.Fatal(err)
			}
			if err := Quantize(Q8_0, xf, x); err != nil {
				t.Fatal(err)
			}
			out := make([]float32, sh.rows+1)
			out[sh.rows] = 42 // must stay untouched
			MatVecRowsQ8_0(tc.typ, w, x, sh.nb, out[:sh.rows])
			rb := sh.nb * tc.typ.BlockBytes()
			xd := dequantAll(t, Q8_0, x, n)
			for i := range sh.rows {
				row := w[i*rb : (i+1)*rb]
				got, want := out[i], tc.dot(row, x, sh.nb)
				if !useVNNI || tc.typ == IQ4_NL && i >= sh.rows&^3 {
					// The row kernels' code, a row after another.
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("%s %d×%d blocks, row %d: %v, want the row kernel's %v", tc.typ, sh.rows, sh.nb, i, got, want)
					}
					continue
				}
				// Four rows at a time: the same integer sums, the float
				// sums in another order.
				exact, mag := refDot(dequantAll(t, tc.typ, row, n), xd)
				checkClose(t, fmt.Sprintf("%s %d×%d blocks, row %d", tc.typ, sh.rows, sh.nb, i), got, exact, mag)
			}
			if out[sh.rows] != 42 {
				t.Errorf("%s %d×%d blocks: wrote past its rows", tc.typ, sh.rows, sh.nb)
			}
		}
	}
}
