package quant

// Q4_0 block (18 bytes, 32 elements):
//
//	d  fp16      scale
//	qs [16]byte  element j in the low nibble of qs[j], element j+16 in the high nibble
//
// value = (q - 8) × d.
//
// Q4_1 block (20 bytes, 32 elements):
//
//	d, m fp16    scale and offset
//	qs [16]byte  as Q4_0
//
// value = q × d + m.

const (
	q4_0Bytes = 18
	q4_1Bytes = 20
)

func dequantQ4_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[q4_0Bytes]byte)(src[i*q4_0Bytes:])
		y := (*[32]float32)(dst[i*32:])
		d := f16At(b[0:])
		for j := 0; j < 16; j++ {
			y[j] = float32(int32(b[2+j]&0xf)-8) * d
			y[j+16] = float32(int32(b[2+j]>>4)-8) * d
		}
	}
}

func dequantQ4_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[q4_1Bytes]byte)(src[i*q4_1Bytes:])
		y := (*[32]float32)(dst[i*32:])
		d, m := f16At(b[0:]), f16At(b[2:])
		for j := 0; j < 16; j++ {
			// The float32 conversions keep the product rounded on its own, so
			// no platform fuses it into an FMA and results stay identical.
			y[j] = float32(float32(b[4+j]&0xf)*d) + m
			y[j+16] = float32(float32(b[4+j]>>4)*d) + m
		}
	}
}

// quantQ4_0 follows quantize_row_q4_0_ref: the scale maps the element of
// largest magnitude to -8 exactly, and codes are truncated from x/d + 8.5.
func quantQ4_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := (*[32]float32)(src[i*32:])
		b := (*[q4_0Bytes]byte)(dst[i*q4_0Bytes:])
		var amax, max float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax, max = a, v
			}
		}
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		for j := 0; j < 16; j++ {
			lo := truncClamp(float32(x[j]*id)+8.5, 15)
			hi := truncClamp(float32(x[j+16]*id)+8.5, 15)
			b[2+j] = lo | hi<<4
		}
	}
}

// quantQ4_1 follows quantize_row_q4_1_ref: min and max map to codes 0 and 15.
func quantQ4_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := (*[32]float32)(src[i*32:])
		b := (*[q4_1Bytes]byte)(dst[i*q4_1Bytes:])
		min, max := minMax(x[:])
		d := (max - min) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		putF16(b[2:], min)
		for j := 0; j < 16; j++ {
			lo := truncClamp(float32((x[j]-min)*id)+0.5, 15)
			hi := truncClamp(float32((x[j+16]-min)*id)+0.5, 15)
			b[4+j] = lo | hi<<4
		}
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// minMax returns the smallest and largest of x the way the reference
// quantizers scan them (starting from ±FLT_MAX).
func minMax(x []float32) (min, max float32) {
	min, max = 3.4028234663852886e38, -3.4028234663852886e38
	for _, v := range x {
		if v < min {
			min = v
		}
		if v > max {
			max = v
		}
	}
	return min, max
}

// truncClamp converts v to an integer by truncation, as C's (int8_t) cast
// does, and clamps it to [0, hi]. For the finite inputs the reference handles,
// the lower clamp never applies; it keeps NaN and Inf from producing codes
// outside the field.
func truncClamp(v float32, hi int32) byte {
	if !(v >= 0) { // also NaN
		return 0
	}
	if v >= float32(hi) {
		return byte(hi)
	}
	return byte(int32(v))
}
