package quant

import (
	"fmt"
	"unsafe"
)

// MatVecHalf sets out[r] to the dot product of row r of w with x: len(out)
// rows of len(x) F16 or BF16 values (t), one after the other. It is
// decode's product for 16-bit float weights, with the row loop inside the
// kernel (a call per row, with its checks, cost a third of a small model's
// token).
func MatVecHalf(t Type, w []byte, x, out []float32) {
	rb := 2 * len(x)
	if t != F16 && t != BF16 {
		panic(fmt.Sprintf("quant: MatVecHalf: %v is not F16 or BF16", t))
	}
	if len(w) != rb*len(out) {
		panic(fmt.Sprintf("quant: MatVecHalf: %d bytes for %d rows of %d", len(w), len(out), len(x)))
	}
	r := 0
	if n := len(x); useAVX2 && n > 0 && n%32 == 0 && len(out) > 0 {
		w16 := (*uint16)(unsafe.Pointer(&w[0]))
		if t == F16 {
			matVecF16RowsAVX2(w16, &x[0], n, &out[0], len(out))
		} else {
			matVecBF16RowsAVX2(w16, &x[0], n, &out[0], len(out))
		}
		r = len(out)
	}
	for ; r < len(out); r++ {
		out[r] = DotF32(t, w[r*rb:(r+1)*rb], x)
	}
}
