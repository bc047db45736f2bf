package quant

import (
	"encoding/binary"
	"math"
)

// Go halves of the AVX2 K-quant kernels: the assembly forms the scaled
// integer sums of each super-block, the per-block scalar work (unpacking
// the 6-bit scales, the min terms from bsums, the float scales) stays here.

// kChunk is how many super-blocks one assembly call handles.
const kChunk = 16

func dotQ4_KQ8_KAVX2(w, x []byte, nblocks int) float32 {
	return dotQ4KLikeAVX2(w, x, nblocks, q4_KBytes)
}

func dotQ5_KQ8_KAVX2(w, x []byte, nblocks int) float32 {
	return dotQ4KLikeAVX2(w, x, nblocks, q5_KBytes)
}

// dotQ4KLikeAVX2 serves Q4_K and Q5_K, which share the header (d, dmin,
// packed 6-bit scales and mins) and differ in the codes; bs, the block
// size, says which. The kernels are called directly, not through a func
// value, so that the buffers stay on the stack.
func dotQ4KLikeAVX2(w, x []byte, nblocks, bs int) float32 {
	var sc [kChunk * 24]int16
	var s [kChunk * 2]int32
	var total float32
	for i0 := 0; i0 < nblocks; i0 += kChunk {
		n := min(kChunk, nblocks-i0)
		for i := 0; i < n; i++ {
			q4KUnpack((*[12]byte)(w[(i0+i)*bs+4:]), (*[24]int16)(sc[24*i:]))
		}
		if bs == q5_KBytes {
			q5KSumsAVX2(&w[i0*bs], &x[i0*q8_KBytes], &sc[0], n, &s[0])
		} else {
			q4KSumsAVX2(&w[i0*bs], &x[i0*q8_KBytes], &sc[0], n, &s[0])
		}
		for i := 0; i < n; i++ {
			b := w[(i0+i)*bs:]
			xd := math.Float32frombits(binary.LittleEndian.Uint32(x[(i0+i)*q8_KBytes:]))
			total += xd * (f16At(b[0:])*float32(s[2*i]) - f16At(b[2:])*float32(s[2*i+1]))
		}
	}
	return total
}

// q4KUnpack writes the eight 6-bit scales of s to out[0:8] and its eight
// mins, each twice, to out[8:24], as q4KScaleMin reads them.
func q4KUnpack(s *[12]byte, out *[24]int16) {
	for j := 0; j < 4; j++ {
		out[j] = int16(s[j] & 63)
		m := int16(s[j+4] & 63)
		out[8+2*j], out[9+2*j] = m, m
	}
	for j := 4; j < 8; j++ {
		out[j] = int16(s[j+4]&0xf | s[j-4]>>6<<4)
		m := int16(s[j+4]>>4 | s[j]>>6<<4)
		out[8+2*j], out[9+2*j] = m, m
	}
}

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
