package quant

import "math"

// Encoders for Q2_K, Q3_K, Q4_K, Q5_K and Q6_K. Each sub-block's scale
// (and min) comes from a search for the least weighted squared error
// (ksearch.go), as llama-quantize searches; then the super-block's scales
// are quantized and the codes taken against the scales decoders will see.

// roundClamp rounds v half away from zero and clamps it to [lo, hi]; NaN
// becomes lo.
func roundClamp(v float32, lo, hi int32) int32 {
	if !(v > float32(lo)) {
		return lo
	}
	if v >= float32(hi) {
		return hi
	}
	return int32(math.Round(float64(v)))
}

// quantQ4_KLike encodes Q4_K (bits 4) or Q5_K (bits 5) super-blocks: each
// sub-block of 32 gets the scale and min of fitMinScale (codes
// 0..2^bits−1, weighted by the sub-block's RMS plus each value's
// magnitude), quantized to 6 bits against the super-block's d and dmin.
func quantQ4_KLike(src []float32, dst []byte, bits uint) {
	bs := q4_KBytes
	if bits == 5 {
		bs = q5_KBytes
	}
	top := int32(1)<<bits - 1
	var w [32]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := dst[i*bs : (i+1)*bs]
		clear(b)
		var scale, minv [8]float32
		var maxScale, maxMin float32
		for s := 0; s < 8; s++ {
			sub := x[32*s : 32*s+32]
			var ss float32
			for _, v := range sub {
				ss += v * v
			}
			rms := float32(math.Sqrt(float64(ss / 32)))
			for l, v := range sub {
				w[l] = rms + abs32(v)
			}
			// 21 scales from (top−1)/range to (top+1)/range, as llama.cpp
			// tries for Q4_K (for Q5_K it starts at top−0.5: 0.9% more
			// error on test-256's weights than this range).
			scale[s], minv[s] = fitMinScale(sub, w[:], top, -1, 0.1, 20)
			maxScale, maxMin = max(maxScale, scale[s]), max(maxMin, minv[s])
		}
		d, dmin := maxScale/63, maxMin/63
		putF16(b[0:], d)
		putF16(b[2:], dmin)
		d, dmin = f16At(b[0:]), f16At(b[2:]) // the values decoders will see
		var sc, m [8]int32
		for s := 0; s < 8; s++ {
			if d > 0 {
				sc[s] = roundClamp(scale[s]/d, 0, 63)
			}
			if dmin > 0 {
				m[s] = roundClamp(minv[s]/dmin, 0, 63)
			}
		}
		packQ4KScales((*[12]byte)(b[4:16]), sc, m)
		qs := b[16:]
		var qh []byte
		if bits == 5 {
			qh, qs = b[16:48], b[48:]
		}
		for s := 0; s < 8; s++ {
			ds, ms := d*float32(sc[s]), dmin*float32(m[s])
			c, shift := s/2, 4*(s%2)
			for l := 0; l < 32; l++ {
				var q int32
				if ds > 0 {
					q = roundClamp((x[32*s+l]+ms)/ds, 0, top)
				}
				qs[32*c+l] |= byte(q&0xf) << shift
				if bits == 5 {
					qh[l] |= byte(q>>4) << s
				}
			}
		}
	}
}

// packQ4KScales is the inverse of q4KScaleMin.
func packQ4KScales(s *[12]byte, sc, m [8]int32) {
	for j := 0; j < 8; j++ {
		a, b := byte(sc[j]), byte(m[j])
		if j < 4 {
			s[j] |= a
			s[j+4] |= b
			continue
		}
		s[j+4] = a&0xf | b&0xf<<4
		s[j-4] |= a >> 4 << 6
		s[j] |= b >> 4 << 6
	}
}

func quantQ4_K(src []float32, dst []byte) { quantQ4_KLike(src, dst, 4) }
func quantQ5_K(src []float32, dst []byte) { quantQ4_KLike(src, dst, 5) }

// quantQ6_K encodes Q6_K super-blocks: each sub-block of 16 gets the
// scale of fitScale (codes −32…31), quantized to int8 against the
// super-block's d, which maps the scale of largest magnitude to −128.
func quantQ6_K(src []float32, dst []byte) {
	for i := 0; i < len(src)/QK_K; i++ {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[q6_KBytes]byte)(dst[i*q6_KBytes:])
		clear(b[:])
		var scale [16]float32
		for j := range scale {
			scale[j] = fitScale(x[16*j:16*j+16], 32)
		}
		big := largest(scale[:])
		putF16(b[208:], -big/128)
		d := f16At(b[208:])
		ql, qh := b[0:128], b[128:192]
		for j := 0; j < 16; j++ {
			var sc int32
			if d != 0 {
				sc = roundClamp(scale[j]/d, -128, 127)
			}
			b[192+j] = byte(int8(sc))
			ds := d * float32(sc)
			for k := 16 * j; k < 16*j+16; k++ {
				var q int32
				if ds != 0 {
					q = roundClamp(x[k]/ds, -32, 31)
				}
				q += 32
				h, r := k/128, k%128
				t, l := r/32, r%32
				ql[64*h+32*(t%2)+l] |= byte(q&0xf) << (4 * (t / 2))
				qh[32*h+l] |= byte(q>>4) << (2 * t)
			}
		}
	}
}

// quantQ2_K encodes Q2_K super-blocks: each sub-block of 16 gets the
// scale and min of fitMinScale (codes 0..3, weighted by each value's
// magnitude), quantized to 4 bits against the super-block's d and dmin.
func quantQ2_K(src []float32, dst []byte) {
	var w [16]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[q2_KBytes]byte)(dst[i*q2_KBytes:])
		clear(b[:])
		var scale, minv [16]float32
		var maxScale, maxMin float32
		for j := 0; j < 16; j++ {
			sub := x[16*j : 16*j+16]
			for l, v := range sub {
				w[l] = abs32(v)
			}
			scale[j], minv[j] = fitMinScale(sub, w[:], 3, -0.5, 0.1, 15)
			maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, minv[j])
		}
		putF16(b[80:], maxScale/15)
		putF16(b[82:], maxMin/15)
		d, dmin := f16At(b[80:]), f16At(b[82:]) // the values decoders will see
		for j := 0; j < 16; j++ {
			var sc, m int32
			if d > 0 {
				sc = roundClamp(scale[j]/d, 0, 15)
			}
			if dmin > 0 {
				m = roundClamp(minv[j]/dmin, 0, 15)
			}
			b[j] = byte(sc | m<<4)
			ds, ms := d*float32(sc), dmin*float32(m)
			for l := 0; l < 16; l++ {
				e := 16*j + l
				var q int32
				if ds > 0 {
					q = roundClamp((x[e]+ms)/ds, 0, 3)
				}
				h, r := e/128, e%128
				b[16+32*h+r%32] |= byte(q) << (2 * (r / 32))
			}
		}
	}
}

// quantQ3_K encodes Q3_K super-blocks: each sub-block of 16 gets the
// scale of refineScale (levels −4…3, llama.cpp's sign choice), quantized to
// a signed 6-bit scale against the super-block's d, which maps the scale
// of largest magnitude to −32.
func quantQ3_K(src []float32, dst []byte) {
	for i := 0; i < len(src)/QK_K; i++ {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[q3_KBytes]byte)(dst[i*q3_KBytes:])
		clear(b[:])
		var scale [16]float32
		for j := range scale {
			scale[j] = refineScale(x[16*j:16*j+16], 4)
		}
		big := largest(scale[:])
		putF16(b[108:], -big/32)
		d := f16At(b[108:])
		var sc [16]int32
		for j := range sc {
			if d != 0 {
				sc[j] = roundClamp(scale[j]/d, -32, 31)
			}
		}
		packQ3KScales((*[12]byte)(b[96:108]), sc)
		hmask, qs := b[0:32], b[32:96]
		for j := 0; j < 16; j++ {
			ds := d * float32(sc[j])
			for l := 0; l < 16; l++ {
				e := 16*j + l
				q := int32(0)
				if ds != 0 {
					q = roundClamp(x[e]/ds, -4, 3)
				}
				q += 4 // stored 0..7: the high bit set means no −4
				h, r := e/128, e%128
				qs[32*h+r%32] |= byte(q&3) << (2 * (r / 32))
				hmask[r%32] |= byte(q>>2) << (4*h + r/32)
			}
		}
	}
}

// packQ3KScales is the inverse of q3KScales: 16 signed 6-bit scales,
// stored +32.
func packQ3KScales(s *[12]byte, sc [16]int32) {
	for j := 0; j < 16; j++ {
		v := byte(sc[j] + 32)
		s[j%8] |= v & 0xf << (4 * (j / 8))
		s[8+j%4] |= v >> 4 << (2 * (j / 4))
	}
}
