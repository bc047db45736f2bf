package quant

import (
	"encoding/binary"
	"math"
)

// Go half of the AVX2 Q6_K kernel: the assembly forms the scaled integer
// sums of each super-block and the offset term, the float scales are
// applied here. (Q4_K and Q5_K run wholly in assembly.)

// kChunk is how many super-blocks one assembly call handles.
const kChunk = 16

func dotQ6_KQ8_KAVX2(w, x []byte, nblocks int) float32 {
	var s [kChunk * 2]int32
	var total float32
	for i0 := 0; i0 < nblocks; i0 += kChunk {
		n := min(kChunk, nblocks-i0)
		q6KSumsAVX2(&w[i0*q6_KBytes], &x[i0*q8_KBytes], n, &s[0])
		for i := 0; i < n; i++ {
			b := w[(i0+i)*q6_KBytes:]
			xd := math.Float32frombits(binary.LittleEndian.Uint32(x[(i0+i)*q8_KBytes:]))
			total += xd * f16At(b[208:]) * float32(s[2*i]-32*s[2*i+1])
		}
	}
	return total
}

// matMulKAVX2 is MatMulKQ8_K for Q4_K, Q5_K and Q6_K on checked arguments.
func matMulKAVX2(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	rb, xb := nblocks*typ.BlockBytes(), nblocks*q8_KBytes
	for r := 0; r < rows; r++ {
		row := &w[r*rb]
		for t := 0; t < tokens; t++ {
			xt := &x[t*xb]
			switch typ {
			case Q4_K:
				out[t*outStride+r] = dotQ4KRowAVX2(row, xt, nblocks)
			case Q5_K:
				out[t*outStride+r] = dotQ5KRowAVX2(row, xt, nblocks)
			case Q6_K:
				out[t*outStride+r] = dotQ6_KQ8_KAVX2(w[r*rb:(r+1)*rb], x[t*xb:(t+1)*xb], nblocks)
			}
		}
	}
}
