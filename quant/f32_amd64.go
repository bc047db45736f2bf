//go:build amd64 && !purego

package quant

// useAVX512 selects the ZMM kernels of f32_amd64.s (MatMulFloat's).
var useAVX512 = useAVX2 && hasAVX512F()

// useBF16 selects matMulBF16PanelAVX512 (bf16_amd64.s) for MatMulBF16.
var useBF16 = useAVX512 && hasAVX512BF16()

// The float32 kernels in f32_amd64.s; their Go callers check the lengths.

// matMulFloatPanelAVX512 sets c[i*ldc+j] = Σ_l x[i*ldx+l]·p[l*48+j] for
// tokens i < m (m > 0) and the panel's rows j < 48 whose bit of mask is
// set (strides in elements, k > 0), and prefetches pfLines > 0 lines of 64
// bytes from pf, the weights packed next, while it computes.
//
//go:noescape
func matMulFloatPanelAVX512(x *float32, ldx int, p *float32, k int, c *float32, ldc int, m int, mask uint64, pf *byte, pfLines int)

// matMulFloatPanelAVX2 sets c[i*ldc+j] = Σ_l x[i*ldx+l]·p[l*24+j] for
// tokens i < m (m > 0) and the panel's rows j < 24 whose word of mask is
// -1 (strides in elements, k > 0), or adds the sum there when accumulate
// is not 0.
//
//go:noescape
func matMulFloatPanelAVX2(x *float32, ldx int, p *float32, k int, c *float32, ldc int, m int, mask *int32, accumulate int)

// pack8F32AVX2, pack8F16AVX2 and pack8BF16AVX2 lay eight rows of k > 0
// elements (a multiple of 8; rows ldw bytes apart) into the AVX2 panel at
// p, element l of row r at p[l*24+r], widened to float32.
//
//go:noescape
func pack8F32AVX2(w *float32, ldw int, p *float32, k int)

//go:noescape
func pack8F16AVX2(w *uint16, ldw int, p *float32, k int)

//go:noescape
func pack8BF16AVX2(w *uint16, ldw int, p *float32, k int)

// matMulBF16PanelAVX512 is matMulFloatPanelAVX512 on bfloat16 pairs: x
// and p hold two bfloat16 values a word (k pairs of columns, ldx in
// words), each pair's products summed by VDPBF16PS.
//
//go:noescape
func matMulBF16PanelAVX512(x *uint32, ldx int, p *uint32, k int, c *float32, ldc int, m int, mask uint64, pf *byte, pfLines int)

// matVecBF16PairsAVX512 sets out[r] = Σ w[r][i]·x's element i for rows > 0
// BF16 rows of n > 0 elements, a multiple of 32, by activations as
// bfloat16 pairs.
//
//go:noescape
func matVecBF16PairsAVX512(w *uint16, x *uint32, n int, out *float32, rows int)

// toBF16AVX512 sets dst[i] = F32ToBF16(x[i]) for n > 0, a multiple of 16.
//
//go:noescape
func toBF16AVX512(x *float32, dst *uint16, n int)

// The pack*PanelAVX512 functions set p[l*48+i] to the float32 value of
// row i's weight l, for 16 rows of k weights (k > 0, a multiple of 16)
// ldw bytes apart at w.
//
//go:noescape
func packF32PanelAVX512(w *float32, ldw int, p *float32, k int)

//go:noescape
func packF16PanelAVX512(w *uint16, ldw int, p *float32, k int)

//go:noescape
func packBF16PanelAVX512(w *uint16, ldw int, p *float32, k int)

// matMulF32AVX2 computes rows 0-3 of C = A·B for tiles×16 columns (see
// MatMulF32; strides in elements, k > 0), adding to C when accumulate is 1.
//
//go:noescape
func matMulF32AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

// matMulF32RowAVX2 and matMulF32F16RowAVX2 are matMulF32AVX2 and
// matMulF32F16AVX2 for row 0 alone, with the same bits.
//
//go:noescape
func matMulF32RowAVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

//go:noescape
func matMulF32F16RowAVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

// matMulF32Col8AVX2 and matMulF32RowCol8AVX2 (B in float32),
// matMulF32F16Col8AVX2 and matMulF32F16RowCol8AVX2 (B in float16) are the
// kernels above for 8 columns (tiles unused), rows 0-3 and row 0: the
// columns past a multiple of 16, with the same bits.
//
//go:noescape
func matMulF32Col8AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

//go:noescape
func matMulF32RowCol8AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

//go:noescape
func matMulF32F16Col8AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

//go:noescape
func matMulF32F16RowCol8AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

// matMulF32AVX512 is matMulF32AVX2 for tiles of 32 columns.
//
//go:noescape
func matMulF32AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

// matMulF32F16AVX2 and matMulF32F16AVX512 are the two above with B in
// float16 (MatMulF32F16).
//
//go:noescape
func matMulF32F16AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

//go:noescape
func matMulF32F16AVX512(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

// matMulF32x8AVX512 and matMulF32F16x8AVX512 are matMulF32AVX512 and
// matMulF32F16AVX512 for rows 0-7 of C.
//
//go:noescape
func matMulF32x8AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

//go:noescape
func matMulF32F16x8AVX512(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)

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
