package quant

import (
	"fmt"
	"unsafe"
)

// MatVecF16 sets out[r] to the dot product of row r of w with x: len(out)
// rows of len(x) F16 values, one after the other. It is decode's product
// for F16 weights, with the row loop inside the kernel (a call per row,
// with its checks, cost a third of a small model's token).
func MatVecF16(w []byte, x, out []float32) {
	rb := 2 * len(x)
	if len(w) != rb*len(out) {
		panic(fmt.Sprintf("quant: MatVecF16: %d bytes for %d rows of %d", len(w), len(out), len(x)))
	}
	r := 0
	if n := len(x); useAVX2 && n > 0 && n%32 == 0 && len(out) > 0 {
		matVecF16RowsAVX2((*uint16)(unsafe.Pointer(&w[0])), &x[0], n, &out[0], len(out))
		r = len(out)
	}
	for ; r < len(out); r++ {
		out[r] = DotF32(F16, w[r*rb:(r+1)*rb], x)
	}
}
