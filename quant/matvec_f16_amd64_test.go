//go:build amd64 && !purego

package quant

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestMatVecHalfKernels runs the kernels alone on columns of 32 with a
// guard past their rows.
func TestMatVecHalfKernels(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2")
	}
	kernels := map[Type]func(w *uint16, x *float32, n int, out *float32, rows int){F16: matVecF16RowsAVX2, BF16: matVecBF16RowsAVX2}
	rng := rand.New(rand.NewPCG(43, 43))
	for typ, k := range kernels {
		name := typ.String()
		for _, sh := range []struct{ rows, cols int }{{1, 32}, {3, 64}, {2, 96}, {12, 256}, {4, 2048}, {7, 576}} {
			w, v := randHalfMatrix(rng, typ, sh.rows, sh.cols)
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
