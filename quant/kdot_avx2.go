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

// matMulKAVX2 is MatMulKQ8_K for Q4_K, Q5_K and Q6_K on checked arguments.
// Per weight row it unpacks the scales and converts the fp16 super-block
// scales once, then runs the kernel over the whole row for each token.
func matMulKAVX2(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	bs := typ.BlockBytes()
	rb, xb := nblocks*bs, nblocks*q8_KBytes
	var sc []int16
	if typ != Q6_K {
		sc = make([]int16, nblocks*24)
	}
	sums := make([]int32, nblocks*2)
	d := make([]float32, nblocks)
	dmin := make([]float32, nblocks)
	xd := make([]float32, nblocks*tokens)
	for t := 0; t < tokens; t++ {
		for i := 0; i < nblocks; i++ {
			xd[t*nblocks+i] = math.Float32frombits(binary.LittleEndian.Uint32(x[t*xb+i*q8_KBytes:]))
		}
	}
	for r := 0; r < rows; r++ {
		row := w[r*rb : (r+1)*rb]
		for i := 0; i < nblocks; i++ {
			b := row[i*bs:]
			if typ == Q6_K {
				d[i] = f16At(b[208:])
				continue
			}
			d[i], dmin[i] = f16At(b[0:]), f16At(b[2:])
			q4KUnpack((*[12]byte)(b[4:]), (*[24]int16)(sc[24*i:]))
		}
		for t := 0; t < tokens; t++ {
			xt := x[t*xb:]
			switch typ {
			case Q4_K:
				q4KSumsAVX2(&row[0], &xt[0], &sc[0], nblocks, &sums[0])
			case Q5_K:
				q5KSumsAVX2(&row[0], &xt[0], &sc[0], nblocks, &sums[0])
			case Q6_K:
				q6KSumsAVX2(&row[0], &xt[0], nblocks, &sums[0])
			}
			var total float32
			xdt := xd[t*nblocks : (t+1)*nblocks]
			if typ == Q6_K {
				for i, s := range xdt {
					total += s * d[i] * float32(sums[2*i]-32*sums[2*i+1])
				}
			} else {
				for i, s := range xdt {
					total += s * (d[i]*float32(sums[2*i]) - dmin[i]*float32(sums[2*i+1]))
				}
			}
			out[t*outStride+r] = total
		}
	}
}
