//go:build amd64 && !purego

package quant

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestMatVecF16Kernels runs the kernel alone on columns of 32 with a
// guard past its rows.
func TestMatVecF16Kernels(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2")
	}
	kernels := map[string]func(w *uint16, x *float32, n int, out *float32, rows int){"avx2": matVecF16RowsAVX2}
	rng := rand.New(rand.NewPCG(43, 43))
	for name, k := range kernels {
		for _, sh := range []struct{ rows, cols int }{{1, 32}, {3, 64}, {12, 256}, {4, 2048}, {7, 576}} {
			w, v := randF16Matrix(rng, sh.rows, sh.cols)
			x := make([]float32, sh.cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			out := make([]float32, sh.rows+4)
			for i := range out {
				out[i] = 42
			}
			k((*uint16)(unsafe.Pointer(&w[0])), &x[0], sh.cols, &out[0], sh.rows)
			checkMatVecF16(t, name, v, x, out[:sh.rows])
			for _, g := range out[sh.rows:] {
				if g != 42 {
					t.Fatalf("%s: %d×%d: written past the rows", name, sh.rows, sh.cols)
				}
			}
		}
	}
}
