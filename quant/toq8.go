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
		codes5(s[6:22], binary.LittleEndian.Uint32(s[2:]), d[2:34])
		// q − 16 a byte: q & 15 with the sign byte's high bits where q < 16.
		for j := 2; j < 34; j += 8 {
			q := binary.LittleEndian.Uint64(d[j:])
			low := (q >> 4 & bytes01) ^ bytes01 // 1 where q < 16
			binary.LittleEndian.PutUint64(d[j:], q&bytes0F|low*0xF0)
		}
	}
	return nil
}

const (
	bytes01 = 0x0101010101010101
	bytes0F = 0x0F0F0F0F0F0F0F0F
)

// codes4 writes the 32 codes of a block's 16 bytes of nibbles qs (byte j:
// code j low, code j+16 high) to dst, one a byte, eight at a time.
func codes4(qs, dst []byte) {
	a, b := binary.LittleEndian.Uint64(qs), binary.LittleEndian.Uint64(qs[8:])
	binary.LittleEndian.PutUint64(dst, a&bytes0F)
	binary.LittleEndian.PutUint64(dst[8:], b&bytes0F)
	binary.LittleEndian.PutUint64(dst[16:], a>>4&bytes0F)
	binary.LittleEndian.PutUint64(dst[24:], b>>4&bytes0F)
}

// codes5 is codes4 with each code's fifth bit from qh (bit j, code j).
func codes5(qs []byte, qh uint32, dst []byte) {
	codes4(qs, dst)
	for j := 0; j < 32; j += 8 {
		q := binary.LittleEndian.Uint64(dst[j:])
		binary.LittleEndian.PutUint64(dst[j:], q|spreadBits(byte(qh>>j))<<4)
	}
}

// spreadBits puts bit i of b in bit 0 of byte i.
func spreadBits(b byte) uint64 {
	x := uint64(b)
	x = (x | x<<28) & 0x0000000F0000000F
	x = (x | x<<14) & 0x0003000300030003
	return (x | x<<7) & bytes01
}

// MinToQ8_0 re-encodes rows of Q4_1 or Q5_1 blocks (typ), whose values
// are d·q + m, as Q8_0 blocks of d and the codes q, and writes each
// block's min apart, transposed: mins[b*rows+r] is that of block b of row
// r. A block's dot product with a Q8_0 activation block is then the
// re-encoded block's plus m·s, s the activation block's sum
// (Q8_0BlockSums), so a batch's product is the tiled Q8_0 kernel's plus a
// small float product of the mins by the sums: where quant has no tiled
// kernel for these types (no AVX512-VNNI), the CPU engine's prefill takes
// that path. src holds rows rows of whole blocks; dst and mins must hold
// them as Q8_0 blocks and as floats.
func MinToQ8_0(typ Type, src []byte, rows int, dst []byte, mins []float32) error {
	bs := typ.BlockBytes()
	if (typ != Q4_1 && typ != Q5_1) || rows <= 0 || len(src)%(rows*bs) != 0 {
		return fmt.Errorf("quant: MinToQ8_0: %d bytes of %s in %d rows", len(src), typ, rows)
	}
	n := len(src) / bs
	if len(dst) != n*q8_0Bytes || len(mins) != n {
		return fmt.Errorf("quant: MinToQ8_0: %d blocks into %d bytes of Q8_0 and %d mins", n, len(dst), len(mins))
	}
	nb := n / rows
	for i := 0; i < n; i++ {
		s, d := src[i*bs:(i+1)*bs], dst[i*q8_0Bytes:(i+1)*q8_0Bytes]
		d[0], d[1] = s[0], s[1] // the f16 scale
		mins[i%nb*rows+i/nb] = f16At(s[2:])
		if typ == Q4_1 {
			codes4(s[4:20], d[2:34])
		} else {
			codes5(s[8:24], binary.LittleEndian.Uint32(s[4:]), d[2:34])
		}
	}
	return nil
}

// Q8_0BlockSums writes the sum of each Q8_0 block of x, d·Σq, to sums.
func Q8_0BlockSums(x []byte, sums []float32) {
	for i := range sums {
		b := x[i*q8_0Bytes : (i+1)*q8_0Bytes]
		s := int32(0)
		for _, q := range b[2:q8_0Bytes] {
			s += int32(int8(q))
		}
		sums[i] = f16At(b) * float32(s)
	}
}
