package quant

import "unsafe"

// dotRowAVX2 is DotF32 for F16 and BF16 rows, which the AVX2 kernels of
// half_amd64.s widen in registers rather than through a buffer. It reports
// false where there is no kernel: other types, no AVX2, rows under 32
// elements.
func dotRowAVX2(t Type, row []byte, x []float32) (float32, bool) {
	n := len(x) &^ 31
	if !useAVX2 || n == 0 || (t != F16 && t != BF16) {
		return 0, false
	}
	w := (*uint16)(unsafe.Pointer(&row[0]))
	var s float32
	if t == F16 {
		s = dotF16F32AVX2(w, &x[0], n)
	} else {
		s = dotBF16F32AVX2(w, &x[0], n)
	}
	if n < len(x) {
		var buf [32]float32
		tail := buf[:len(x)-n]
		dequantRow(t, row[2*n:], tail)
		s += Dot(tail, x[n:])
	}
	return s, true
}
