package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q8_0 block (34 bytes, 32 elements):
//
//	d  fp16      scale
//	qs [32]int8  value = q × d
//
// Q8_K block (292 bytes, 256 elements), the K-quants' activation format:
//
//	d     float32
//	qs    [256]int8    value = q × d
//	bsums [16]int16    sums of each 16 qs (unused when dequantizing)

const (
	q8_0Bytes = 34
	q8_KBytes = 292
)

func dequantQ8_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[q8_0Bytes]byte)(src[i*q8_0Bytes:])
		y := (*[32]float32)(dst[i*32:])
		d := f16At(b[0:])
		for j := range y {
			y[j] = float32(int8(b[2+j])) * d
		}
	}
}

func dequantQ8_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[q8_KBytes]byte)(src[i*q8_KBytes:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := math.Float32frombits(binary.LittleEndian.Uint32(b[0:]))
		for j := range y {
			y[j] = float32(int8(b[4+j])) * d
		}
	}
}

// quantQ8_0 follows quantize_row_q8_0_ref: d = max|x|/127 and codes are
// x/d rounded half away from zero (C's roundf).
func quantQ8_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := (*[32]float32)(src[i*32:])
		b := (*[q8_0Bytes]byte)(dst[i*q8_0Bytes:])
		var amax float32
		for _, v := range x {
			// Written as the reference's MAX(amax, fabsf(v)) so that NaN
			// propagates the same way.
			if a := abs32(v); !(amax > a) {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		for j, v := range x {
			b[2+j] = byte(roundInt8(float32(v * id)))
		}
	}
}

// roundInt8 rounds v half away from zero, like C's roundf, and saturates to
// the int8 range. Truncation followed by a fix-up is exact for every float32:
// v - trunc(v) is computed without rounding error.
func roundInt8(v float32) int8 {
	if !(v > -128.5) { // also NaN
		return -128
	}
	if v >= 127.5 {
		return 127
	}
	r := int32(v)
	f := v - float32(r)
	if f >= 0.5 {
		r++
	} else if f <= -0.5 {
		r--
	}
	return int8(r)
}

// QuantizeQ8_0 quantizes activations x to Q8_0 blocks in dst, bit for bit as
// Quantize(Q8_0, x, dst) does, using AVX2 where available. It is the
// activation side of DotQ4_0Q8_0 and DotQ8_0Q8_0. len(x) must be a multiple
// of 32 and dst must hold len(x)/32 blocks of 34 bytes; it panics otherwise,
// as a programming error. Codes always lie in [-127, 127].
func QuantizeQ8_0(x []float32, dst []byte) {
	if len(x)%32 != 0 {
		panic(fmt.Sprintf("quant: QuantizeQ8_0: %d values is not a multiple of 32", len(x)))
	}
	nb := len(x) / 32
	if len(dst) < nb*q8_0Bytes {
		panic(fmt.Sprintf("quant: QuantizeQ8_0: dst has %d bytes, %d blocks need %d", len(dst), nb, nb*q8_0Bytes))
	}
	if nb == 0 {
		return
	}
	if useAVX2 {
		quantizeQ8_0AVX2(&x[0], &dst[0], nb)
		return
	}
	quantQ8_0(x, dst)
}
