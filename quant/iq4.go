package quant

import (
	"encoding/binary"
	"math"
)

// IQ4_NL block (18 bytes, 32 elements):
//
//	d  fp16      scale
//	qs [16]byte  4-bit indices: element j in the low nibble of qs[j],
//	             element j+16 in the high nibble
//
// value = d × iq4nlValues[index]: the codes index a fixed non-linear table
// rather than standing for themselves.
//
// IQ4_XS super-block (136 bytes, 256 elements):
//
//	d        fp16      super-block scale
//	scalesH  uint16    high 2 bits of the 8 sub-block scales, 2 per sub-block
//	scalesL  [4]byte   low 4 bits of the sub-block scales, 2 per byte
//	qs       [128]byte 8 sub-blocks of 32, each laid out as an IQ4_NL qs
//
// Sub-block ib has the 6-bit scale ls = scalesL[ib/2]>>(4·(ib%2))&0xf |
// (scalesH>>(2·ib)&3)<<4 and value = d × (ls−32) × iq4nlValues[index].
//
// IQ4_NL weights multiply Q8_0 activations and IQ4_XS weights Q8_K
// activations, the vec_dot_types llama.cpp pairs them with. On amd64 with
// AVX2 the dot products are iq4_amd64.s (VPSHUFB does the table lookup);
// elsewhere, or with the purego tag, the Go code here.

const (
	iq4_NLBytes = 18
	iq4_XSBytes = 136
)

// iq4nlValues is ggml's kvalues_iq4nl.
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func dequantIQ4_NL(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[iq4_NLBytes]byte)(src[i*iq4_NLBytes:])
		iq4Dequant32(f16At(b[0:]), (*[16]byte)(b[2:]), (*[32]float32)(dst[i*32:]))
	}
}

func dequantIQ4_XS(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[iq4_XSBytes]byte)(src[i*iq4_XSBytes:])
		d := f16At(b[0:])
		for ib := 0; ib < 8; ib++ {
			dl := d * float32(iq4XSScale(b, ib)-32)
			iq4Dequant32(dl, (*[16]byte)(b[8+16*ib:]), (*[32]float32)(dst[i*QK_K+32*ib:]))
		}
	}
}

func iq4Dequant32(d float32, qs *[16]byte, y *[32]float32) {
	for j, q := range qs {
		y[j] = d * float32(iq4nlValues[q&0xf])
		y[j+16] = d * float32(iq4nlValues[q>>4])
	}
}

// iq4XSScale returns the 6-bit scale of sub-block ib, in [0, 63].
func iq4XSScale(b *[iq4_XSBytes]byte, ib int) int32 {
	h := binary.LittleEndian.Uint16(b[2:])
	return int32(b[4+ib/2]>>(4*(ib%2))&0xf) | int32(h>>(2*ib)&3)<<4
}

// iq4Dot32 is the integer dot product of one block's 32 indices, looked up
// in the table, with 32 int8 activations.
func iq4Dot32(qs *[16]byte, xs *[32]byte) int32 {
	var s int32
	for j, q := range qs {
		s += int32(iq4nlValues[q&0xf])*int32(int8(xs[j])) + int32(iq4nlValues[q>>4])*int32(int8(xs[j+16]))
	}
	return s
}

// DotIQ4_NLQ8_0 returns the dot product of nblocks IQ4_NL blocks of w with
// nblocks Q8_0 blocks of x (32·nblocks elements each).
func DotIQ4_NLQ8_0(w, x []byte, nblocks int) float32 {
	checkDot("DotIQ4_NLQ8_0", len(w), iq4_NLBytes, len(x), nblocks)
	if useAVX2 && nblocks > 0 {
		return dotIQ4_NLQ8_0AVX2(&w[0], &x[0], nblocks)
	}
	return dotIQ4_NLQ8_0Generic(w, x, nblocks)
}

func dotIQ4_NLQ8_0Generic(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		wb := (*[iq4_NLBytes]byte)(w[i*iq4_NLBytes:])
		xb := (*[q8_0Bytes]byte)(x[i*q8_0Bytes:])
		sum += float32(iq4Dot32((*[16]byte)(wb[2:]), (*[32]byte)(xb[2:]))) * (f16At(wb[0:]) * f16At(xb[0:]))
	}
	return sum
}

// DotIQ4_XSQ8_K returns the dot product of nblocks IQ4_XS super-blocks of w
// with nblocks Q8_K blocks of x (256·nblocks elements each).
func DotIQ4_XSQ8_K(w, x []byte, nblocks int) float32 {
	checkDotK("DotIQ4_XSQ8_K", len(w), iq4_XSBytes, len(x), nblocks)
	if useAVX2 && nblocks > 0 {
		return dotIQ4_XSQ8_KAVX2(&w[0], &x[0], nblocks)
	}
	return dotIQ4_XSQ8_KGeneric(w, x, nblocks)
}

func dotIQ4_XSQ8_KGeneric(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		b := (*[iq4_XSBytes]byte)(w[i*iq4_XSBytes:])
		xb := (*[q8_KBytes]byte)(x[i*q8_KBytes:])
		var sumi int32
		for ib := 0; ib < 8; ib++ {
			s := iq4Dot32((*[16]byte)(b[8+16*ib:]), (*[32]byte)(xb[4+32*ib:]))
			sumi += (iq4XSScale(b, ib) - 32) * s
		}
		xd := math.Float32frombits(binary.LittleEndian.Uint32(xb[0:]))
		sum += xd * f16At(b[0:]) * float32(sumi)
	}
	return sum
}

// The IQ4 encoders are not llama.cpp's: they pick each sub-block's scale
// from its largest-magnitude element (mapped to −127, the table's end) and
// each index as the nearest table value, without ggml's search over scales
// and importance weights. They serve tests and synthetic models; the
// decoders and dot products read llama.cpp's files exactly.

func quantIQ4_NL(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := (*[32]float32)(src[i*32:])
		b := (*[iq4_NLBytes]byte)(dst[i*iq4_NLBytes:])
		d := iq4BlockScale(x)
		putF16(b[0:], d)
		iq4Encode32(x, f16At(b[0:]), (*[16]byte)(b[2:]))
	}
}

func quantIQ4_XS(src []float32, dst []byte) {
	for i := 0; i < len(src)/QK_K; i++ {
		b := (*[iq4_XSBytes]byte)(dst[i*iq4_XSBytes:])
		var dls [8]float32
		for ib := range dls {
			dls[ib] = iq4BlockScale((*[32]float32)(src[i*QK_K+32*ib:]))
		}
		// The largest sub-block scale becomes ls−32 = −32.
		putF16(b[0:], largest(dls[:])/-32)
		d := f16At(b[0:])
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var h uint16
		clear(b[4:8])
		for ib, dl := range dls {
			l := int32(math.Round(float64(dl*id))) + 32
			l = min(max32(l, 0), 63)
			b[4+ib/2] |= byte(l&0xf) << (4 * (ib % 2))
			h |= uint16(l>>4) << (2 * ib)
			iq4Encode32((*[32]float32)(src[i*QK_K+32*ib:]), d*float32(l-32), (*[16]byte)(b[8+16*ib:]))
		}
		binary.LittleEndian.PutUint16(b[2:], h)
	}
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// iq4BlockScale returns the scale d for which d·table[nearest index]
// reproduces x with the least x²-weighted squared error (large values
// count most), among the scales that map x's element of largest magnitude
// near the table's ends: to 127 (past its top, 113), and to −127+i for i
// in −7…7, each refit by least squares to the indices it gives, as
// llama-quantize searches.
func iq4BlockScale(x *[32]float32) float32 {
	max := largest(x[:])
	if !scalable(max) {
		return max / -127
	}
	// fit is Σ w·q·x and Σ w·q² for the indices nearest id·x.
	fit := func(id float32) (sqx, sq2 float32) {
		for _, v := range x {
			q := float32(iq4nlValues[iq4Nearest(id*v)])
			w := v * v
			sqx += w * q * v
			sq2 += w * q * q
		}
		return sqx, sq2
	}
	var d, best float32
	if sqx, sq2 := fit(127 / max); sq2 > 0 {
		d = sqx / sq2
		best = d * sqx
	}
	for i := -7; i <= 7; i++ {
		// With the least-squares d = sqx/sq2 the error is Σwx² − sqx²/sq2.
		if sqx, sq2 := fit((float32(i) - 127) / max); sq2 > 0 && sqx*sqx > best*sq2 {
			d = sqx / sq2
			best = d * sqx
		}
	}
	if d == 0 {
		return max / -127
	}
	return d
}

// iq4Encode32 stores in qs the index of the table value nearest x/d for
// each of the 32 elements.
func iq4Encode32(x *[32]float32, d float32, qs *[16]byte) {
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j := 0; j < 16; j++ {
		qs[j] = iq4Nearest(x[j]*id) | iq4Nearest(x[j+16]*id)<<4
	}
}

func iq4Nearest(v float32) byte {
	best, bestErr := byte(0), float32(math.Inf(1))
	for k, t := range iq4nlValues {
		if e := abs32(v - float32(t)); e < bestErr {
			best, bestErr = byte(k), e
		}
	}
	return best
}

// IQ4NLValues returns the 16 values a 4-bit IQ4_NL or IQ4_XS code stands
// for (ggml's kvalues_iq4nl), for backends that decode the codes themselves.
func IQ4NLValues() [16]int8 { return iq4nlValues }
