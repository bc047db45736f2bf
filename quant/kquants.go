package quant

// The K-quants pack 256 elements (QK_K) in a super-block with per-sub-block
// scales. Element e of a super-block always uses sub-block scale e/16 (Q2_K,
// Q3_K, Q6_K) or e/32 (Q4_K, Q5_K); the layouts below say where its bits are.

const (
	q2_KBytes = 84
	q3_KBytes = 110
	q4_KBytes = 144
	q5_KBytes = 176
	q6_KBytes = 210
)

// Q2_K super-block (84 bytes):
//
//	scales [16]byte  low nibble: scale, high nibble: min of sub-block e/16
//	qs     [64]byte  2-bit codes
//	d, dmin fp16
//
// Element e (h = e/128, r = e%128) has its code in qs[32h + r%32] at bit
// shift 2·(r/32); value = d·scale·q − dmin·min.
func dequantQ2_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[q2_KBytes]byte)(src[i*q2_KBytes:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		scales, qs := b[0:16], b[16:80]
		d, dmin := f16At(b[80:]), f16At(b[82:])
		for e := 0; e < QK_K; e++ {
			h, r := e/128, e%128
			q := qs[32*h+r%32] >> (2 * (r / 32)) & 3
			sc := scales[e/16]
			y[e] = float32(d*float32(sc&0xf))*float32(q) - float32(dmin*float32(sc>>4))
		}
	}
}

// Q3_K super-block (110 bytes):
//
//	hmask  [32]byte  high bit of each code
//	qs     [64]byte  low 2 bits, placed as in Q2_K
//	scales [12]byte  16 signed 6-bit scales (stored +32), see q3KScales
//	d      fp16
//
// Element e (h = e/128, r = e%128) has its low bits in qs[32h + r%32] at
// shift 2·(r/32) and its high bit in hmask[r%32] at bit 4h + r/32. A clear
// high bit means the code is 4 lower: value = d·(scale−32)·(q − (hbit ? 0 : 4)).
func dequantQ3_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[q3_KBytes]byte)(src[i*q3_KBytes:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		hmask, qs := b[0:32], b[32:96]
		scales := q3KScales((*[12]byte)(b[96:108]))
		d := f16At(b[108:])
		for e := 0; e < QK_K; e++ {
			h, r := e/128, e%128
			q := int32(qs[32*h+r%32]>>(2*(r/32))) & 3
			if hmask[r%32]>>(4*h+r/32)&1 == 0 {
				q -= 4
			}
			y[e] = float32(d*float32(scales[e/16]-32)) * float32(q)
		}
	}
}

// q3KScales unpacks Q3_K's 16 six-bit scales: scale j has its low four bits
// in the low (j < 8) or high (j ≥ 8) nibble of s[j%8], and its top two bits
// in s[8 + j%4] at shift 2·(j/4).
func q3KScales(s *[12]byte) [16]int32 {
	var out [16]int32
	for j := 0; j < 16; j++ {
		lo := s[j%8] >> (4 * (j / 8)) & 0xf
		hi := s[8+j%4] >> (2 * (j / 4)) & 3
		out[j] = int32(lo | hi<<4)
	}
	return out
}

// q4KScaleMin unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12 packed bytes shared by Q4_K and Q5_K (ggml's get_scale_min_k4): j < 4
// keeps them in the low six bits of s[j] and s[j+4]; j ≥ 4 takes the low
// four bits from the nibbles of s[j+4] and the top two from the spare top
// bits of s[j-4] (scale) and s[j] (min).
func q4KScaleMin(j int, s *[12]byte) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// Q4_K super-block (144 bytes):
//
//	d, dmin fp16
//	scales  [12]byte  eight 6-bit scales and mins, see q4KScaleMin
//	qs      [128]byte 4-bit codes
//
// Element e (c = e/64, r = e%64) is the low (r < 32) or high nibble of
// qs[32c + r%32]; value = d·scale·q − dmin·min of sub-block e/32.
func dequantQ4_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[q4_KBytes]byte)(src[i*q4_KBytes:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d, dmin := f16At(b[0:]), f16At(b[2:])
		scales := (*[12]byte)(b[4:16])
		qs := b[16:144]
		for s := 0; s < 8; s++ {
			sc, m := q4KScaleMin(s, scales)
			ds, ms := d*float32(sc), dmin*float32(m)
			c, shift := s/2, 4*(s%2)
			for l := 0; l < 32; l++ {
				q := qs[32*c+l] >> shift & 0xf
				y[32*s+l] = ds*float32(q) - ms
			}
		}
	}
}

// Q5_K super-block (176 bytes):
//
//	d, dmin fp16
//	scales  [12]byte  as Q4_K
//	qh      [32]byte  fifth bits
//	qs      [128]byte low four bits, as Q4_K
//
// The fifth bit of element e (sub-block s = e/32) is bit s of qh[e%32].
func dequantQ5_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[q5_KBytes]byte)(src[i*q5_KBytes:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d, dmin := f16At(b[0:]), f16At(b[2:])
		scales := (*[12]byte)(b[4:16])
		qh, qs := b[16:48], b[48:176]
		for s := 0; s < 8; s++ {
			sc, m := q4KScaleMin(s, scales)
			ds, ms := d*float32(sc), dmin*float32(m)
			c, shift := s/2, 4*(s%2)
			for l := 0; l < 32; l++ {
				q := qs[32*c+l]>>shift&0xf | (qh[l]>>s&1)<<4
				y[32*s+l] = ds*float32(q) - ms
			}
		}
	}
}

// Q6_K super-block (210 bytes):
//
//	ql     [128]byte low four bits
//	qh     [64]byte  top two bits
//	scales [16]int8
//	d      fp16
//
// Element e (h = e/128, r = e%128, t = r/32, l = r%32) has its low bits in
// the low (t < 2) or high (t ≥ 2) nibble of ql[64h + 32·(t%2) + l] and its
// top bits in qh[32h + l] at shift 2t; value = d·scale[e/16]·(q − 32).
func dequantQ6_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[q6_KBytes]byte)(src[i*q6_KBytes:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		ql, qh, scales := b[0:128], b[128:192], b[192:208]
		d := f16At(b[208:])
		for e := 0; e < QK_K; e++ {
			h, r := e/128, e%128
			t, l := r/32, r%32
			lo := ql[64*h+32*(t%2)+l] >> (4 * (t / 2)) & 0xf
			hi := qh[32*h+l] >> (2 * t) & 3
			q := int32(lo|hi<<4) - 32
			y[e] = float32(d*float32(int8(scales[e/16]))) * float32(q)
		}
	}
}
