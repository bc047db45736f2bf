package quant

import (
	"encoding/binary"
	"fmt"
)

// Q4_1, Q5_0 and Q5_1 weights multiply Q8_0 activations, as llama.cpp's
// CPU backend multiplies them (its Q8_1 for Q4_1/Q5_1 carries Σy, which
// these kernels sum from the codes): the codes' integer dot product scaled
// by both block scales, plus, for the types with a min, m·d(x)·Σy. AVX2
// assembly in dot_amd64.s; the Go loops below elsewhere.

// DotQ4_1Q8_0 returns the dot product of nblocks Q4_1 blocks of w with
// nblocks Q8_0 blocks of x.
func DotQ4_1Q8_0(w, x []byte, nblocks int) float32 {
	checkDot("DotQ4_1Q8_0", len(w), q4_1Bytes, len(x), nblocks)
	if nblocks == 0 {
		return 0
	}
	if useAVX2 {
		return dotQ4_1Q8_0AVX2(&w[0], &x[0], nblocks)
	}
	return dotQ45Q8_0Generic(Q4_1, w, x, nblocks)
}

// DotQ5_0Q8_0 returns the dot product of nblocks Q5_0 blocks of w with
// nblocks Q8_0 blocks of x.
func DotQ5_0Q8_0(w, x []byte, nblocks int) float32 {
	checkDot("DotQ5_0Q8_0", len(w), q5_0Bytes, len(x), nblocks)
	if nblocks == 0 {
		return 0
	}
	if useAVX2 {
		return dotQ5_0Q8_0AVX2(&w[0], &x[0], nblocks)
	}
	return dotQ45Q8_0Generic(Q5_0, w, x, nblocks)
}

// DotQ5_1Q8_0 returns the dot product of nblocks Q5_1 blocks of w with
// nblocks Q8_0 blocks of x.
func DotQ5_1Q8_0(w, x []byte, nblocks int) float32 {
	checkDot("DotQ5_1Q8_0", len(w), q5_1Bytes, len(x), nblocks)
	if nblocks == 0 {
		return 0
	}
	if useAVX2 {
		return dotQ5_1Q8_0AVX2(&w[0], &x[0], nblocks)
	}
	return dotQ45Q8_0Generic(Q5_1, w, x, nblocks)
}

// dotQ45Q8_0Generic is the Go form of the three kernels: per block the
// codes q (with their fifth bits), Σq·y and Σy in integers, then
// d·d(x)·(Σq·y − off·Σy) + m·d(x)·Σy.
func dotQ45Q8_0Generic(t Type, w, x []byte, nblocks int) float32 {
	bb := t.BlockBytes()
	var sum float32
	for i := 0; i < nblocks; i++ {
		wb, xb := w[i*bb:(i+1)*bb], x[i*q8_0Bytes:(i+1)*q8_0Bytes]
		var qh uint32
		var qs []byte
		var m float32
		off := int32(0)
		switch t {
		case Q4_1:
			m, qs = f16At(wb[2:]), wb[4:20]
		case Q5_0:
			qh, qs, off = binary.LittleEndian.Uint32(wb[2:]), wb[6:22], 16
		case Q5_1:
			m, qh, qs = f16At(wb[2:]), binary.LittleEndian.Uint32(wb[4:]), wb[8:24]
		}
		var qy, sy int32
		for j := 0; j < 32; j++ {
			q := int32(qs[j%16] >> (4 * (j / 16)) & 15)
			q |= int32(qh>>j&1) << 4
			y := int32(int8(xb[2+j]))
			qy += q * y
			sy += y
		}
		dx := f16At(xb[0:])
		sum += float32(qy-off*sy)*(f16At(wb[0:])*dx) + m*dx*float32(sy)
	}
	return sum
}

// MatVecRowsQ8_0 writes the dot products of len(out) consecutive rows of
// nblocks t blocks (Q4_1, Q5_0, Q5_1 or IQ4_NL) at w with the nblocks Q8_0
// blocks of x to out: the decode step's matrix-vector product, the
// arithmetic of DotQ4_1Q8_0 and the others a row, without a call a row.
// With AVX512-VNNI, rows go four at a time (each activation block
// prepared once for four, the weights prefetched), with the row kernels'
// integer sums and their float sums in another order; with AVX2 alone
// too (the activation block and its shared term once for four rows).
func MatVecRowsQ8_0(t Type, w, x []byte, nblocks int, out []float32) {
	var bb int
	// kernel: a row at a time; rows4: four at a time, rows a multiple of
	// 4; vnni: every row, four at a time.
	var kernel, rows4, vnni func(w, x *byte, nblocks int, out *float32, rows int)
	var dot func(w, x []byte, nblocks int) float32
	switch t {
	case Q4_1:
		bb, kernel, rows4, vnni, dot = q4_1Bytes, matVecQ4_1Q8_0AVX2, matVecQ4_1Q8_0Rows4AVX2, matVecQ4_1Q8_0VNNI, DotQ4_1Q8_0
	case Q5_0:
		bb, kernel, rows4, vnni, dot = q5_0Bytes, matVecQ5_0Q8_0AVX2, matVecQ5_0Q8_0Rows4AVX2, matVecQ5_0Q8_0VNNI, DotQ5_0Q8_0
	case Q5_1:
		bb, kernel, rows4, vnni, dot = q5_1Bytes, matVecQ5_1Q8_0AVX2, matVecQ5_1Q8_0Rows4AVX2, matVecQ5_1Q8_0VNNI, DotQ5_1Q8_0
	case IQ4_NL:
		bb, kernel, rows4, dot = iq4_NLBytes, matVecIQ4_NLQ8_0AVX2, matVecIQ4_NLQ8_0Rows4AVX2, DotIQ4_NLQ8_0
	default:
		panic(fmt.Sprintf("quant: MatVecRowsQ8_0 of %s", t))
	}
	checkMatVec("MatVecRowsQ8_0", len(w), bb, len(x), nblocks, len(out))
	if nblocks == 0 {
		clear(out)
		return
	}
	if len(out) == 0 {
		return
	}
	if useVNNI && vnni != nil {
		vnni(&w[0], &x[0], nblocks, &out[0], len(out))
		return
	}
	if useVNNI && t == IQ4_NL {
		rows4 = matVecIQ4_NLQ8_0VNNI
	}
	if useAVX2 {
		// Four rows at a time; the rest a row at a time.
		n4 := len(out) &^ 3
		if n4 > 0 {
			rows4(&w[0], &x[0], nblocks, &out[0], n4)
		}
		if n4 < len(out) {
			kernel(&w[n4*nblocks*bb], &x[0], nblocks, &out[n4], len(out)-n4)
		}
		return
	}
	rb := nblocks * bb
	for r := range out {
		out[r] = dot(w[r*rb:(r+1)*rb], x, nblocks)
	}
}
