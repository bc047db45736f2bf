//go:build !amd64 || purego

package quant

// Stubs for the kernels of f32_amd64.s; with useAVX2 and useAVX512 false
// they are never called.

const useAVX512, useBF16 = false, false

func matMulFloatPanelAVX512(x *float32, ldx int, p *float32, k int, c *float32, ldc int, m int, mask uint64, pf *byte, pfLines int) {
	panic("unreachable")
}
func matMulFloatPanelAVX2(x *float32, ldx int, p *float32, k int, c *float32, ldc int, m int, mask *int32, accumulate int) {
	panic("unreachable")
}
func pack8F32AVX2(w *float32, ldw int, p *float32, k int) { panic("unreachable") }
func pack8F16AVX2(w *uint16, ldw int, p *float32, k int)  { panic("unreachable") }
func pack8BF16AVX2(w *uint16, ldw int, p *float32, k int) { panic("unreachable") }
func matMulBF16PanelAVX512(x *uint32, ldx int, p *uint32, k int, c *float32, ldc int, m int, mask uint64, pf *byte, pfLines int) {
	panic("unreachable")
}
func matVecBF16PairsAVX512(w *uint16, x *uint32, n int, out *float32, rows int) {
	panic("unreachable")
}
func toBF16AVX512(x *float32, dst *uint16, n int)               { panic("unreachable") }
func packF32PanelAVX512(w *float32, ldw int, p *float32, k int) { panic("unreachable") }
func packF16PanelAVX512(w *uint16, ldw int, p *float32, k int)  { panic("unreachable") }
func packBF16PanelAVX512(w *uint16, ldw int, p *float32, k int) { panic("unreachable") }

func matMulF32AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func expSumAVX2(x *float32, n int, shift float32) float32 { panic("unreachable") }
func swiGLUAVX2(dst, gate, up *float32, n int)            { panic("unreachable") }
func maxAVX2(x *float32, n int) float32                   { panic("unreachable") }
func matVecF16RowsAVX2(w *uint16, x *float32, n int, out *float32, rows int) {
	panic("unreachable")
}
func matVecBF16RowsAVX2(w *uint16, x *float32, n int, out *float32, rows int) {
	panic("unreachable")
}
func widenF16AVX2(w *uint16, dst *float32, n int)  { panic("unreachable") }
func widenBF16AVX2(w *uint16, dst *float32, n int) { panic("unreachable") }
func matMulF32F16AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32F16AVX512(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32x8AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32F16x8AVX512(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32RowAVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32F16RowAVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32Col8AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32RowCol8AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32F16Col8AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
func matMulF32F16RowCol8AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int) {
	panic("unreachable")
}
