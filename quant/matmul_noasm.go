//go:build !amd64 || purego

package quant

// Stubs for the MatMul kernels of matmul_amd64.s; with useAVX2 false
// bestMatMulPath never selects them.

func q8SumsAVX2(x *byte, xstride, tokens, nblocks, mult, groupShift int, sums *byte) {
	panic("unreachable")
}
func q8ScaledSumsAVX2(x *byte, xstride, tokens, nblocks, mult, groupShift int, sums *byte) {
	panic("unreachable")
}
func packQ4_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ8_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packIQ4_NLVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte) { panic("unreachable") }
func packIQ4_XSVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte) { panic("unreachable") }
func packQ4_1VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ5_1VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ5_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ4_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ5_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ6_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ3_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ2_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ4_0AVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packQ8_0AVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)   { panic("unreachable") }
func packIQ4_NLAVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte) { panic("unreachable") }
func mulPackedVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
func mulPackedMinVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
func mulPackedXSVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
func mulPackedKMinVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
func mulPackedQ6_KVNNI(pack *byte, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
func mulPackedQ4_0AVX2(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
func mulPackedQ8_0AVX2(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
func mulPackedQ2_KVNNI(pack *byte, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int) {
	panic("unreachable")
}
