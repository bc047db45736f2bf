package quant

import "math"

// F16ToF32 converts an IEEE 754 binary16 value to float32. The conversion is
// exact; NaN payloads are kept.
func F16ToF32(h uint16) float32 {
	// Exponent and mantissa shifted into place and the exponent rebiased
	// from 15 to 127: exact for normal numbers, by far the common case.
	// Exponent 31 (infinities, NaNs) rebiases once more to 255; exponent
	// 0 (zeros, subnormals) is man × 2^-24, which the float subtraction
	// below gives exactly. No calls, so that it inlines into the loops.
	o := uint32(h&0x7fff)<<13 + 112<<23
	switch h & 0x7c00 {
	case 0x7c00:
		o += 112 << 23
	case 0:
		o = math.Float32bits(math.Float32frombits(o+1<<23) - math.Float32frombits(113<<23))
	}
	return math.Float32frombits(o | uint32(h&0x8000)<<16)
}

// F32ToF16 converts f to IEEE 754 binary16, rounding to nearest with ties to
// even (as F16C's VCVTPS2PH and ggml's GGML_FP32_TO_FP16 do). Values too
// large become ±Inf; NaN becomes the quiet NaN 0x7e00 with f's sign, like
// ggml's portable conversion.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // binary16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		// Normal. A carry out of the mantissa correctly bumps the exponent,
		// and from 0x7bff on to 0x7c00 (Inf).
		h := uint32(e)<<10 | man>>13
		rem := man & 0x1fff
		if rem > 0x1000 || rem == 0x1000 && h&1 != 0 {
			h++
		}
		return sign | uint16(h)
	}
	// Subnormal or zero in binary16: the result is full × 2^(e-14) in units
	// of 2^-24, where full is the mantissa with its implicit bit.
	shift := uint32(14 - e)
	if shift > 24 {
		return sign // below half the smallest subnormal (float32 subnormals too)
	}
	full := man | 0x800000
	h := full >> shift
	rem := full & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && h&1 != 0 {
		h++
	}
	return sign | uint16(h)
}

// BF16ToF32 converts a bfloat16 value to float32 (exact).
func BF16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F32ToBF16 converts f to bfloat16 the way ggml's GGML_FP32_TO_BF16 does:
// round to nearest with ties to even, subnormals kept, and NaN made quiet by
// setting the top mantissa bit while keeping sign and upper payload.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// f16At reads the little-endian binary16 value at b[0:2] as float32.
func f16At(b []byte) float32 {
	return F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
}

// putF16 stores f at b[0:2] as little-endian binary16.
func putF16(b []byte, f float32) {
	h := F32ToF16(f)
	b[0] = byte(h)
	b[1] = byte(h >> 8)
}
