package quant

import (
	"encoding/binary"
	"math"
)

// Without VNNI a Q4_K batch product spends most of its instructions
// applying scales, one VPMADDWD and VPADDD for each VPMADDUBSW, and on the
// per-row sums and scale unpacking of dotQ4KRow4AVX2. Interleaving eight
// rows' codes, four bytes a row, puts the rows in the lanes of a register,
// so a sub-block's products add up as int16 and take the scale once
// (q4KX8Tile4AVX2). The batch packs its rows itself, a few super-blocks at
// a time into a buffer on the stack: the weights keep their GGUF layout for
// every other product (decode, the other kernels), and the packing, done
// once for all the batch's tokens, is under a tenth of the product at the
// CPU backend's 128-token batches.

// q4KX8Bytes is one super-block of eight Q4_K rows as packQ4KX8 lays it
// out:
//
//	0     d     [8]float32
//	32    dmin  [8]float32
//	64    scales [8][8][2]int16: sub-block j, row r, the scale twice
//	320   mins  [4][8][2]int16: pair i, row r, the mins of sub-blocks 2i, 2i+1
//	448   qs    [32][8][4]byte: word i (bytes 4i..4i+3 of qs), row r
const q4KX8Bytes = 448 + 1024

const (
	// q4KX8Groups and q4KX8Blocks are the groups of eight rows and the
	// super-blocks packed at a time: 23.5 KB that stay in L1 while every
	// four tokens' activations for those blocks (4.7 KB) pass over them.
	q4KX8Groups = 4
	q4KX8Blocks = 4
)

// packQ4KX8 writes nb super-blocks of the eight Q4_K rows at w, rb bytes
// apart, to dst in q4KX8Bytes's layout; the codes' transpose is assembly
// (packQ4KX8Codes), which a word at a time in Go was a sixth of a
// 128-token product.
func packQ4KX8(dst, w []byte, rb, nb int) {
	_, _ = dst[nb*q4KX8Bytes-1], w[7*rb+nb*144-1]
	packQ4KX8Codes(&dst[0], &w[0], rb, nb)
	for b := range nb {
		p := (*[q4KX8Bytes]byte)(dst[b*q4KX8Bytes:])
		for r := range 8 {
			blk := (*[144]byte)(w[r*rb+b*144:])
			binary.LittleEndian.PutUint32(p[4*r:], math.Float32bits(f16At(blk[0:])))
			binary.LittleEndian.PutUint32(p[32+4*r:], math.Float32bits(f16At(blk[2:])))
			// The eight 6-bit scales and mins a byte each, as
			// q4KScaleMin unpacks them, four at a time.
			a := binary.LittleEndian.Uint32(blk[4:])
			m := binary.LittleEndian.Uint32(blk[8:])
			c := binary.LittleEndian.Uint32(blk[12:])
			sc := uint64(a&0x3f3f3f3f) | uint64(c&0x0f0f0f0f|(a>>6&0x03030303)<<4)<<32
			mn := uint64(m&0x3f3f3f3f) | uint64(c>>4&0x0f0f0f0f|(m>>6&0x03030303)<<4)<<32
			for j := range 8 {
				binary.LittleEndian.PutUint32(p[64+32*j+4*r:], uint32(sc>>(8*j)&0xff)*0x10001)
			}
			for i := range 4 {
				binary.LittleEndian.PutUint32(p[320+32*i+4*r:], uint32(mn>>(16*i)&0xff)|uint32(mn>>(16*i+8)&0xff)<<16)
			}
		}
	}
}

// Q6_K's codes are 6 bits, 0..63 with the offset of 32 taken out at the
// end through the activations' bsums, as dotQ6KRow4AVX2 does; the packing
// decodes them to a byte each, so that the tile multiplies them as they
// come. Two VPMADDUBSW products are at most 2·2·63·128 = 32,256, but four,
// a 16-code sub-block, would overflow int16: the scale takes every two
// words (q6KX8Tile4AVX2), twice a sub-block, still once for eight rows.

// q6KX8Bytes is one super-block of eight Q6_K rows as packQ6KX8 lays it
// out:
//
//	0     d      [8]float32
//	32    scales [16][8][2]int16: sub-block j, row r, the scale twice
//	544   offs   [8][8][2]int16: pair i, row r, 32 times the scales of
//	             sub-blocks 2i and 2i+1, for the offset
//	800   qs     [64][8][4]byte: word i (codes 4i..4i+3), row r
const q6KX8Bytes = 800 + 2048

// q6KX8Blocks is the Q6_K super-blocks packed at a time: four groups of
// eight rows in 22.8 KB, in L1 like Q4_K's.
const q6KX8Blocks = 2

// packQ6KX8 is packQ4KX8 for Q6_K in q6KX8Bytes's layout, the codes
// decoded and transposed by packQ6KX8Codes.
func packQ6KX8(dst, w []byte, rb, nb int) {
	_, _ = dst[nb*q6KX8Bytes-1], w[7*rb+nb*210-1]
	packQ6KX8Codes(&dst[0], &w[0], rb, nb)
	for b := range nb {
		p := (*[q6KX8Bytes]byte)(dst[b*q6KX8Bytes:])
		for r := range 8 {
			blk := (*[210]byte)(w[r*rb+b*210:])
			binary.LittleEndian.PutUint32(p[4*r:], math.Float32bits(f16At(blk[208:])))
			for j := range 16 {
				s := uint32(int8(blk[192+j])) & 0xffff
				binary.LittleEndian.PutUint32(p[32+32*j+4*r:], s*0x10001)
			}
			for i := range 8 {
				lo := uint32(32*int32(int8(blk[192+2*i]))) & 0xffff
				hi := uint32(32 * int32(int8(blk[193+2*i])))
				binary.LittleEndian.PutUint32(p[544+32*i+4*r:], lo|hi<<16)
			}
		}
	}
}

// matMulKX8's buffer, sized for Q4_K, holds Q6_K's groups.
const _ = uint(q4KX8Blocks*q4KX8Bytes - q6KX8Blocks*q6KX8Bytes)

// kX8MinTokens is the batch from which Q4_K and Q6_K rows are packed: at
// 16 tokens the packing cost what Q4_K's tile kernel saved.
const kX8MinTokens = 32

// matMulKX8 is matMulKTiled for Q4_K or Q6_K with kX8MinTokens tokens or
// more: the rows in groups of eight and the tokens in fours by
// q4KX8Tile4AVX2 or q6KX8Tile4AVX2, the rows and tokens left over by
// matMulKTiled.
func matMulKX8(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	bb, pb, blocks := typ.BlockBytes(), q4KX8Bytes, q4KX8Blocks
	if typ == Q6_K {
		pb, blocks = q6KX8Bytes, q6KX8Blocks
	}
	rb, xb := nblocks*bb, nblocks*q8_KBytes
	rows8, tokens4 := rows&^7, tokens&^3
	var buf [q4KX8Groups * q4KX8Blocks * q4KX8Bytes]byte // Q6_K's groups fit too
	for r0 := 0; r0 < rows8; r0 += 8 * q4KX8Groups {
		groups := min(q4KX8Groups, (rows8-r0)/8)
		for t := 0; t < tokens4; t++ {
			clear(out[t*outStride+r0 : t*outStride+r0+8*groups])
		}
		for b0 := 0; b0 < nblocks; b0 += blocks {
			nb := min(blocks, nblocks-b0)
			for g := range groups {
				if typ == Q6_K {
					packQ6KX8(buf[g*blocks*pb:], w[(r0+8*g)*rb+b0*bb:], rb, nb)
				} else {
					packQ4KX8(buf[g*blocks*pb:], w[(r0+8*g)*rb+b0*bb:], rb, nb)
				}
			}
			for t := 0; t < tokens4; t += 4 {
				for g := range groups {
					p, xt, o := &buf[g*blocks*pb], &x[t*xb+b0*q8_KBytes], &out[t*outStride+r0+8*g]
					if typ == Q6_K {
						q6KX8Tile4AVX2(p, xt, xb, nb, o, outStride)
					} else {
						q4KX8Tile4AVX2(p, xt, xb, nb, o, outStride)
					}
				}
			}
		}
	}
	if rows8 < rows {
		matMulKTiled(typ, w[rows8*rb:], nblocks, rows-rows8, x, tokens, out[rows8:], outStride)
	}
	if tokens4 < tokens && rows8 > 0 {
		matMulKTiled(typ, w, nblocks, rows8, x[tokens4*xb:], tokens-tokens4, out[tokens4*outStride:], outStride)
	}
}
