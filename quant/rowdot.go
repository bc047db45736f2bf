package quant

import "unsafe"

// dotRowAVX2 is DotF32 for the weight types whose rows the AVX2 kernels
// widen in registers rather than through a buffer: F16, BF16 (half_amd64.s),
// Q4_1, Q5_0 and Q5_1 (q45_amd64.s). It reports false where there is no
// kernel: other types, no AVX2, F16/BF16 rows under 32 elements.
func dotRowAVX2(t Type, row []byte, x []float32) (float32, bool) {
	if !useAVX2 || len(x) == 0 {
		return 0, false
	}
	switch t {
	case Q4_1:
		return dotQ4_1F32AVX2(&row[0], &x[0], len(x)/32), true
	case Q5_0:
		return dotQ5_0F32AVX2(&row[0], &x[0], len(x)/32), true
	case Q5_1:
		return dotQ5_1F32AVX2(&row[0], &x[0], len(x)/32), true
	case F16, BF16:
	default:
		return 0, false
	}
	n := len(x) &^ 31
	if n == 0 {
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
