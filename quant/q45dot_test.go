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
// Q5_1 and IQ4_NL rows: the AVX2 kernels against the row kernels, bit for
// bit (the same arithmetic, a row at a time), and the public function
// (four rows at a time: the VNNI kernels where present, else the AVX2
// ones; the same integer sums, the float sums in another order) against
// the exact sums.
func TestMatVecRowsQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 46))
	for _, tc := range []struct {
		typ  Type
		dot  func(w, x []byte, n int) float32
		avx2 func(w, x *byte, nblocks int, out *float32, rows int)
	}{{Q4_1, DotQ4_1Q8_0, matVecQ4_1Q8_0AVX2}, {Q5_0, DotQ5_0Q8_0, matVecQ5_0Q8_0AVX2},
		{Q5_1, DotQ5_1Q8_0, matVecQ5_1Q8_0AVX2}, {IQ4_NL, DotIQ4_NLQ8_0, matVecIQ4_NLQ8_0AVX2}} {
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
			rb := sh.nb * tc.typ.BlockBytes()
			xd := dequantAll(t, Q8_0, x, n)
			name := fmt.Sprintf("%s %d×%d blocks", tc.typ, sh.rows, sh.nb)
			// The AVX2 kernel is the row kernels' code, a row after
			// another: their bits.
			if useAVX2 {
				out := make([]float32, sh.rows)
				tc.avx2(&w[0], &x[0], sh.nb, &out[0], sh.rows)
				for i, got := range out {
					if want := tc.dot(w[i*rb:(i+1)*rb], x, sh.nb); math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("%s, AVX2 row %d: %v, want the row kernel's %v", name, i, got, want)
					}
				}
			}
			// The public one (four rows at a time with VNNI: the same
			// integer sums, the float sums in another order).
			out := make([]float32, sh.rows+1)
			out[sh.rows] = 42 // must stay untouched
			MatVecRowsQ8_0(tc.typ, w, x, sh.nb, out[:sh.rows])
			for i := range sh.rows {
				exact, mag := refDot(dequantAll(t, tc.typ, w[i*rb:(i+1)*rb], n), xd)
				checkClose(t, fmt.Sprintf("%s, row %d", name, i), out[i], exact, mag)
			}
			if out[sh.rows] != 42 {
				t.Errorf("%s: wrote past its rows", name)
			}
		}
	}
}

// BenchmarkMatVecRowsQ8_0 multiplies Q4_1, Q5_0, Q5_1 and IQ4_NL rows of
// Llama-1B's width by one Q8_0 row: the FFN gate (8192 rows of 2048) and
// 64 MB of such rows, twice a 32 MB L3, as a whole model's weights
// stream; "row" is the single-row kernel, "rows" the public function
// (four rows at a time).
func BenchmarkMatVecRowsQ8_0(b *testing.B) {
	if !useAVX2 {
		b.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(47, 47))
	const cols = 2048
	nb := cols / 32
	for _, tc := range []struct {
		typ Type
		row func(w, x *byte, nblocks int, out *float32, rows int)
	}{{Q4_1, matVecQ4_1Q8_0AVX2}, {Q5_0, matVecQ5_0Q8_0AVX2}, {Q5_1, matVecQ5_1Q8_0AVX2}, {IQ4_NL, matVecIQ4_NLQ8_0AVX2}} {
		bb := tc.typ.BlockBytes()
		for _, c := range []struct {
			name string
			rows int
		}{{"gate", 8192}, {"dram", 64 << 20 / (nb * bb)}} {
			wf, xf := make([]float32, c.rows*cols), make([]float32, cols)
			for i := range wf {
				wf[i] = float32(r.NormFloat64())
			}
			for i := range xf {
				xf[i] = float32(r.NormFloat64())
			}
			w, x := make([]byte, c.rows*nb*bb), make([]byte, nb*q8_0Bytes)
			if err := Quantize(tc.typ, wf, w); err != nil {
				b.Fatal(err)
			}
			if err := Quantize(Q8_0, xf, x); err != nil {
				b.Fatal(err)
			}
			out := make([]float32, c.rows)
			b.Run(fmt.Sprintf("%v/row/%s", tc.typ, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					tc.row(&w[0], &x[0], nb, &out[0], c.rows)
				}
			})
			b.Run(fmt.Sprintf("%v/rows/%s", tc.typ, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					MatVecRowsQ8_0(tc.typ, w, x, nb, out)
				}
			})
		}
	}
}
