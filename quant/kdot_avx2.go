package quant

// matMulKAVX2 is MatMulKQ8_K for Q4_K, Q5_K and Q6_K on checked arguments:
// the assembly row kernel for every (row, token) pair, row-major so that
// the weight row stays in L1 across the tokens.
func matMulKAVX2(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	rb, xb := nblocks*typ.BlockBytes(), nblocks*q8_KBytes
	kernel := dotQ4KRowAVX2
	switch typ {
	case Q5_K:
		kernel = dotQ5KRowAVX2
	case Q6_K:
		kernel = dotQ6KRowAVX2
	}
	for r := 0; r < rows; r++ {
		row := &w[r*rb]
		for t := 0; t < tokens; t++ {
			out[t*outStride+r] = kernel(row, &x[t*xb], nblocks)
		}
	}
}
