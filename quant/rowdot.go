package quant

import (
	"fmt"
	"unsafe"
)

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
		matVecF16RowsAVX2(w, &x[0], n, &s, 1)
	} else {
		matVecBF16RowsAVX2(w, &x[0], n, &s, 1)
	}
	if n < len(x) {
		var buf [32]float32
		tail := buf[:len(x)-n]
		dequantRow(t, row[2*n:], tail)
		s += Dot(tail, x[n:])
	}
	return s, true
}

// Widen sets dst to the values of src, len(dst) F16, BF16 or F32 elements:
// the CPU engine's batched prefill widens a few weight rows once and
// multiplies them by every token of the batch (MatMulF32).
func Widen(t Type, src []byte, dst []float32) error {
	if t != F16 && t != BF16 && t != F32 {
		return fmt.Errorf("quant: Widen: %v is not a float type", t)
	}
	if err := checkRow(t, len(src), len(dst)); err != nil {
		return fmt.Errorf("quant: Widen: %w", err)
	}
	n := len(dst) &^ 7
	if useAVX2 && n > 0 && t != F32 {
		w := (*uint16)(unsafe.Pointer(&src[0]))
		if t == F16 {
			widenF16AVX2(w, &dst[0], n)
		} else {
			widenBF16AVX2(w, &dst[0], n)
		}
	} else {
		n = 0
	}
	dequantRow(t, src[n*t.BlockBytes():], dst[n:])
	return nil
}
