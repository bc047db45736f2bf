package quant

// matMulKAVX2 is MatMulKQ8_K for Q2_K, Q3_K, Q4_K, Q5_K and Q6_K on
// checked arguments where the tiled VNNI products (matMulKVNNI) do not
// run: on machines without AVX512-VNNI, and for a single token. Batches in
// tiles, several tokens a call (matMulKTiled); a single token (and Q5_K's
// and Q6_K's batches of two or three, and every batch of Q2_K and Q3_K,
// which have no AVX2 tile kernel) the assembly row kernel for every (row,
// token) pair, row-major so that the weight row stays in L1 across the
// tokens.
func matMulKAVX2(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	if (typ == Q4_K || typ == Q6_K) && tokens >= kX8MinTokens {
		matMulKX8(typ, w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	if typ != Q2_K && typ != Q3_K && (tokens >= 4 || (typ == Q4_K && tokens > 1)) {
		matMulKTiled(typ, w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	rb, xb := nblocks*typ.BlockBytes(), nblocks*q8_KBytes
	kernel, matVec := dotQ4KRowAVX2, matVecQ4KAVX2
	switch typ {
	case Q5_K:
		kernel, matVec = dotQ5KRowAVX2, matVecQ5KAVX2
	case Q6_K:
		kernel, matVec = dotQ6KRowAVX2, matVecQ6KAVX2
	case Q2_K:
		kernel, matVec = dotQ2KRowAVX2, matVecQ2KAVX2
	case Q3_K:
		kernel, matVec = dotQ3KRowAVX2, matVecQ3KAVX2
	}
	if tokens == 1 { // decode: the row loop in assembly
		matVec(&w[0], &x[0], nblocks, &out[0], rows)
		return
	}
	for r := 0; r < rows; r++ {
		row := &w[r*rb]
		for t := 0; t < tokens; t++ {
			out[t*outStride+r] = kernel(row, &x[t*xb], nblocks)
		}
	}
}

// kTileRows is the rows of a tile: their weights (a 2048-wide Q4_K row is
// 1,152 bytes) stay in L2 while every group of four tokens passes over
// them.
const kTileRows = 32

// matMulKTiled multiplies Q4_K, Q5_K, Q6_K or IQ4_XS rows by tokens in tiles of
// kTileRows rows by four tokens: the four tokens' activations (a
// 2048-wide Q8_K row is 2,336 bytes) stay in L1 across the tile's rows,
// and each row's scales and codes are unpacked once for the four
// (dotQ4KRow4AVX2, dotQ5KRow4AVX2, dotQ6KRow4AVX2). Leftover tokens take two a call
// (Q4_K) or one.
func matMulKTiled(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	rb, xb := nblocks*typ.BlockBytes(), nblocks*q8_KBytes
	kernel4, kernel1 := dotQ4KRow4AVX2, dotQ4KRowAVX2
	switch typ {
	case Q5_K:
		kernel4, kernel1 = dotQ5KRow4AVX2, dotQ5KRowAVX2
	case Q6_K:
		kernel4, kernel1 = dotQ6KRow4AVX2, dotQ6KRowAVX2
	case IQ4_XS:
		kernel4, kernel1 = dotIQ4XSRow4AVX2, dotIQ4_XSQ8_KAVX2
	}
	var acc [32]float32
	var pair [2]float32
	for r0 := 0; r0 < rows; r0 += kTileRows {
		r1 := min(rows, r0+kTileRows)
		t := 0
		for ; t+3 < tokens; t += 4 {
			for r := r0; r < r1; r++ {
				acc = [32]float32{}
				kernel4(&w[r*rb], &x[t*xb], xb, nblocks, &acc)
				for k := range 4 {
					l := acc[8*k : 8*k+8]
					out[(t+k)*outStride+r] = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
				}
			}
		}
		for ; typ == Q4_K && t+1 < tokens; t += 2 {
			for r := r0; r < r1; r++ {
				dotQ4KRow2AVX2(&w[r*rb], &x[t*xb], &x[(t+1)*xb], nblocks, &pair[0])
				out[t*outStride+r], out[(t+1)*outStride+r] = pair[0], pair[1]
			}
		}
		for ; t < tokens; t++ {
			for r := r0; r < r1; r++ {
				out[t*outStride+r] = kernel1(&w[r*rb], &x[t*xb], nblocks)
			}
		}
	}
}

// matMulIQ4_XSAVX2 is MatMulKQ8_K for IQ4_XS on checked arguments without
// AVX512-VNNI: batches of four tokens or more in matMulKTiled's tiles
// (dotIQ4XSRow4AVX2 looks each sub-block's codes up once for four
// tokens), one token (decode) by the assembly row loop over every row,
// and two or three a token at a time the same way (four rows at a time,
// matVecIQ4_XSQ8_KRows4AVX2, the rest a row at a time).
func matMulIQ4_XSAVX2(w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	if tokens >= 4 {
		matMulKTiled(IQ4_XS, w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	xb := nblocks * q8_KBytes
	n4 := rows &^ 3
	for t := 0; t < tokens; t++ {
		if n4 > 0 {
			matVecIQ4_XSQ8_KRows4AVX2(&w[0], &x[t*xb], nblocks, &out[t*outStride], n4)
		}
		if n4 < rows {
			matVecIQ4_XSQ8_KAVX2(&w[n4*nblocks*iq4_XSBytes], &x[t*xb], nblocks, &out[t*outStride+n4], rows-n4)
		}
	}
}
