//go:build amd64 && !purego

package quant

// The F16/BF16 row kernels of half_amd64.s; their Go callers check the
// lengths (n > 0, a multiple of 32).

//go:noescape
func widenF16AVX2(w *uint16, dst *float32, n int)

//go:noescape
func widenBF16AVX2(w *uint16, dst *float32, n int)

// matVecF16RowsAVX2 and matVecBF16RowsAVX2 are MatVecHalf's kernels: n a
// multiple of 32, rows > 0.
//
//go:noescape
func matVecF16RowsAVX2(w *uint16, x *float32, n int, out *float32, rows int)

//go:noescape
func matVecBF16RowsAVX2(w *uint16, x *float32, n int, out *float32, rows int)
