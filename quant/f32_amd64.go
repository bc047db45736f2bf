//go:build amd64 && !purego

package quant

// useAVX512 selects the ZMM kernels of f32_amd64.s (MatMulFloat's).
var useAVX512 = useAVX2 && hasAVX512F()

// The float32 kernels in f32_amd64.s; their Go callers check the lengths.

// matMulF32TAVX512 sets c[i*ldc+j] = Σ_l a[i*lda+l]·b[j*ldb+l] for i < m
// and j < 4 (strides in elements, k > 0 a multiple of 16, m > 0), and
// prefetches 8·k bytes from pf (four F16 or BF16 rows of k) while it
// computes the first six rows.
//
//go:noescape
func matMulF32TAVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, m int, pf *byte)

// matMulF32AVX2 computes rows 0-3 of C = A·B for tiles×16 columns (see
// MatMulF32; strides in elements, k > 0), adding to C when accumulate is 1.
//
//go:noescape
func matMulF32AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

// expSumAVX2 is ExpSum for n > 0, a multiple of 8, elements.
//
//go:noescape
func expSumAVX2(x *float32, n int, shift float32) float32

// swiGLUAVX2 is SwiGLU for n > 0, a multiple of 8, elements.
//
//go:noescape
func swiGLUAVX2(dst, gate, up *float32, n int)

// maxAVX2 is Max for n ≥ 8.
//
//go:noescape
func maxAVX2(x *float32, n int) float32
