package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotRows checks DotF32 on F16 and BF16 rows (the AVX2 kernels where
// the CPU has them, with a tail past the last 32 elements), and on Q4_1,
// Q5_0 and Q5_1 rows (the dequantizing path, the reference of their
// integer kernels), against a float64 sum of the dequantized values, on
// fresh random rows.
func TestDotRows(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 31))
	for _, typ := range []Type{F16, BF16, Q4_1, Q5_0, Q5_1} {
		for _, n := range []int{1, 31, 32, 33, 64, 100, 576, 2048, 2080} {
			if n%typ.BlockSize() != 0 {
				continue
			}
			src := make([]float32, n)
			x := make([]float32, n)
			for i := range src {
				src[i] = float32(r.NormFloat64())
				x[i] = float32(r.NormFloat64())
			}
			size, err := typ.RowBytes(uint64(n))
			if err != nil {
				t.Fatal(err)
			}
			row := make([]byte, size)
			if err := Quantize(typ, src, row); err != nil {
				t.Fatal(err)
			}
			w := make([]float32, n)
			if err := Dequantize(typ, row, w); err != nil {
				t.Fatal(err)
			}
			want, scale := 0.0, 0.0
			for i := range w {
				want += float64(w[i]) * float64(x[i])
				scale += math.Abs(float64(w[i]) * float64(x[i]))
			}
			got := DotF32(typ, row, x)
			if d := math.Abs(float64(got) - want); !(d <= 1e-5*scale) {
				t.Errorf("%s n=%d: %v, want %v (|Δ| %.3g, Σ|wx| %.3g)", typ, n, got, want, d, scale)
			}
		}
	}
}

// TestWiden checks Widen against Dequantize, bit for bit, on rows of every
// length around the kernels' 8-element steps; it refuses other types.
func TestWiden(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, typ := range []Type{F16, BF16, F32} {
		for _, n := range []int{1, 7, 8, 9, 64, 100, 2049} {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			row := make([]byte, n*typ.BlockBytes())
			if err := Quantize(typ, src, row); err != nil {
				t.Fatal(err)
			}
			want, got := make([]float32, n), make([]float32, n)
			Dequantize(typ, row, want)
			if err := Widen(typ, row, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d: [%d] = %v, want %v", typ, n, i, got[i], want[i])
				}
			}
		}
	}
	if err := Widen(Q4_0, make([]byte, 18), make([]float32, 32)); err == nil {
		t.Error("Widen took Q4_0")
	}
}
