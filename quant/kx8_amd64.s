//go:build amd64 && !purego

#include "textflag.h"

// The Q4_K product of eight rows by four tokens on rows packed by
// packQ4KX8. A register of codes holds four consecutive codes of one
// sub-block for each of the eight rows, so VPMADDUBSW against one token's
// four activation codes, broadcast, leaves each row's two pair sums in
// int16 lanes 2r and 2r+1. The eight such products of a sub-block (its 32
// codes) are added as int16 (at most 8·2·15·128 = 30,720, no overflow)
// before one VPMADDWD against the rows' scales makes them one int32 lane a
// row: the scale costs an instruction a sub-block, not one a VPMADDUBSW,
// and no lane has to be summed across at the end.
//
// Registers: Y0-Y3 the four tokens' int32 sums of the super-block, Y4-Y7
// and Y8-Y11 their int16 sums of the low and high sub-block of a 64-code
// chunk, Y12 and Y13 the high and low codes, Y14 a temporary, Y15 bytes
// 0x0f. DI, DI+R13, DI+2·R13 and DI+R14 are the tokens' Q8_K blocks, R8,
// R8+R9, R8+2·R9 and R8+R10 their eight outputs.

// X8_TOK adds the products of the codes in wv with the four activations at
// off(x), broadcast, to acc. Clobbers Y14.
#define X8_TOK(off, x, wv, acc) \
	VPBROADCASTD off x, Y14; \
	VPMADDUBSW Y14, wv, Y14; \
	VPADDW Y14, acc, acc

// X8_CODES splits the 32 packed bytes of word group k of chunk c into the
// low (Y13) and high (Y12) codes.
#define X8_CODES(c, k) \
	VMOVDQU (448+256*c+32*k)(SI), Y12; \
	VPAND Y15, Y12, Y13; \
	VPSRLW $4, Y12, Y12; \
	VPAND Y15, Y12, Y12

// X8_K0 starts the int16 sums of chunk c with its first word group.
#define X8_K0(c) \
	X8_CODES(c, 0); \
	VPBROADCASTD (4+64*c)(DI), Y4; \
	VPMADDUBSW Y4, Y13, Y4; \
	VPBROADCASTD (4+64*c)(DI)(R13*1), Y5; \
	VPMADDUBSW Y5, Y13, Y5; \
	VPBROADCASTD (4+64*c)(DI)(R13*2), Y6; \
	VPMADDUBSW Y6, Y13, Y6; \
	VPBROADCASTD (4+64*c)(DI)(R14*1), Y7; \
	VPMADDUBSW Y7, Y13, Y7; \
	VPBROADCASTD (36+64*c)(DI), Y8; \
	VPMADDUBSW Y8, Y12, Y8; \
	VPBROADCASTD (36+64*c)(DI)(R13*1), Y9; \
	VPMADDUBSW Y9, Y12, Y9; \
	VPBROADCASTD (36+64*c)(DI)(R13*2), Y10; \
	VPMADDUBSW Y10, Y12, Y10; \
	VPBROADCASTD (36+64*c)(DI)(R14*1), Y11; \
	VPMADDUBSW Y11, Y12, Y11

// X8_K adds word group k (1..7) of chunk c to the int16 sums.
#define X8_K(c, k) \
	X8_CODES(c, k); \
	X8_TOK((4+64*c+4*k), (DI), Y13, Y4); \
	X8_TOK((4+64*c+4*k), (DI)(R13*1), Y13, Y5); \
	X8_TOK((4+64*c+4*k), (DI)(R13*2), Y13, Y6); \
	X8_TOK((4+64*c+4*k), (DI)(R14*1), Y13, Y7); \
	X8_TOK((36+64*c+4*k), (DI), Y12, Y8); \
	X8_TOK((36+64*c+4*k), (DI)(R13*1), Y12, Y9); \
	X8_TOK((36+64*c+4*k), (DI)(R13*2), Y12, Y10); \
	X8_TOK((36+64*c+4*k), (DI)(R14*1), Y12, Y11)

// X8_SCALE scales the int16 sums of sub-blocks 2c and 2c+1 and adds them
// to the tokens' int32 sums.
#define X8_SCALE(c) \
	VPMADDWD (64+64*c)(SI), Y4, Y4; \
	VPADDD Y4, Y0, Y0; \
	VPMADDWD (64+64*c)(SI), Y5, Y5; \
	VPADDD Y5, Y1, Y1; \
	VPMADDWD (64+64*c)(SI), Y6, Y6; \
	VPADDD Y6, Y2, Y2; \
	VPMADDWD (64+64*c)(SI), Y7, Y7; \
	VPADDD Y7, Y3, Y3; \
	VPMADDWD (96+64*c)(SI), Y8, Y8; \
	VPADDD Y8, Y0, Y0; \
	VPMADDWD (96+64*c)(SI), Y9, Y9; \
	VPADDD Y9, Y1, Y1; \
	VPMADDWD (96+64*c)(SI), Y10, Y10; \
	VPADDD Y10, Y2, Y2; \
	VPMADDWD (96+64*c)(SI), Y11, Y11; \
	VPADDD Y11, Y3, Y3

#define X8_CHUNK(c) \
	X8_K0(c); \
	X8_K(c, 1); \
	X8_K(c, 2); \
	X8_K(c, 3); \
	X8_K(c, 4); \
	X8_K(c, 5); \
	X8_K(c, 6); \
	X8_K(c, 7); \
	X8_SCALE(c)

// X8_FINISH adds x.d·(d·iacc − dmin·Σ_j m_j·S_j) to the eight floats at
// o, for the token whose Q8_K block is at x: S_j, the sum of sub-block j's
// activations, is bsums[2j]+bsums[2j+1], paired (S_2i, S_2i+1) in dword i
// of both lanes of Y12 by VPHADDW to meet the packed mins. Clobbers iacc,
// Y12-Y14.
#define X8_FINISH(x, iacc, o) \
	VBROADCASTI128 260 x, Y12; \
	VBROADCASTI128 276 x, Y13; \
	VPHADDW Y13, Y12, Y12; \
	VPSHUFD $0x00, Y12, Y13; \
	VPMADDWD 320(SI), Y13, Y14; \
	VPSHUFD $0x55, Y12, Y13; \
	VPMADDWD 352(SI), Y13, Y13; \
	VPADDD Y13, Y14, Y14; \
	VPSHUFD $0xaa, Y12, Y13; \
	VPMADDWD 384(SI), Y13, Y13; \
	VPADDD Y13, Y14, Y14; \
	VPSHUFD $0xff, Y12, Y13; \
	VPMADDWD 416(SI), Y13, Y13; \
	VPADDD Y13, Y14, Y14; \
	VCVTDQ2PS Y14, Y14; \
	VCVTDQ2PS iacc, iacc; \
	VMULPS (SI), iacc, iacc; \
	VFNMADD231PS 32(SI), Y14, iacc; \
	VBROADCASTSS x, Y13; \
	VMOVUPS o, Y12; \
	VFMADD231PS Y13, iacc, Y12; \
	VMOVUPS Y12, o

// func q4KX8Tile4AVX2(w, x *byte, xstride, nblocks int, out *float32, ostride int)
TEXT ·q4KX8Tile4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xstride+16(FP), R13
	LEAQ (R13)(R13*2), R14
	MOVQ nblocks+24(FP), CX
	MOVQ out+32(FP), R8
	MOVQ ostride+40(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	TESTQ CX, CX
	JLE done
loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	X8_CHUNK(0)
	X8_CHUNK(1)
	X8_CHUNK(2)
	X8_CHUNK(3)
	X8_FINISH((DI), Y0, (R8))
	X8_FINISH((DI)(R13*1), Y1, (R8)(R9*1))
	X8_FINISH((DI)(R13*2), Y2, (R8)(R9*2))
	X8_FINISH((DI)(R14*1), Y3, (R8)(R10*1))
	ADDQ $1472, SI
	ADDQ $292, DI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// X8_ROWS loads the 32 code bytes at off of the eight rows at SI, SI+R8,
// SI+2·R8, SI+R9, R11, R11+R8, R11+2·R8 and R11+R9 into Y0-Y7.
#define X8_ROWS(off) \
	VMOVDQU off(SI), Y0; \
	VMOVDQU off(SI)(R8*1), Y1; \
	VMOVDQU off(SI)(R8*2), Y2; \
	VMOVDQU off(SI)(R9*1), Y3; \
	VMOVDQU off(R11), Y4; \
	VMOVDQU off(R11)(R8*1), Y5; \
	VMOVDQU off(R11)(R8*2), Y6; \
	VMOVDQU off(R11)(R9*1), Y7

// X8_TRANSPOSE stores the transpose of the 8×8 words in Y0-Y7 (row r in
// Yr) to off(DI): word i of the rows at off+32i. Clobbers Y0-Y15.
#define X8_TRANSPOSE(off) \
	VPUNPCKLDQ Y1, Y0, Y8; \
	VPUNPCKHDQ Y1, Y0, Y9; \
	VPUNPCKLDQ Y3, Y2, Y10; \
	VPUNPCKHDQ Y3, Y2, Y11; \
	VPUNPCKLDQ Y5, Y4, Y12; \
	VPUNPCKHDQ Y5, Y4, Y13; \
	VPUNPCKLDQ Y7, Y6, Y14; \
	VPUNPCKHDQ Y7, Y6, Y15; \
	VPUNPCKLQDQ Y10, Y8, Y0; \
	VPUNPCKHQDQ Y10, Y8, Y1; \
	VPUNPCKLQDQ Y11, Y9, Y2; \
	VPUNPCKHQDQ Y11, Y9, Y3; \
	VPUNPCKLQDQ Y14, Y12, Y4; \
	VPUNPCKHQDQ Y14, Y12, Y5; \
	VPUNPCKLQDQ Y15, Y13, Y6; \
	VPUNPCKHQDQ Y15, Y13, Y7; \
	VPERM2I128 $0x20, Y4, Y0, Y8; \
	VPERM2I128 $0x31, Y4, Y0, Y12; \
	VPERM2I128 $0x20, Y5, Y1, Y9; \
	VPERM2I128 $0x31, Y5, Y1, Y13; \
	VPERM2I128 $0x20, Y6, Y2, Y10; \
	VPERM2I128 $0x31, Y6, Y2, Y14; \
	VPERM2I128 $0x20, Y7, Y3, Y11; \
	VPERM2I128 $0x31, Y7, Y3, Y15; \
	VMOVDQU Y8, off(DI); \
	VMOVDQU Y9, (off+32)(DI); \
	VMOVDQU Y10, (off+64)(DI); \
	VMOVDQU Y11, (off+96)(DI); \
	VMOVDQU Y12, (off+128)(DI); \
	VMOVDQU Y13, (off+160)(DI); \
	VMOVDQU Y14, (off+192)(DI); \
	VMOVDQU Y15, (off+224)(DI)

// func packQ4KX8Codes(dst, w *byte, rb, nb int)
//
// The codes of packQ4KX8: word i of the 128 code bytes of each of the
// eight rows at w, rb bytes apart, to dst's 448+32i, for nb super-blocks.
TEXT ·packQ4KX8Codes(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), R8
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R11
	MOVQ nb+24(FP), CX
	TESTQ CX, CX
	JLE pdone
ploop:
	X8_ROWS(16)
	X8_TRANSPOSE(448)
	X8_ROWS(48)
	X8_TRANSPOSE(704)
	X8_ROWS(80)
	X8_TRANSPOSE(960)
	X8_ROWS(112)
	X8_TRANSPOSE(1216)
	ADDQ $144, SI
	ADDQ $144, R11
	ADDQ $1472, DI
	DECQ CX
	JNZ ploop
pdone:
	VZEROUPPER
	RET
