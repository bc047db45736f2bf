package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Integer dot products of K-quant weights with Q8_K activations, the
// vec_dot_type llama.cpp pairs with every K-quant. Activations are quantized
// once per input vector with QuantizeQ8_K; each weight super-block then
// costs an integer dot product per sub-block, scaled by the sub-block's
// 6- or 8-bit scale, and the weights' min terms (Q2_K, Q4_K, Q5_K) come
// from the activations' per-16 sums (bsums) instead of from the codes.
//
// Length mismatches are programming errors and panic, as in dot.go.

// Q8KBytes is the size of one Q8_K block of 256 activations.
const Q8KBytes = q8_KBytes

// QuantizeQ8_K quantizes x to Q8_K blocks in dst: per 256 values one float32
// scale d = max|x|/127, codes round(x/d) in [-127, 127], and the sums of
// each 16 codes. len(x) must be a multiple of 256 and dst must hold
// len(x)/256 blocks of Q8KBytes; it panics otherwise.
func QuantizeQ8_K(x []float32, dst []byte) {
	if len(x)%QK_K != 0 {
		panic(fmt.Sprintf("quant: QuantizeQ8_K: %d values is not a multiple of %d", len(x), QK_K))
	}
	nb := len(x) / QK_K
	if len(dst) < nb*q8_KBytes {
		panic(fmt.Sprintf("quant: QuantizeQ8_K: dst has %d bytes, %d blocks need %d", len(dst), nb, nb*q8_KBytes))
	}
	if useAVX2 && nb > 0 {
		quantizeQ8_KAVX2(&x[0], &dst[0], nb)
		// The assembly rounds NaN and ±Inf differently and marks such
		// blocks with a non-finite d; they (garbage in any case) take the
		// Go code, whose codes stay in [-127, 127].
		for i := 0; i < nb; i++ {
			d := math.Float32frombits(binary.LittleEndian.Uint32(dst[i*q8_KBytes:]))
			if d-d != 0 {
				quantQ8_KBlock((*[QK_K]float32)(x[i*QK_K:]), (*[q8_KBytes]byte)(dst[i*q8_KBytes:]))
			}
		}
		return
	}
	for i := 0; i < nb; i++ {
		quantQ8_KBlock((*[QK_K]float32)(x[i*QK_K:]), (*[q8_KBytes]byte)(dst[i*q8_KBytes:]))
	}
}

// quantQ8_KBlock is QuantizeQ8_K for one block, in Go.
func quantQ8_KBlock(v *[QK_K]float32, b *[q8_KBytes]byte) {
	var amax float32
	for _, f := range v {
		if a := abs32(f); !(amax > a) { // NaN propagates
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint32(b[0:], math.Float32bits(d))
	for g := 0; g < 16; g++ {
		var sum int16
		for j := 16 * g; j < 16*g+16; j++ {
			q := roundInt8(v[j] * id)
			if q < -127 { // only for NaN or Inf input; keep the bound
				q = -127
			}
			b[4+j] = byte(q)
			sum += int16(q)
		}
		binary.LittleEndian.PutUint16(b[260+2*g:], uint16(sum))
	}
}

// q8K views one Q8_K block.
type q8K struct {
	d     float32
	qs    *[QK_K]byte
	bsums [16]int32
}

func loadQ8K(b *[q8_KBytes]byte) q8K {
	x := q8K{
		d:  math.Float32frombits(binary.LittleEndian.Uint32(b[0:])),
		qs: (*[QK_K]byte)(b[4:260]),
	}
	for g := range x.bsums {
		x.bsums[g] = int32(int16(binary.LittleEndian.Uint16(b[260+2*g:])))
	}
	return x
}

func checkDotK(fn string, wlen, wblock, xlen, nblocks int) {
	if nblocks < 0 {
		panic(fmt.Sprintf("quant: %s: negative block count %d", fn, nblocks))
	}
	if wlen/wblock < nblocks {
		panic(fmt.Sprintf("quant: %s: weights have %d bytes, %d blocks need %d", fn, wlen, nblocks, nblocks*wblock))
	}
	if xlen/q8_KBytes < nblocks {
		panic(fmt.Sprintf("quant: %s: activations have %d bytes, %d blocks need %d", fn, xlen, nblocks, nblocks*q8_KBytes))
	}
}

// DotQ4_KQ8_K returns the dot product of nblocks Q4_K super-blocks of w with
// nblocks Q8_K blocks of x (256·nblocks elements each).
func DotQ4_KQ8_K(w, x []byte, nblocks int) float32 {
	checkDotK("DotQ4_KQ8_K", len(w), q4_KBytes, len(x), nblocks)
	if useAVX2 && nblocks > 0 {
		return dotQ4KRowAVX2(&w[0], &x[0], nblocks)
	}
	return dotQ4_KQ8_KGeneric(w, x, nblocks)
}

func dotQ4_KQ8_KGeneric(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		b := (*[q4_KBytes]byte)(w[i*q4_KBytes:])
		a := loadQ8K((*[q8_KBytes]byte)(x[i*q8_KBytes:]))
		scales := (*[12]byte)(b[4:16])
		var sumi, summ int32
		for c := 0; c < 4; c++ {
			qs := (*[32]byte)(b[16+32*c:])
			lo := (*[32]byte)(a.qs[64*c:])
			hi := (*[32]byte)(a.qs[64*c+32:])
			var s0, s1 int32
			for l, q := range qs {
				s0 += int32(q&0xf) * int32(int8(lo[l]))
				s1 += int32(q>>4) * int32(int8(hi[l]))
			}
			sc0, m0 := q4KScaleMin(2*c, scales)
			sc1, m1 := q4KScaleMin(2*c+1, scales)
			sumi += int32(sc0)*s0 + int32(sc1)*s1
			summ += int32(m0)*(a.bsums[4*c]+a.bsums[4*c+1]) + int32(m1)*(a.bsums[4*c+2]+a.bsums[4*c+3])
		}
		sum += a.d * (f16At(b[0:])*float32(sumi) - f16At(b[2:])*float32(summ))
	}
	return sum
}

// DotQ5_KQ8_K is DotQ4_KQ8_K for Q5_K weights.
func DotQ5_KQ8_K(w, x []byte, nblocks int) float32 {
	checkDotK("DotQ5_KQ8_K", len(w), q5_KBytes, len(x), nblocks)
	if useAVX2 && nblocks > 0 {
		return dotQ5KRowAVX2(&w[0], &x[0], nblocks)
	}
	return dotQ5_KQ8_KGeneric(w, x, nblocks)
}

func dotQ5_KQ8_KGeneric(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		b := (*[q5_KBytes]byte)(w[i*q5_KBytes:])
		a := loadQ8K((*[q8_KBytes]byte)(x[i*q8_KBytes:]))
		scales := (*[12]byte)(b[4:16])
		qh := (*[32]byte)(b[16:48])
		var sumi, summ int32
		for c := 0; c < 4; c++ {
			qs := (*[32]byte)(b[48+32*c:])
			lo := (*[32]byte)(a.qs[64*c:])
			hi := (*[32]byte)(a.qs[64*c+32:])
			s0b, s1b := uint(2*c), uint(2*c+1)
			var s0, s1 int32
			for l, q := range qs {
				h := qh[l]
				s0 += int32(q&0xf|(h>>s0b&1)<<4) * int32(int8(lo[l]))
				s1 += int32(q>>4|(h>>s1b&1)<<4) * int32(int8(hi[l]))
			}
			sc0, m0 := q4KScaleMin(2*c, scales)
			sc1, m1 := q4KScaleMin(2*c+1, scales)
			sumi += int32(sc0)*s0 + int32(sc1)*s1
			summ += int32(m0)*(a.bsums[4*c]+a.bsums[4*c+1]) + int32(m1)*(a.bsums[4*c+2]+a.bsums[4*c+3])
		}
		sum += a.d * (f16At(b[0:])*float32(sumi) - f16At(b[2:])*float32(summ))
	}
	return sum
}

// DotQ6_KQ8_K returns the dot product of nblocks Q6_K super-blocks of w with
// nblocks Q8_K blocks of x. The codes' offset of 32 is taken out once per
// 16 elements through the bsums.
func DotQ6_KQ8_K(w, x []byte, nblocks int) float32 {
	checkDotK("DotQ6_KQ8_K", len(w), q6_KBytes, len(x), nblocks)
	if useAVX2 && nblocks > 0 {
		return dotQ6KRowAVX2(&w[0], &x[0], nblocks)
	}
	return dotQ6_KQ8_KGeneric(w, x, nblocks)
}

func dotQ6_KQ8_KGeneric(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		b := (*[q6_KBytes]byte)(w[i*q6_KBytes:])
		a := loadQ8K((*[q8_KBytes]byte)(x[i*q8_KBytes:]))
		scales := (*[16]byte)(b[192:208])
		var sumi int32
		for h := 0; h < 2; h++ {
			ql0 := (*[32]byte)(b[64*h:])
			ql1 := (*[32]byte)(b[64*h+32:])
			qh := (*[32]byte)(b[128+32*h:])
			x0 := (*[32]byte)(a.qs[128*h:])
			x1 := (*[32]byte)(a.qs[128*h+32:])
			x2 := (*[32]byte)(a.qs[128*h+64:])
			x3 := (*[32]byte)(a.qs[128*h+96:])
			// s[t][half]: the sums of sub-blocks 16·(8h+2t+half).
			var s [4][2]int32
			for l := 0; l < 32; l++ {
				hb := qh[l]
				q0 := int32(ql0[l]&0xf | hb&3<<4)
				q1 := int32(ql1[l]&0xf | hb>>2&3<<4)
				q2 := int32(ql0[l]>>4 | hb>>4&3<<4)
				q3 := int32(ql1[l]>>4 | hb>>6&3<<4)
				k := l >> 4
				s[0][k] += q0 * int32(int8(x0[l]))
				s[1][k] += q1 * int32(int8(x1[l]))
				s[2][k] += q2 * int32(int8(x2[l]))
				s[3][k] += q3 * int32(int8(x3[l]))
			}
			for t := 0; t < 4; t++ {
				for k := 0; k < 2; k++ {
					j := 8*h + 2*t + k
					sumi += int32(int8(scales[j])) * (s[t][k] - 32*a.bsums[j])
				}
			}
		}
		sum += a.d * f16At(b[208:]) * float32(sumi)
	}
	return sum
}

// DotQ3_KQ8_K returns the dot product of nblocks Q3_K super-blocks of w with
// nblocks Q8_K blocks of x.
func DotQ3_KQ8_K(w, x []byte, nblocks int) float32 {
	checkDotK("DotQ3_KQ8_K", len(w), q3_KBytes, len(x), nblocks)
	if useAVX2 && nblocks > 0 {
		return dotQ3KRowAVX2(&w[0], &x[0], nblocks)
	}
	return dotQ3_KQ8_KGeneric(w, x, nblocks)
}

func dotQ3_KQ8_KGeneric(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		b := (*[q3_KBytes]byte)(w[i*q3_KBytes:])
		a := loadQ8K((*[q8_KBytes]byte)(x[i*q8_KBytes:]))
		hmask := (*[32]byte)(b[0:32])
		scales := q3KScales((*[12]byte)(b[96:108]))
		var sumi int32
		for h := 0; h < 2; h++ {
			qs := (*[32]byte)(b[32+32*h:])
			for t := 0; t < 4; t++ {
				xs := (*[32]byte)(a.qs[128*h+32*t:])
				shift, hbit := uint(2*t), uint(4*h+t)
				// Codes are stored 4 up where the high bit is set: sum
				// q·x with q ∈ 0..7, then take 4·x out of each sub-block.
				var s0, s1 int32
				for l := 0; l < 16; l++ {
					s0 += int32(qs[l]>>shift&3|hmask[l]>>hbit&1<<2) * int32(int8(xs[l]))
					s1 += int32(qs[16+l]>>shift&3|hmask[16+l]>>hbit&1<<2) * int32(int8(xs[16+l]))
				}
				j := 8*h + 2*t
				sumi += (scales[j]-32)*(s0-4*a.bsums[j]) + (scales[j+1]-32)*(s1-4*a.bsums[j+1])
			}
		}
		sum += a.d * f16At(b[108:]) * float32(sumi)
	}
	return sum
}

// DotQ2_KQ8_K returns the dot product of nblocks Q2_K super-blocks of w with
// nblocks Q8_K blocks of x.
func DotQ2_KQ8_K(w, x []byte, nblocks int) float32 {
	checkDotK("DotQ2_KQ8_K", len(w), q2_KBytes, len(x), nblocks)
	if useAVX2 && nblocks > 0 {
		return dotQ2KRowAVX2(&w[0], &x[0], nblocks)
	}
	return dotQ2_KQ8_KGeneric(w, x, nblocks)
}

func dotQ2_KQ8_KGeneric(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		b := (*[q2_KBytes]byte)(w[i*q2_KBytes:])
		a := loadQ8K((*[q8_KBytes]byte)(x[i*q8_KBytes:]))
		scales := (*[16]byte)(b[0:16])
		var sumi, summ int32
		for h := 0; h < 2; h++ {
			qs := (*[32]byte)(b[16+32*h:])
			for t := 0; t < 4; t++ {
				xs := (*[32]byte)(a.qs[128*h+32*t:])
				shift := uint(2 * t)
				var s0, s1 int32
				for l := 0; l < 16; l++ {
					s0 += int32(qs[l]>>shift&3) * int32(int8(xs[l]))
					s1 += int32(qs[16+l]>>shift&3) * int32(int8(xs[16+l]))
				}
				j := 8*h + 2*t
				sumi += int32(scales[j]&0xf)*s0 + int32(scales[j+1]&0xf)*s1
			}
		}
		for j, sc := range scales {
			summ += int32(sc>>4) * a.bsums[j]
		}
		sum += a.d * (f16At(b[80:])*float32(sumi) - f16At(b[82:])*float32(summ))
	}
	return sum
}

// KDot returns the Q8_K dot product kernel for weights of type t, or nil
// when t has none: the K-quants and IQ4_XS have one.
func KDot(t Type) func(w, x []byte, nblocks int) float32 {
	switch t {
	case Q2_K:
		return DotQ2_KQ8_K
	case Q3_K:
		return DotQ3_KQ8_K
	case Q4_K:
		return DotQ4_KQ8_K
	case Q5_K:
		return DotQ5_KQ8_K
	case Q6_K:
		return DotQ6_KQ8_K
	case IQ4_XS:
		return DotIQ4_XSQ8_K
	}
	return nil
}

// MatMulKQ8_K sets out[t*outStride+r] to the dot product of row r of w, of
// type typ (a K-quant or IQ4_XS: KDot(typ) is not nil), with token t of x,
// for r < rows and t < tokens. w holds rows rows of nblocks super-blocks
// back to back, x holds tokens rows of nblocks Q8_K blocks back to back. With one token it is the decode-time
// matrix–vector product. Each weight row's scales are unpacked once for all
// the tokens, and the row stays in L1 across them. Out cells other than
// those it sets are left untouched, so to split the work across threads
// give each a range of rows: w[r0*rowBytes:], rows r1−r0, out[r0:].
// Results equal KDot(typ) row by row up to float32 summation order.
func MatMulKQ8_K(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	dot := KDot(typ)
	if dot == nil {
		panic(fmt.Sprintf("quant: MatMulKQ8_K: %v has no Q8_K kernel", typ))
	}
	bs := typ.BlockBytes()
	if nblocks < 0 || rows < 0 || tokens < 0 {
		panic(fmt.Sprintf("quant: MatMulKQ8_K: negative size (%d blocks, %d rows, %d tokens)", nblocks, rows, tokens))
	}
	if rows == 0 || tokens == 0 {
		return
	}
	if tokens > 1 && outStride < rows {
		panic(fmt.Sprintf("quant: MatMulKQ8_K: output stride %d is less than %d rows", outStride, rows))
	}
	if len(w) < rows*nblocks*bs {
		panic(fmt.Sprintf("quant: MatMulKQ8_K: weights have %d bytes, %d rows of %d blocks need %d", len(w), rows, nblocks, rows*nblocks*bs))
	}
	if len(x) < tokens*nblocks*q8_KBytes {
		panic(fmt.Sprintf("quant: MatMulKQ8_K: activations have %d bytes, %d tokens of %d blocks need %d", len(x), tokens, nblocks, tokens*nblocks*q8_KBytes))
	}
	if need := (tokens-1)*outStride + rows; len(out) < need {
		panic(fmt.Sprintf("quant: MatMulKQ8_K: output has %d floats, %d tokens at stride %d need %d", len(out), tokens, outStride, need))
	}
	if nblocks == 0 {
		for t := 0; t < tokens; t++ {
			clear(out[t*outStride : t*outStride+rows])
		}
		return
	}
	// The tiled kernels address the rows of a group with 32-bit offsets.
	if useVNNI && tokens > 1 && int64(nblocks)*int64(bs)*16 <= math.MaxInt32 {
		matMulKVNNI(typ, w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	if useAVX2 && typ != IQ4_XS {
		matMulKAVX2(typ, w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	if useAVX2 && typ == IQ4_XS {
		matMulIQ4_XSAVX2(w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	rb, xb := nblocks*bs, nblocks*q8_KBytes
	for r := 0; r < rows; r++ {
		for t := 0; t < tokens; t++ {
			out[t*outStride+r] = dot(w[r*rb:(r+1)*rb], x[t*xb:(t+1)*xb], nblocks)
		}
	}
}
