package quant

import (
	"encoding/binary"
	"fmt"
)

// Q5_0ToQ8_0 re-encodes Q5_0 blocks as Q8_0 blocks with the same values
// (the scale, and q − 16 as the int8 code). The CPU engine's batched
// prefill does this for a few rows at a time, so that Q5_0 weights use the
// tiled Q8_0 matrix product, whose sums are those of DotQ5_0Q8_0 up to
// float32 rounding. dst must hold len(src)'s blocks as Q8_0.
func Q5_0ToQ8_0(src, dst []byte) error {
	if len(src)%q5_0Bytes != 0 || len(dst) != len(src)/q5_0Bytes*q8_0Bytes {
		return fmt.Errorf("quant: Q5_0ToQ8_0: %d bytes of Q5_0 into %d bytes of Q8_0", len(src), len(dst))
	}
	for i := 0; i < len(src)/q5_0Bytes; i++ {
		s, d := src[i*q5_0Bytes:(i+1)*q5_0Bytes], dst[i*q8_0Bytes:(i+1)*q8_0Bytes]
		d[0], d[1] = s[0], s[1] // the f16 scale
		qh, qs := binary.LittleEndian.Uint32(s[2:]), s[6:22]
		for j := 0; j < 32; j++ {
			q := int32(qs[j%16]>>(4*(j/16))&15) | int32(qh>>j&1)<<4
			d[2+j] = byte(int8(q - 16))
		}
	}
	return nil
}
