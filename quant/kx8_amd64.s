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

// X8_MUL8 starts the int16 sums, Y4-Y7 of the codes in Y13 with the four
// tokens' activations at a, Y8-Y11 of those in Y12 with theirs at b.
#define X8_MUL8(a, b) \
	VPBROADCASTD a(DI), Y4; \
	VPMADDUBSW Y4, Y13, Y4; \
	VPBROADCASTD a(DI)(R13*1), Y5; \
	VPMADDUBSW Y5, Y13, Y5; \
	VPBROADCASTD a(DI)(R13*2), Y6; \
	VPMADDUBSW Y6, Y13, Y6; \
	VPBROADCASTD a(DI)(R14*1), Y7; \
	VPMADDUBSW Y7, Y13, Y7; \
	VPBROADCASTD b(DI), Y8; \
	VPMADDUBSW Y8, Y12, Y8; \
	VPBROADCASTD b(DI)(R13*1), Y9; \
	VPMADDUBSW Y9, Y12, Y9; \
	VPBROADCASTD b(DI)(R13*2), Y10; \
	VPMADDUBSW Y10, Y12, Y10; \
	VPBROADCASTD b(DI)(R14*1), Y11; \
	VPMADDUBSW Y11, Y12, Y11

// X8_ADD8 is X8_MUL8 adding to the int16 sums.
#define X8_ADD8(a, b) \
	X8_TOK(a, (DI), Y13, Y4); \
	X8_TOK(a, (DI)(R13*1), Y13, Y5); \
	X8_TOK(a, (DI)(R13*2), Y13, Y6); \
	X8_TOK(a, (DI)(R14*1), Y13, Y7); \
	X8_TOK(b, (DI), Y12, Y8); \
	X8_TOK(b, (DI)(R13*1), Y12, Y9); \
	X8_TOK(b, (DI)(R13*2), Y12, Y10); \
	X8_TOK(b, (DI)(R14*1), Y12, Y11)

// X8_SCALE scales the int16 sums by the rows' scales at a(SI) (Y4-Y7) and
// b(SI) (Y8-Y11) and adds them to the tokens' int32 sums.
#define X8_SCALE(a, b) \
	VPMADDWD a(SI), Y4, Y4; \
	VPADDD Y4, Y0, Y0; \
	VPMADDWD a(SI), Y5, Y5; \
	VPADDD Y5, Y1, Y1; \
	VPMADDWD a(SI), Y6, Y6; \
	VPADDD Y6, Y2, Y2; \
	VPMADDWD a(SI), Y7, Y7; \
	VPADDD Y7, Y3, Y3; \
	VPMADDWD b(SI), Y8, Y8; \
	VPADDD Y8, Y0, Y0; \
	VPMADDWD b(SI), Y9, Y9; \
	VPADDD Y9, Y1, Y1; \
	VPMADDWD b(SI), Y10, Y10; \
	VPADDD Y10, Y2, Y2; \
	VPMADDWD b(SI), Y11, Y11; \
	VPADDD Y11, Y3, Y3

// X8_K0 and X8_K start and add to the int16 sums of Q4_K's chunk c (of
// sub-blocks 2c and 2c+1) with its word group k.
#define X8_K0(c) \
	X8_CODES(c, 0); \
	X8_MUL8((4+64*c), (36+64*c))

#define X8_K(c, k) \
	X8_CODES(c, k); \
	X8_ADD8((4+64*c+4*k), (36+64*c+4*k))

#define X8_CHUNK(c) \
	X8_K0(c); \
	X8_K(c, 1); \
	X8_K(c, 2); \
	X8_K(c, 3); \
	X8_K(c, 4); \
	X8_K(c, 5); \
	X8_K(c, 6); \
	X8_K(c, 7); \
	X8_SCALE((64+64*c), (96+64*c))

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
	X8_STORE(x, iacc, o)

// X8_STORE adds x.d·sum, the token's eight row sums in sum, to the eight
// floats at o. Clobbers Y12, Y13.
#define X8_STORE(x, sum, o) \
	VBROADCASTSS x, Y13; \
	VMOVUPS o, Y12; \
	VFMADD231PS Y13, sum, Y12; \
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

// The Q6_K tile (q6KX8Tile4AVX2) is Q4_K's on rows packed by packQ6KX8,
// its codes a byte each: chunk c is sub-blocks 2c and 2c+1, whose two
// words at a time (Y13 and Y12) are summed as int16 and scaled, at most
// 2·2·63·128 = 32,256 before the scale.
#define Q6X8_HALF(c, q) \
	VMOVDQU (800+256*c+64*q)(SI), Y13; \
	VMOVDQU (928+256*c+64*q)(SI), Y12; \
	X8_MUL8((4+32*c+8*q), (20+32*c+8*q)); \
	VMOVDQU (832+256*c+64*q)(SI), Y13; \
	VMOVDQU (960+256*c+64*q)(SI), Y12; \
	X8_ADD8((8+32*c+8*q), (24+32*c+8*q)); \
	X8_SCALE((32+64*c), (64+64*c))

#define Q6X8_CHUNK(c) \
	Q6X8_HALF(c, 0); \
	Q6X8_HALF(c, 1)

// Q6X8_OFF is Σ_j 32·sc_j·bsums_j, the codes' offset of 32 times the
// activations of the Q8_K block at x, for the eight rows in Y14: a
// VPMADDWD a pair of sub-blocks against the packed offs. Clobbers Y12.
#define Q6X8_OFF_PAIR(i, x) \
	VPBROADCASTD (260+4*i)x, Y12; \
	VPMADDWD (544+32*i)(SI), Y12, Y12; \
	VPADDD Y12, Y14, Y14

#define Q6X8_OFF(x) \
	VPBROADCASTD 260 x, Y12; \
	VPMADDWD 544(SI), Y12, Y14; \
	Q6X8_OFF_PAIR(1, x); \
	Q6X8_OFF_PAIR(2, x); \
	Q6X8_OFF_PAIR(3, x); \
	Q6X8_OFF_PAIR(4, x); \
	Q6X8_OFF_PAIR(5, x); \
	Q6X8_OFF_PAIR(6, x); \
	Q6X8_OFF_PAIR(7, x)

// Q6X8_FINISH adds x.d·d·(iacc − offset) to the eight floats at o.
// Clobbers iacc, Y12-Y14.
#define Q6X8_FINISH(x, iacc, o) \
	Q6X8_OFF(x); \
	VPSUBD Y14, iacc, iacc; \
	VCVTDQ2PS iacc, iacc; \
	VMULPS (SI), iacc, iacc; \
	X8_STORE(x, iacc, o)

// func q6KX8Tile4AVX2(w, x *byte, xstride, nblocks int, out *float32, ostride int)
TEXT ·q6KX8Tile4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xstride+16(FP), R13
	LEAQ (R13)(R13*2), R14
	MOVQ nblocks+24(FP), CX
	MOVQ out+32(FP), R8
	MOVQ ostride+40(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	TESTQ CX, CX
	JLE q6done
q6loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	Q6X8_CHUNK(0)
	Q6X8_CHUNK(1)
	Q6X8_CHUNK(2)
	Q6X8_CHUNK(3)
	Q6X8_CHUNK(4)
	Q6X8_CHUNK(5)
	Q6X8_CHUNK(6)
	Q6X8_CHUNK(7)
	Q6X8_FINISH((DI), Y0, (R8))
	Q6X8_FINISH((DI)(R13*1), Y1, (R8)(R9*1))
	Q6X8_FINISH((DI)(R13*2), Y2, (R8)(R9*2))
	Q6X8_FINISH((DI)(R14*1), Y3, (R8)(R10*1))
	ADDQ $2848, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q6loop
q6done:
	VZEROUPPER
	RET

// The Q6_K codes of 32 elements of a row at ql(row) and qh(row), a byte
// each, in y, with Y15 bytes 0x0f and Y14 bytes 0x30: Q6X8_LO the low
// nibbles and bit pair sh/2 of qh (left shift sh: 4 or 2), Q6X8_HI2 the
// high nibbles and bit pair 2 (sh unused), Q6X8_HI3 the high nibbles and
// bit pair 3 (right shift sh: 2).
// Clobbers Y8.
#define Q6X8_LO(ql, qh, sh, row, y) \
	VMOVDQU qh row, Y8; \
	VPSLLW $sh, Y8, Y8; \
	VPAND Y14, Y8, Y8; \
	VPAND ql row, Y15, y; \
	VPOR Y8, y, y

#define Q6X8_HI2(ql, qh, sh, row, y) \
	VMOVDQU ql row, y; \
	VPSRLW $4, y, y; \
	VPAND Y15, y, y; \
	VPAND qh row, Y14, Y8; \
	VPOR Y8, y, y

#define Q6X8_HI3(ql, qh, sh, row, y) \
	VMOVDQU ql row, y; \
	VPSRLW $4, y, y; \
	VPAND Y15, y, y; \
	VMOVDQU qh row, Y8; \
	VPSRLW $sh, Y8, Y8; \
	VPAND Y14, Y8, Y8; \
	VPOR Y8, y, y

// Q6X8_MASKS sets Y15 and Y14, which X8_TRANSPOSE clobbers.
#define Q6X8_MASKS \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	VMOVD DX, X14; \
	VPBROADCASTD X14, Y14

// Q6X8_ROWS8 decodes the chunk by D (Q6X8_LO, Q6X8_HI2 or Q6X8_HI3) for
// the eight rows into Y0-Y7 and stores its transpose at off(DI).
#define Q6X8_ROWS8(D, ql, qh, sh, off) \
	Q6X8_MASKS; \
	D(ql, qh, sh, (SI), Y0); \
	D(ql, qh, sh, (SI)(R8*1), Y1); \
	D(ql, qh, sh, (SI)(R8*2), Y2); \
	D(ql, qh, sh, (SI)(R9*1), Y3); \
	D(ql, qh, sh, (R11), Y4); \
	D(ql, qh, sh, (R11)(R8*1), Y5); \
	D(ql, qh, sh, (R11)(R8*2), Y6); \
	D(ql, qh, sh, (R11)(R9*1), Y7); \
	X8_TRANSPOSE(off)

// func packQ6KX8Codes(dst, w *byte, rb, nb int)
//
// The codes of packQ6KX8: chunk c = 4h+k (elements 32c..32c+31) of each
// of the eight rows at w, rb bytes apart, from ql's bytes 64h+32(k&1) on
// (low nibbles for k < 2) and qh's bits 2k, 2k+1 from 32h on, to dst's
// 800+256c, for nb super-blocks.
TEXT ·packQ6KX8Codes(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), R8
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R11
	MOVQ nb+24(FP), CX
	MOVL $0x0f0f0f0f, AX
	MOVL $0x30303030, DX
	TESTQ CX, CX
	JLE q6pdone
q6ploop:
	Q6X8_ROWS8(Q6X8_LO, (0), (128), 4, 800)
	Q6X8_ROWS8(Q6X8_LO, (32), (128), 2, 1056)
	Q6X8_ROWS8(Q6X8_HI2, (0), (128), 0, 1312)
	Q6X8_ROWS8(Q6X8_HI3, (32), (128), 2, 1568)
	Q6X8_ROWS8(Q6X8_LO, (64), (160), 4, 1824)
	Q6X8_ROWS8(Q6X8_LO, (96), (160), 2, 2080)
	Q6X8_ROWS8(Q6X8_HI2, (64), (160), 0, 2336)
	Q6X8_ROWS8(Q6X8_HI3, (96), (160), 2, 2592)
	ADDQ $210, SI
	ADDQ $210, R11
	ADDQ $2848, DI
	DECQ CX
	JNZ q6ploop
q6pdone:
	VZEROUPPER
	RET
