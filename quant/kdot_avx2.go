package quant

// Go halves of the AVX2 K-quant kernels: the assembly forms the scaled
// integer sums of each super-block, the per-block scalar work (unpacking
// the 6-bit scales, the min terms from bsums, the float scales) stays here.

// kChunk is how many super-blocks one assembly call handles.
const kChunk = 16

func dotQ4_KQ8_KAVX2(w, x []byte, nblocks int) float32 {
	return dotQ4KLikeAVX2(w, x, nblocks, q4_KBytes, q4KSumsAVX2)
}

func dotQ5_KQ8_KAVX2(w, x []byte, nblocks int) float32 {
	return dotQ4KLikeAVX2(w, x, nblocks, q5_KBytes, q5KSumsAVX2)
}

// dotQ4KLikeAVX2 serves Q4_K and Q5_K, which share the header (d, dmin,
// packed 6-bit scales and mins) and differ in the codes sums reads.
func dotQ4KLikeAVX2(w, x []byte, nblocks, bs int, sums func(w, x *byte, sc *int16, nblocks int, out *int32)) float32 {
	var sc [kChunk * 8]int16
	var s [kChunk]int32
	var total float32
	for i0 := 0; i0 < nblocks; i0 += kChunk {
		n := min(kChunk, nblocks-i0)
		for i := 0; i < n; i++ {
			scales := (*[12]byte)(w[(i0+i)*bs+4:])
			for j := 0; j < 8; j++ {
				v, _ := q4KScaleMin(j, scales)
				sc[8*i+j] = int16(v)
			}
		}
		sums(&w[i0*bs], &x[i0*q8_KBytes], &sc[0], n, &s[0])
		for i := 0; i < n; i++ {
			b := w[(i0+i)*bs:]
			a := loadQ8K((*[q8_KBytes]byte)(x[(i0+i)*q8_KBytes:]))
			scales := (*[12]byte)(b[4:16])
			var summ int32
			for j := 0; j < 8; j++ {
				_, m := q4KScaleMin(j, scales)
				summ += int32(m) * (a.bsums[2*j] + a.bsums[2*j+1])
			}
			total += a.d * (f16At(b[0:])*float32(s[i]) - f16At(b[2:])*float32(summ))
		}
	}
	return total
}

func dotQ6_KQ8_KAVX2(w, x []byte, nblocks int) float32 {
	var sums [kChunk]int32
	var total float32
	for i0 := 0; i0 < nblocks; i0 += kChunk {
		n := min(kChunk, nblocks-i0)
		q6KSumsAVX2(&w[i0*q6_KBytes], &x[i0*q8_KBytes], n, &sums[0])
		for i := 0; i < n; i++ {
			b := (*[q6_KBytes]byte)(w[(i0+i)*q6_KBytes:])
			a := loadQ8K((*[q8_KBytes]byte)(x[(i0+i)*q8_KBytes:]))
			sumi := sums[i]
			for j := 0; j < 16; j++ {
				sumi -= 32 * int32(int8(b[192+j])) * a.bsums[j]
			}
			total += a.d * f16At(b[208:]) * float32(sumi)
		}
	}
	return total
}
