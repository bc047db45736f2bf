package quant

// matMulKAVX2 is MatMulKQ8_K for Q4_K, Q5_K and Q6_K on checked arguments:
// the assembly row kernel for every (row, token) pair (Q4_K: two tokens a
// call), row-major so that the weight row stays in L1 across the tokens.
func matMulKAVX2(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	rb, xb := nblocks*typ.BlockBytes(), nblocks*q8_KBytes
	kernel := dotQ4KRowAVX2
	switch typ {
	case Q5_K:
		kernel = dotQ5KRowAVX2
	case Q6_K:
		kernel = dotQ6KRowAVX2
	}
	var pair [2]float32
	for r := 0; r < rows; r++ {
		row := &w[r*rb]
		t := 0
		if typ == Q4_K {
			// Two tokens a call: the block's scales and nibbles unpacked
			// once for both.
			for ; t+1 < tokens; t += 2 {
				dotQ4KRow2AVX2(row, &x[t*xb], &x[(t+1)*xb], nblocks, &pair[0])
				out[t*outStride+r], out[(t+1)*outStride+r] = pair[0], pair[1]
			}
		}
		for ; t < tokens; t++ {
			out[t*outStride+r] = kernel(row, &x[t*xb], nblocks)
		}
	}
}
