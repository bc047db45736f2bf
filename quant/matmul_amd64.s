//go:build amd64 && !purego

#include "textflag.h"

// MatMul kernels: see matmul.go for the scheme. A packed block holds the
// transposed weight codes of a row group, dword k of every row in one
// register (k = 0..7), then the rows' scales as float32:
//
//	VNNI, 16 rows: 8 × 64 bytes of codes (Q4_0 nibbles, Q8_0 codes+128),
//	  64 bytes of scales: 576 bytes.
//	AVX2 Q4_0, 8 rows: 8 × 32 bytes of nibbles, 32 of scales: 288 bytes.
//	AVX2 Q8_0, 8 rows: 8 × 32 bytes of |codes|, 8 × 32 of signed codes
//	  (VPSIGNB moves their signs onto the activations, as VPMADDUBSW wants
//	  an unsigned operand), 32 of scales: 544 bytes.
//
// Packing a full group loads 16 bytes of each row and transposes 4×4
// dwords within 128-bit lanes; a partial group, whose missing rows must not
// be read, gathers instead (VPGATHERDD costs some 35 cycles on Zen 4, and
// gathering every group made packing a fifth of the prefill time).
//
// Q4_0 nibbles need no shuffling: dword k < 4 of the unpacked block is the
// low nibbles of packed dword k, dword k+4 its high nibbles.

DATA rowIota<>+0x00(SB)/8, $0x0000000100000000
DATA rowIota<>+0x08(SB)/8, $0x0000000300000002
DATA rowIota<>+0x10(SB)/8, $0x0000000500000004
DATA rowIota<>+0x18(SB)/8, $0x0000000700000006
DATA rowIota<>+0x20(SB)/8, $0x0000000900000008
DATA rowIota<>+0x28(SB)/8, $0x0000000b0000000a
DATA rowIota<>+0x30(SB)/8, $0x0000000d0000000c
DATA rowIota<>+0x38(SB)/8, $0x0000000f0000000e
GLOBL rowIota<>(SB), RODATA|NOPTR, $64

DATA wordOnes<>+0x00(SB)/8, $0x0001000100010001
DATA wordOnes<>+0x08(SB)/8, $0x0001000100010001
DATA wordOnes<>+0x10(SB)/8, $0x0001000100010001
DATA wordOnes<>+0x18(SB)/8, $0x0001000100010001
GLOBL wordOnes<>(SB), RODATA|NOPTR, $32

// VPSHUFB indices that gather the low word of each dword of a lane into
// the lane's low 8 bytes.
DATA lowWords<>+0x00(SB)/8, $0x0d0c090805040100
DATA lowWords<>+0x08(SB)/8, $0x8080808080808080
DATA lowWords<>+0x10(SB)/8, $0x0d0c090805040100
DATA lowWords<>+0x18(SB)/8, $0x8080808080808080
GLOBL lowWords<>(SB), RODATA|NOPTR, $32

// ggml's IQ4_NL table plus 128, for the VNNI kernels' unsigned codes.
DATA iq4Biased<>+0x00(SB)/8, $0x766a5d4f3f2d1801
DATA iq4Biased<>+0x08(SB)/8, $0xf1d9c5b5a6998d81
GLOBL iq4Biased<>(SB), RODATA|NOPTR, $16

// ggml's IQ4_NL table, for the AVX2 kernels' signed codes.
DATA iq4Signed<>+0x00(SB)/8, $0xf6eaddcfbfad9881
DATA iq4Signed<>+0x08(SB)/8, $0x7159453526190d01
GLOBL iq4Signed<>(SB), RODATA|NOPTR, $16

// MUL_PACKED_Y is the body of the AVX2 products (see below): TOKEN the
// block macro, bytes the packed block size. R10 is nonzero when STORE_Y
// must mask (a partial group, or adding to out). The macro stands before
// every TEXT because go vet checks argument references line by line.
#define MUL_PACKED_Y(TOKEN, bytes) \
	MOVQ x+16(FP), SI; \
	MOVQ xstride+24(FP), R8; \
	LEAQ (R8)(R8*2), R9; \
	MOVQ tokens+32(FP), R14; \
	MOVQ sums+40(FP), DX; \
	MOVQ out+48(FP), R12; \
	MOVQ outStride+56(FP), R13; \
	SHLQ $2, R13; \
	MOVQ nrows+64(FP), AX; \
	VMOVQ AX, X15; \
	VPBROADCASTD X15, Y15; \
	VPCMPGTD rowIota<>(SB), Y15, Y15; \
	MOVQ accumulate+72(FP), R10; \
	CMPQ AX, $8; \
	JEQ masked; \
	MOVQ $1, R10; \
masked: \
	MOVQ prefetch+80(FP), BX; \
	MOVQ prefetchLen+88(FP), R11; \
	ADDQ BX, R11; \
tile4: \
	CMPQ R14, $4; \
	JL tail; \
	MOVQ pack+0(FP), DI; \
	MOVQ nblocks+8(FP), CX; \
	MOVQ SI, AX; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
blocks4: \
	CMPQ BX, R11; \
	JAE loaded4; \
	PREFETCHT0 (BX); \
	ADDQ $64, BX; \
loaded4: \
	LOAD_PACK_Y; \
	TOKEN((AX), 0, Y8); \
	TOKEN((AX)(R8*1), 8, Y9); \
	TOKEN((AX)(R8*2), 16, Y10); \
	TOKEN((AX)(R9*1), 24, Y11); \
	ADDQ $bytes, DI; \
	ADDQ $34, AX; \
	ADDQ $32, DX; \
	DECQ CX; \
	JNZ blocks4; \
	MOVQ accumulate+72(FP), AX; \
	NEGQ AX; \
	VMOVQ AX, X14; \
	VPBROADCASTD X14, Y14; \
	VPAND Y15, Y14, Y14; \
	MOVQ R12, AX; \
	STORE_Y(Y8, plain0, next0); \
	STORE_Y(Y9, plain1, next1); \
	STORE_Y(Y10, plain2, next2); \
	STORE_Y(Y11, plain3, next3); \
	LEAQ (SI)(R8*4), SI; \
	LEAQ (R12)(R13*4), R12; \
	SUBQ $4, R14; \
	JMP tile4; \
tail: \
	MOVQ DX, R11; \
tail1: \
	TESTQ R14, R14; \
	JZ done; \
	MOVQ pack+0(FP), DI; \
	MOVQ nblocks+8(FP), CX; \
	MOVQ SI, AX; \
	MOVQ R11, DX; \
	VXORPS Y8, Y8, Y8; \
blocks1: \
	LOAD_PACK_Y; \
	TOKEN((AX), 0, Y8); \
	ADDQ $bytes, DI; \
	ADDQ $34, AX; \
	ADDQ $32, DX; \
	DECQ CX; \
	JNZ blocks1; \
	MOVQ accumulate+72(FP), AX; \
	NEGQ AX; \
	VMOVQ AX, X14; \
	VPBROADCASTD X14, Y14; \
	VPAND Y15, Y14, Y14; \
	MOVQ R12, AX; \
	STORE_Y(Y8, plain4, next4); \
	ADDQ R8, SI; \
	ADDQ R13, R12; \
	ADDQ $8, R11; \
	DECQ R14; \
	JMP tail1; \
done: \
	VZEROUPPER; \
	RET

// MUL_PACKED_Z is the body of the VNNI products (see below): bytes is the
// packed block size, xbytes the activation blocks' stride, START8 and START1 start the integer sums of 8 tokens
// (Z16-Z23) or one (Z16), and MIN8 and MIN1 add the min terms of a type
// with one after the scaling. K1 masks the rows to store, K2 those to add
// to. Fewer than 8 tokens are left at tail, with DX at their tile's table
// entries.
#define MUL_PACKED_Z(bytes, xbytes, START8, MIN8, START1, MIN1) \
	MOVQ x+16(FP), SI; \
	MOVQ xstride+24(FP), R8; \
	LEAQ (R8)(R8*2), R9; \
	MOVQ tokens+32(FP), R14; \
	MOVQ sums+40(FP), DX; \
	MOVQ out+48(FP), R12; \
	MOVQ outStride+56(FP), R13; \
	SHLQ $2, R13; \
	MOVQ nrows+64(FP), CX; \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1; \
	MOVQ accumulate+72(FP), BX; \
	NEGQ BX; \
	ANDL BX, AX; \
	KMOVW AX, K2; \
	MOVQ prefetch+80(FP), R10; \
	MOVQ prefetchLen+88(FP), R11; \
	ADDQ R10, R11; \
tile8: \
	CMPQ R14, $8; \
	JL tail; \
	MOVQ pack+0(FP), DI; \
	MOVQ nblocks+8(FP), CX; \
	MOVQ SI, AX; \
	LEAQ (SI)(R8*4), BX; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; \
	VPXORD Z29, Z29, Z29; \
	VPXORD Z30, Z30, Z30; \
	VPXORD Z31, Z31, Z31; \
blocks8: \
	CMPQ R10, R11; \
	JAE loaded8; \
	PREFETCHT0 (R10); \
	ADDQ $64, R10; \
loaded8: \
	LOAD_PACK_Z; \
	START8; \
	DOT8(2, Z0); \
	DOT8(6, Z1); \
	DOT8(10, Z2); \
	DOT8(14, Z3); \
	DOT8(18, Z4); \
	DOT8(22, Z5); \
	DOT8(26, Z6); \
	DOT8(30, Z7); \
	SCALE_Z(0, Z16, Z9, Z24); \
	SCALE_Z(8, Z17, Z10, Z25); \
	SCALE_Z(16, Z18, Z11, Z26); \
	SCALE_Z(24, Z19, Z12, Z27); \
	SCALE_Z(32, Z20, Z13, Z28); \
	SCALE_Z(40, Z21, Z14, Z29); \
	SCALE_Z(48, Z22, Z15, Z30); \
	SCALE_Z(56, Z23, Z9, Z31); \
	MIN8; \
	ADDQ $bytes, DI; \
	ADDQ $xbytes, AX; \
	ADDQ $xbytes, BX; \
	ADDQ $64, DX; \
	DECQ CX; \
	JNZ blocks8; \
	MOVQ R12, AX; \
	STORE_Z(Z24); \
	STORE_Z(Z25); \
	STORE_Z(Z26); \
	STORE_Z(Z27); \
	STORE_Z(Z28); \
	STORE_Z(Z29); \
	STORE_Z(Z30); \
	STORE_Z(Z31); \
	LEAQ (SI)(R8*8), SI; \
	LEAQ (R12)(R13*8), R12; \
	SUBQ $8, R14; \
	JMP tile8; \
tail: \
	MOVQ DX, R11; \
tail1: \
	TESTQ R14, R14; \
	JZ done; \
	MOVQ pack+0(FP), DI; \
	MOVQ nblocks+8(FP), CX; \
	MOVQ SI, AX; \
	MOVQ R11, DX; \
	VPXORD Z24, Z24, Z24; \
blocks1: \
	LOAD_PACK_Z; \
	START1; \
	VPDPBUSD.BCST 2(AX), Z0, Z16; \
	VPDPBUSD.BCST 6(AX), Z1, Z16; \
	VPDPBUSD.BCST 10(AX), Z2, Z16; \
	VPDPBUSD.BCST 14(AX), Z3, Z16; \
	VPDPBUSD.BCST 18(AX), Z4, Z16; \
	VPDPBUSD.BCST 22(AX), Z5, Z16; \
	VPDPBUSD.BCST 26(AX), Z6, Z16; \
	VPDPBUSD.BCST 30(AX), Z7, Z16; \
	SCALE_Z(0, Z16, Z9, Z24); \
	MIN1; \
	ADDQ $bytes, DI; \
	ADDQ $xbytes, AX; \
	ADDQ $64, DX; \
	DECQ CX; \
	JNZ blocks1; \
	MOVQ R12, AX; \
	STORE_Z(Z24); \
	ADDQ R8, SI; \
	ADDQ R13, R12; \
	ADDQ $8, R11; \
	DECQ R14; \
	JMP tail1; \
done: \
	VZEROUPPER; \
	RET

// MUL_PACKED_Q6 is the body of the Q6_K and Q2_K products (see below),
// FINISH8 and FINISH1 scaling and storing the sums of a tile of eight
// tokens and of one.
#define MUL_PACKED_Q6(FINISH8, FINISH1) \
	MOVQ x+8(FP), SI; \
	MOVQ xstride+16(FP), R8; \
	LEAQ (R8)(R8*2), R9; \
	MOVQ tokens+24(FP), R14; \
	MOVQ sums+32(FP), DX; \
	MOVQ out+40(FP), R12; \
	MOVQ outStride+48(FP), R13; \
	SHLQ $2, R13; \
	MOVQ nrows+56(FP), CX; \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1; \
	MOVQ accumulate+64(FP), BX; \
	NEGQ BX; \
	ANDL BX, AX; \
	KMOVW AX, K2; \
	MOVQ prefetch+72(FP), R10; \
	MOVQ prefetchLen+80(FP), R11; \
	ADDQ R10, R11; \
tile8: \
	CMPQ R14, $8; \
	JL tail; \
	MOVQ pack+0(FP), DI; \
	MOVQ $8, CX; \
	MOVQ SI, AX; \
	LEAQ (SI)(R8*4), BX; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; \
	VPXORD Z29, Z29, Z29; \
	VPXORD Z30, Z30, Z30; \
	VPXORD Z31, Z31, Z31; \
blocks8: \
	CMPQ R10, R11; \
	JAE loaded8; \
	PREFETCHT0 (R10); \
	ADDQ $64, R10; \
loaded8: \
	LOAD_PACK_Q6; \
	START_CORRECTION8; \
	DOT8(2, Z0); \
	DOT8(6, Z1); \
	DOT8(10, Z2); \
	DOT8(14, Z3); \
	SCALE_Q6_8(Z8); \
	ADDQ $64, DX; \
	START_CORRECTION8; \
	DOT8(18, Z4); \
	DOT8(22, Z5); \
	DOT8(26, Z6); \
	DOT8(30, Z7); \
	SCALE_Q6_8(Z9); \
	ADDQ $64, DX; \
	ADDQ $640, DI; \
	ADDQ $32, AX; \
	ADDQ $32, BX; \
	DECQ CX; \
	JNZ blocks8; \
	FINISH8; \
	LEAQ (SI)(R8*8), SI; \
	LEAQ (R12)(R13*8), R12; \
	SUBQ $8, R14; \
	JMP tile8; \
tail: \
	MOVQ DX, R11; \
tail1: \
	TESTQ R14, R14; \
	JZ done; \
	MOVQ pack+0(FP), DI; \
	MOVQ $8, CX; \
	MOVQ SI, AX; \
	MOVQ R11, DX; \
	VPXORD Z24, Z24, Z24; \
blocks1: \
	LOAD_PACK_Q6; \
	VPBROADCASTD 4(DX), Z16; \
	VPDPBUSD.BCST 2(AX), Z0, Z16; \
	VPDPBUSD.BCST 6(AX), Z1, Z16; \
	VPDPBUSD.BCST 10(AX), Z2, Z16; \
	VPDPBUSD.BCST 14(AX), Z3, Z16; \
	VPMULLD Z8, Z16, Z16; \
	VPADDD Z16, Z24, Z24; \
	VPBROADCASTD 68(DX), Z16; \
	VPDPBUSD.BCST 18(AX), Z4, Z16; \
	VPDPBUSD.BCST 22(AX), Z5, Z16; \
	VPDPBUSD.BCST 26(AX), Z6, Z16; \
	VPDPBUSD.BCST 30(AX), Z7, Z16; \
	VPMULLD Z9, Z16, Z16; \
	VPADDD Z16, Z24, Z24; \
	ADDQ $128, DX; \
	ADDQ $640, DI; \
	ADDQ $32, AX; \
	DECQ CX; \
	JNZ blocks1; \
	FINISH1; \
	ADDQ R8, SI; \
	ADDQ R13, R12; \
	ADDQ $8, R11; \
	DECQ R14; \
	JMP tail1; \
done: \
	VZEROUPPER; \
	RET

// Q8_SUMS is the body of the table functions: STORE_SUM stores the
// entry's second word from the block's code sum in X0 and scale in X2, at
// (AX). The table's layout is q8SumsAVX2's (matmul_amd64.go).
#define Q8_SUMS(STORE_SUM) \
	MOVQ x+0(FP), SI; \
	MOVQ xstride+8(FP), R8; \
	MOVQ nblocks+24(FP), R10; \
	MOVQ mult+32(FP), R11; \
	MOVQ groupShift+40(FP), CX; \
	MOVQ sums+48(FP), DI; \
	MOVL $1, BX; \
	SHLQ CX, BX; \
	LEAQ -1(BX), R12; \
	SHLQ $3, BX; \
	MOVQ R10, R13; \
	IMULQ BX, R13; \
	MOVL $0x01010101, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	VMOVDQU wordOnes<>(SB), Y14; \
	XORQ R14, R14; \
token: \
	CMPQ R14, tokens+16(FP); \
	JGE done; \
	MOVQ groupShift+40(FP), CX; \
	MOVQ R14, AX; \
	SHRQ CX, AX; \
	IMULQ R13, AX; \
	MOVQ R14, DX; \
	ANDQ R12, DX; \
	LEAQ (AX)(DX*8), AX; \
	ADDQ DI, AX; \
	MOVQ SI, DX; \
	MOVQ R10, R9; \
block: \
	VMOVDQU 2(DX), Y0; \
	VPMADDUBSW Y0, Y15, Y0; \
	VPMADDWD Y14, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDD X1, X0, X0; \
	VPSHUFD $0x4e, X0, X1; \
	VPADDD X1, X0, X0; \
	VPSHUFD $0xb1, X0, X1; \
	VPADDD X1, X0, X0; \
	MOVWLZX (DX), CX; \
	VMOVD CX, X2; \
	VCVTPH2PS X2, X2; \
	VMOVSS X2, (AX); \
	STORE_SUM; \
	ADDQ $34, DX; \
	ADDQ BX, AX; \
	DECQ R9; \
	JNZ block; \
	ADDQ R8, SI; \
	INCQ R14; \
	JMP token; \
done: \
	VZEROUPPER; \
	RET

// STORE_CORRECTION stores −mult·Σy (R11 holds mult).
#define STORE_CORRECTION \
	VMOVD X0, CX; \
	IMULL R11, CX; \
	NEGL CX; \
	MOVL CX, 4(AX)

// STORE_SCALED_SUM stores d(x)·Σy as float32.
#define STORE_SCALED_SUM \
	VCVTDQ2PS X0, X0; \
	VMULSS X2, X0, X0; \
	VMOVSS X0, 4(AX)

// func q8SumsAVX2(x *byte, xstride, tokens, nblocks, mult, groupShift int, sums *byte)
TEXT ·q8SumsAVX2(SB), NOSPLIT, $0-56
	Q8_SUMS(STORE_CORRECTION)

// func q8ScaledSumsAVX2(x *byte, xstride, tokens, nblocks, mult, groupShift int, sums *byte)
TEXT ·q8ScaledSumsAVX2(SB), NOSPLIT, $0-56
	Q8_SUMS(STORE_SCALED_SUM)

// ROW_OFFSETS_Z sets Z10 to the byte offsets of 16 rows rowBytes apart,
// rows past nrows repeating the last. Clobbers nrows and Z11.
#define ROW_OFFSETS_Z(rowBytes, nrows) \
	VMOVDQU32 rowIota<>(SB), Z10; \
	DECQ nrows; \
	VPBROADCASTD nrows, Z11; \
	VPMINSD Z11, Z10, Z10; \
	VPBROADCASTD rowBytes, Z11; \
	VPMULLD Z11, Z10, Z10

// GATHER_Z loads the dword at off in each of the 16 rows at SI+Z10 into z.
#define GATHER_Z(off, z) \
	KMOVW DX, K1; \
	VPGATHERDD off(SI)(Z10*1), K1, z

// STORE_PACK_Z stores Z0-Z7 (codes) and Z8 (scales) at DI and advances DI.
#define STORE_PACK_Z \
	VMOVDQU32 Z0, (DI); \
	VMOVDQU32 Z1, 64(DI); \
	VMOVDQU32 Z2, 128(DI); \
	VMOVDQU32 Z3, 192(DI); \
	VMOVDQU32 Z4, 256(DI); \
	VMOVDQU32 Z5, 320(DI); \
	VMOVDQU32 Z6, 384(DI); \
	VMOVDQU32 Z7, 448(DI); \
	VMOVUPS Z8, 512(DI); \
	ADDQ $576, DI

// SCALES_Z turns the dwords in Z8, whose low words are fp16 scales, into
// 16 float32 scales.
#define SCALES_Z \
	VPMOVDW Z8, Y8; \
	VCVTPH2PS Y8, Z8

// The pack functions take a full row group (the usual case: callers
// split rows at multiples of 16) with plain loads and in-lane transposes,
// and a partial group, whose missing rows must not be read, with gathers.
// Rows 4j..4j+3 of a full group are at Rj + {0, R8, 2·R8, R9}: R8 is the
// row stride, R9 three of them, R10-R12 the group's rows 4, 8 and 12
// (AVX2: rows 0-3 and 4-7 at SI and R10).

// ROW_BASES sets R8-R12 for the full group at SI with row stride AX.
#define ROW_BASES \
	MOVQ AX, R8; \
	LEAQ (AX)(AX*2), R9; \
	LEAQ (SI)(R8*4), R10; \
	LEAQ (R10)(R8*4), R11; \
	LEAQ (R11)(R8*4), R12

// LOAD4_Z loads 16 bytes from each of four rows into the 128-bit lanes
// of z (x its low half).
#define LOAD4_Z(m0, m1, m2, m3, x, z) \
	VMOVDQU m0, x; \
	VINSERTI32X4 $1, m1, z, z; \
	VINSERTI32X4 $2, m2, z, z; \
	VINSERTI32X4 $3, m3, z, z

// LOAD16_Z loads 16 bytes at off from each row of a full group so that
// TRANSPOSE4 leaves dword k of rows 0-15 in order in register k.
#define LOAD16_Z(off, z0, z1, z2, z3, x0, x1, x2, x3) \
	LOAD4_Z(off(SI), off(R10), off(R11), off(R12), x0, z0); \
	LOAD4_Z(off(SI)(R8*1), off(R10)(R8*1), off(R11)(R8*1), off(R12)(R8*1), x1, z1); \
	LOAD4_Z(off(SI)(R8*2), off(R10)(R8*2), off(R11)(R8*2), off(R12)(R8*2), x2, z2); \
	LOAD4_Z(off(SI)(R9*1), off(R10)(R9*1), off(R11)(R9*1), off(R12)(R9*1), x3, z3)

// TRANSPOSE4 transposes the 4×4 dword matrices of the 128-bit lanes of
// a-d (rows of the matrices in a-d), using t0-t3.
#define TRANSPOSE4(a, b, c, d, t0, t1, t2, t3) \
	VPUNPCKLDQ b, a, t0; \
	VPUNPCKHDQ b, a, t1; \
	VPUNPCKLDQ d, c, t2; \
	VPUNPCKHDQ d, c, t3; \
	VPUNPCKLQDQ t2, t0, a; \
	VPUNPCKHQDQ t2, t0, b; \
	VPUNPCKLQDQ t3, t1, c; \
	VPUNPCKHQDQ t3, t1, d

// INSERT4_SCALES inserts the fp16 scales of four rows at base into words
// w..w+3 of x.
#define INSERT4_SCALES(base, w0, w1, w2, w3, x) \
	VPINSRW $w0, (base), x, x; \
	VPINSRW $w1, (base)(R8*1), x, x; \
	VPINSRW $w2, (base)(R8*2), x, x; \
	VPINSRW $w3, (base)(R9*1), x, x

// SCALES16_Z sets Z8 to the float32 scales of a full group.
#define SCALES16_Z \
	INSERT4_SCALES(SI, 0, 1, 2, 3, X8); \
	INSERT4_SCALES(R10, 4, 5, 6, 7, X8); \
	INSERT4_SCALES(R11, 0, 1, 2, 3, X9); \
	INSERT4_SCALES(R12, 4, 5, 6, 7, X9); \
	VINSERTI128 $1, X9, Y8, Y8; \
	VCVTPH2PS Y8, Z8

// NEXT_BLOCK_Z moves SI and R10-R12 on by one block of size bytes.
#define NEXT_BLOCK_Z(bytes) \
	ADDQ $bytes, SI; \
	ADDQ $bytes, R10; \
	ADDQ $bytes, R11; \
	ADDQ $bytes, R12

// NIBBLES_Z splits the packed nibbles of dwords 0-3 in Z0-Z3 into the
// codes of dwords 0-7 in Z0-Z7. Z13 holds bytes 0x0f.
#define NIBBLES_Z \
	VPSRLD $4, Z0, Z4; \
	VPSRLD $4, Z1, Z5; \
	VPSRLD $4, Z2, Z6; \
	VPSRLD $4, Z3, Z7; \
	VPANDD Z13, Z0, Z0; \
	VPANDD Z13, Z1, Z1; \
	VPANDD Z13, Z2, Z2; \
	VPANDD Z13, Z3, Z3; \
	VPANDD Z13, Z4, Z4; \
	VPANDD Z13, Z5, Z5; \
	VPANDD Z13, Z6, Z6; \
	VPANDD Z13, Z7, Z7

// func packQ4_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ4_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(2, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	SCALES16_Z
	NIBBLES_Z
	STORE_PACK_Z
	NEXT_BLOCK_Z(18)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(2, Z0)
	GATHER_Z(6, Z1)
	GATHER_Z(10, Z2)
	GATHER_Z(14, Z3)
	GATHER_Z(0, Z8)
	NIBBLES_Z
	SCALES_Z
	STORE_PACK_Z
	ADDQ $18, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// func packQ8_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ8_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x80808080, DX
	VPBROADCASTD DX, Z13
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(2, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	LOAD16_Z(18, Z4, Z5, Z6, Z7, X4, X5, X6, X7)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19)
	TRANSPOSE4(Z4, Z5, Z6, Z7, Z16, Z17, Z18, Z19)
	SCALES16_Z
	VPXORD Z13, Z0, Z0
	VPXORD Z13, Z1, Z1
	VPXORD Z13, Z2, Z2
	VPXORD Z13, Z3, Z3
	VPXORD Z13, Z4, Z4
	VPXORD Z13, Z5, Z5
	VPXORD Z13, Z6, Z6
	VPXORD Z13, Z7, Z7
	STORE_PACK_Z
	NEXT_BLOCK_Z(34)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(2, Z0)
	GATHER_Z(6, Z1)
	GATHER_Z(10, Z2)
	GATHER_Z(14, Z3)
	GATHER_Z(18, Z4)
	GATHER_Z(22, Z5)
	GATHER_Z(26, Z6)
	GATHER_Z(30, Z7)
	GATHER_Z(0, Z8)
	VPXORD Z13, Z0, Z0
	VPXORD Z13, Z1, Z1
	VPXORD Z13, Z2, Z2
	VPXORD Z13, Z3, Z3
	VPXORD Z13, Z4, Z4
	VPXORD Z13, Z5, Z5
	VPXORD Z13, Z6, Z6
	VPXORD Z13, Z7, Z7
	SCALES_Z
	STORE_PACK_Z
	ADDQ $34, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// IQ4_NL_Z replaces the codes in Z0-Z7 by the table values they index
// plus 128 (unsigned, as VPDPBUSD wants them; the table's correction
// −128·Σy takes the 128 off again), looked up in Z14.
#define IQ4_NL_Z \
	VPSHUFB Z0, Z14, Z0; \
	VPSHUFB Z1, Z14, Z1; \
	VPSHUFB Z2, Z14, Z2; \
	VPSHUFB Z3, Z14, Z3; \
	VPSHUFB Z4, Z14, Z4; \
	VPSHUFB Z5, Z14, Z5; \
	VPSHUFB Z6, Z14, Z6; \
	VPSHUFB Z7, Z14, Z7

// func packIQ4_NLVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packIQ4_NLVNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	VBROADCASTI32X4 iq4Biased<>(SB), Z14
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(2, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	SCALES16_Z
	NIBBLES_Z
	IQ4_NL_Z
	STORE_PACK_Z
	NEXT_BLOCK_Z(18)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(2, Z0)
	GATHER_Z(6, Z1)
	GATHER_Z(10, Z2)
	GATHER_Z(14, Z3)
	GATHER_Z(0, Z8)
	NIBBLES_Z
	IQ4_NL_Z
	SCALES_Z
	STORE_PACK_Z
	ADDQ $18, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// packIQ4_XSVNNI packs each IQ4_XS super-block as 8 IQ4_NL-like blocks,
// one a sub-block, the scales d·(ls−32). A full group's d, scalesH (Z9)
// and scalesL (Z10) come from a transposed 16-byte load, a partial
// group's from gathers (scalesL to Z12, as Z10 holds the row offsets).

// XS_SCALE_Z sets Z8 to 16 rows' float32 scales of a sub-block, whose
// 4-bit low and 2-bit high scale parts are at bits lo of the rows' scalesL
// (sl) and hi of their scalesH (sh). Z15 holds the rows' d, Z20-Z22
// dwords 15, 3 and 32. Clobbers Z24, Z25.
#define XS_SCALE_Z(sh, sl, lo, hi) \
	VPSRLD $lo, sl, Z24; \
	VPANDD Z20, Z24, Z24; \
	VPSRLD $hi, sh, Z25; \
	VPANDD Z21, Z25, Z25; \
	VPSLLD $4, Z25, Z25; \
	VPORD Z25, Z24, Z24; \
	VPSUBD Z22, Z24, Z24; \
	VCVTDQ2PS Z24, Z24; \
	VMULPS Z15, Z24, Z8

// XS_FULL_Z packs the sub-block at off, scale bits lo and hi, of a full
// group.
#define XS_FULL_Z(off, lo, hi) \
	LOAD16_Z(off, Z0, Z1, Z2, Z3, X0, X1, X2, X3); \
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7); \
	NIBBLES_Z; \
	IQ4_NL_Z; \
	XS_SCALE_Z(Z9, Z10, lo, hi); \
	STORE_PACK_Z

// XS_GATHER_Z packs the sub-block whose codes are at o0-o3 of a partial
// group.
#define XS_GATHER_Z(o0, o1, o2, o3, lo, hi) \
	GATHER_Z(o0, Z0); \
	GATHER_Z(o1, Z1); \
	GATHER_Z(o2, Z2); \
	GATHER_Z(o3, Z3); \
	NIBBLES_Z; \
	IQ4_NL_Z; \
	XS_SCALE_Z(Z9, Z12, lo, hi); \
	STORE_PACK_Z

// XS_D_Z sets Z15 to the rows' d from the low words of Z9 and leaves their
// scalesH there.
#define XS_D_Z \
	VPMOVDW Z9, Y15; \
	VCVTPH2PS Y15, Z15; \
	VPSRLD $16, Z9, Z9

// func packIQ4_XSVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packIQ4_XSVNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	VBROADCASTI32X4 iq4Biased<>(SB), Z14
	MOVL $15, DX
	VPBROADCASTD DX, Z20
	MOVL $3, DX
	VPBROADCASTD DX, Z21
	MOVL $32, DX
	VPBROADCASTD DX, Z22
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(0, Z9, Z10, Z11, Z12, X9, X10, X11, X12)
	TRANSPOSE4(Z9, Z10, Z11, Z12, Z16, Z17, Z18, Z19)
	XS_D_Z
	XS_FULL_Z(8, 0, 0)
	XS_FULL_Z(24, 4, 2)
	XS_FULL_Z(40, 8, 4)
	XS_FULL_Z(56, 12, 6)
	XS_FULL_Z(72, 16, 8)
	XS_FULL_Z(88, 20, 10)
	XS_FULL_Z(104, 24, 12)
	XS_FULL_Z(120, 28, 14)
	NEXT_BLOCK_Z(136)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(0, Z9)
	GATHER_Z(4, Z12)
	XS_D_Z
	XS_GATHER_Z(8, 12, 16, 20, 0, 0)
	XS_GATHER_Z(24, 28, 32, 36, 4, 2)
	XS_GATHER_Z(40, 44, 48, 52, 8, 4)
	XS_GATHER_Z(56, 60, 64, 68, 12, 6)
	XS_GATHER_Z(72, 76, 80, 84, 16, 8)
	XS_GATHER_Z(88, 92, 96, 100, 20, 10)
	XS_GATHER_Z(104, 108, 112, 116, 24, 12)
	XS_GATHER_Z(120, 124, 128, 132, 28, 14)
	ADDQ $136, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// The types with a min (Q4_1, Q5_1) pack 640 bytes a block: after the
// codes and scales, the rows' mins as float32 at 576. The full groups take
// the blocks' first dwords, d and m, from a transposed 16-byte load.

// SCALES_MINS_Z turns the dwords in Z9 (fp16 d, fp16 m) into 16 float32
// scales in Z8 and mins in Z9.
#define SCALES_MINS_Z \
	VPMOVDW Z9, Y8; \
	VCVTPH2PS Y8, Z8; \
	VPSRLD $16, Z9, Z9; \
	VPMOVDW Z9, Y9; \
	VCVTPH2PS Y9, Z9

// STORE_PACK_MIN_Z stores the codes, scales and mins (Z9) at DI and
// advances DI.
#define STORE_PACK_MIN_Z \
	VMOVUPS Z9, 576(DI); \
	STORE_PACK_Z; \
	ADDQ $64, DI

// func packQ4_1VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ4_1VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(4, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	LOAD16_Z(0, Z9, Z10, Z11, Z12, X9, X10, X11, X12)
	TRANSPOSE4(Z9, Z10, Z11, Z12, Z16, Z17, Z18, Z19)
	SCALES_MINS_Z
	NIBBLES_Z
	STORE_PACK_MIN_Z
	NEXT_BLOCK_Z(20)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(4, Z0)
	GATHER_Z(8, Z1)
	GATHER_Z(12, Z2)
	GATHER_Z(16, Z3)
	GATHER_Z(0, Z9)
	SCALES_MINS_Z
	NIBBLES_Z
	STORE_PACK_MIN_Z
	ADDQ $20, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// Q5_1's fifth bits: bit j of the block's qh is code j's. Dword k of the
// codes takes bits 4k..4k+3, the low or high half of qh's byte k/2:
// VPSHUFB copies that byte to the dword's four bytes, VPTESTMB picks bit
// 4(k%2)+i for byte i, and a masked VPADDB adds 16 to the nibbles so
// marked.

// VPSHUFB indices copying byte b of each dword to all four of its bytes,
// b = 0..3, 16 bytes each.
DATA qhBytes<>+0x00(SB)/8, $0x0404040400000000
DATA qhBytes<>+0x08(SB)/8, $0x0c0c0c0c08080808
DATA qhBytes<>+0x10(SB)/8, $0x0505050501010101
DATA qhBytes<>+0x18(SB)/8, $0x0d0d0d0d09090909
DATA qhBytes<>+0x20(SB)/8, $0x0606060602020202
DATA qhBytes<>+0x28(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA qhBytes<>+0x30(SB)/8, $0x0707070703030303
DATA qhBytes<>+0x38(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL qhBytes<>(SB), RODATA|NOPTR, $64

// HIGH_BIT_Z adds the fifth bits of code dword z, whose qh byte Z20-Z23
// (idx) copies and whose bits Z24 or Z25 selects, from the rows' qh.
// Clobbers Z15 and K1.
#define HIGH_BIT_Z(qh, idx, bits, z) \
	VPSHUFB idx, qh, Z15; \
	VPTESTMB bits, Z15, K1; \
	VPADDB Z14, z, K1, z

// HIGH_BITS_Z adds the fifth bits of all eight code dwords.
#define HIGH_BITS_Z(qh) \
	HIGH_BIT_Z(qh, Z20, Z24, Z0); \
	HIGH_BIT_Z(qh, Z20, Z25, Z1); \
	HIGH_BIT_Z(qh, Z21, Z24, Z2); \
	HIGH_BIT_Z(qh, Z21, Z25, Z3); \
	HIGH_BIT_Z(qh, Z22, Z24, Z4); \
	HIGH_BIT_Z(qh, Z22, Z25, Z5); \
	HIGH_BIT_Z(qh, Z23, Z24, Z6); \
	HIGH_BIT_Z(qh, Z23, Z25, Z7)

// func packQ5_1VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ5_1VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	MOVL $0x10101010, DX
	VPBROADCASTD DX, Z14
	VBROADCASTI32X4 qhBytes<>+0x00(SB), Z20
	VBROADCASTI32X4 qhBytes<>+0x10(SB), Z21
	VBROADCASTI32X4 qhBytes<>+0x20(SB), Z22
	VBROADCASTI32X4 qhBytes<>+0x30(SB), Z23
	MOVL $0x08040201, DX
	VPBROADCASTD DX, Z24
	MOVL $0x80402010, DX
	VPBROADCASTD DX, Z25
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(8, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	LOAD16_Z(0, Z9, Z10, Z11, Z12, X9, X10, X11, X12)
	TRANSPOSE4(Z9, Z10, Z11, Z12, Z16, Z17, Z18, Z19)
	SCALES_MINS_Z
	NIBBLES_Z
	HIGH_BITS_Z(Z10)
	STORE_PACK_MIN_Z
	NEXT_BLOCK_Z(24)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(8, Z0)
	GATHER_Z(12, Z1)
	GATHER_Z(16, Z2)
	GATHER_Z(20, Z3)
	GATHER_Z(0, Z9)
	GATHER_Z(4, Z12)
	SCALES_MINS_Z
	NIBBLES_Z
	HIGH_BITS_Z(Z12)
	STORE_PACK_MIN_Z
	ADDQ $24, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// Q5_0 packs as Q5_1 does, its value d·(q−16) as the code q with the
// scale d and the min −16·d. Its block is d, then the fifth bits qh at
// byte 2 and the nibbles at 6, so a full group's qh dwords straddle the
// first two of the transposed load: the high word of dword 0 and the low
// word of dword 1.

// SCALES_Q5_0_Z turns the dwords in Z9, whose low words are fp16 scales,
// into 16 float32 scales in Z8 and mins −16·d in Z9. Z28 holds −16.
#define SCALES_Q5_0_Z \
	VPMOVDW Z9, Y8; \
	VCVTPH2PS Y8, Z8; \
	VMULPS Z28, Z8, Z9

// func packQ5_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ5_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	MOVL $0x10101010, DX
	VPBROADCASTD DX, Z14
	VBROADCASTI32X4 qhBytes<>+0x00(SB), Z20
	VBROADCASTI32X4 qhBytes<>+0x10(SB), Z21
	VBROADCASTI32X4 qhBytes<>+0x20(SB), Z22
	VBROADCASTI32X4 qhBytes<>+0x30(SB), Z23
	MOVL $0x08040201, DX
	VPBROADCASTD DX, Z24
	MOVL $0x80402010, DX
	VPBROADCASTD DX, Z25
	MOVL $0xc1800000, DX // −16.0
	VPBROADCASTD DX, Z28
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(6, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	LOAD16_Z(0, Z9, Z10, Z11, Z12, X9, X10, X11, X12)
	TRANSPOSE4(Z9, Z10, Z11, Z12, Z16, Z17, Z18, Z19)
	VPSRLD $16, Z9, Z26
	VPSLLD $16, Z10, Z27
	VPORD Z27, Z26, Z26
	SCALES_Q5_0_Z
	NIBBLES_Z
	HIGH_BITS_Z(Z26)
	STORE_PACK_MIN_Z
	NEXT_BLOCK_Z(22)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(6, Z0)
	GATHER_Z(10, Z1)
	GATHER_Z(14, Z2)
	GATHER_Z(18, Z3)
	GATHER_Z(0, Z9)
	GATHER_Z(2, Z12)
	SCALES_Q5_0_Z
	NIBBLES_Z
	HIGH_BITS_Z(Z12)
	STORE_PACK_MIN_Z
	ADDQ $22, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// packQ4_KVNNI and packQ5_KVNNI pack each Q4_K (Q5_K) super-block as 8
// blocks of packQ4_1VNNI's layout, one a sub-block: the unsigned codes,
// the scales d·sc and, where Q4_1 has its mins, −dmin·m, so that the
// product's min term m·(d(x)·Σy) becomes −dmin·m·d(x)·Σy. A full group's
// header (d and dmin, then the 12 bytes of 6-bit scales and mins) comes
// from a transposed 16-byte load, a partial group's from gathers; the
// scales are unpacked first, so that their registers serve the codes.

// K_SCALE_STORE converts sub-block scales sc and mins m (int32) to float32,
// times d (Z14) and −dmin (Z15), and stores them at off+512 and off+576.
#define K_SCALE_STORE(sc, m, off) \
	VCVTDQ2PS sc, sc; \
	VMULPS Z14, sc, sc; \
	VMOVUPS sc, off+512(DI); \
	VCVTDQ2PS m, m; \
	VMULPS Z15, m, m; \
	VMOVUPS m, off+576(DI)

// K_LOW_Z stores the scale and min of sub-block j < 4, the low six bits
// of byte j of the scale bytes 0-3 (h1) and 4-7 (h2); sh is 8·j. Z20
// holds dwords 63.
#define K_LOW_Z(h1, h2, sh, off) \
	VPSRLD $sh, h1, Z24; \
	VPANDD Z20, Z24, Z24; \
	VPSRLD $sh, h2, Z25; \
	VPANDD Z20, Z25, Z25; \
	K_SCALE_STORE(Z24, Z25, off)

// K_HIGH_Z stores the scale and min of sub-block 4+i: the low and high
// nibble of byte i of scale bytes 8-11 (h3), topped by the spare top two
// bits of byte i of h1 and h2; s0, s2, s4 are 8·i, 8·i+2, 8·i+4. Z21 and
// Z22 hold dwords 15 and 48. Clobbers Z16.
#define K_HIGH_Z(h1, h2, h3, s0, s2, s4, off) \
	VPSRLD $s0, h3, Z24; \
	VPANDD Z21, Z24, Z24; \
	VPSRLD $s2, h1, Z16; \
	VPANDD Z22, Z16, Z16; \
	VPORD Z16, Z24, Z24; \
	VPSRLD $s4, h3, Z25; \
	VPANDD Z21, Z25, Z25; \
	VPSRLD $s2, h2, Z16; \
	VPANDD Z22, Z16, Z16; \
	VPORD Z16, Z25, Z25; \
	K_SCALE_STORE(Z24, Z25, off)

// K_SCALES_Z stores the scales and mins of the 8 sub-blocks from the
// header dwords h0-h3 of 16 rows. Clobbers Z14-Z16, Z24, Z25.
#define K_SCALES_Z(h0, h1, h2, h3) \
	VPMOVDW h0, Y14; \
	VCVTPH2PS Y14, Z14; \
	VPSRLD $16, h0, Z15; \
	VPMOVDW Z15, Y15; \
	VCVTPH2PS Y15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VSUBPS Z15, Z16, Z15; \
	K_LOW_Z(h1, h2, 0, 0); \
	K_LOW_Z(h1, h2, 8, 640); \
	K_LOW_Z(h1, h2, 16, 1280); \
	K_LOW_Z(h1, h2, 24, 1920); \
	K_HIGH_Z(h1, h2, h3, 0, 2, 4, 2560); \
	K_HIGH_Z(h1, h2, h3, 8, 10, 12, 3200); \
	K_HIGH_Z(h1, h2, h3, 16, 18, 20, 3840); \
	K_HIGH_Z(h1, h2, h3, 24, 26, 28, 4480)

// K_CONSTS_Z loads the constants of the pack functions: bytes 0x0f (Z13),
// dwords 63, 15 and 48 (Z20-Z22) and bytes 0x10 (Z23).
#define K_CONSTS_Z \
	MOVL $0x0f0f0f0f, DX; \
	VPBROADCASTD DX, Z13; \
	MOVL $63, DX; \
	VPBROADCASTD DX, Z20; \
	MOVL $15, DX; \
	VPBROADCASTD DX, Z21; \
	MOVL $48, DX; \
	VPBROADCASTD DX, Z22; \
	MOVL $0x10101010, DX; \
	VPBROADCASTD DX, Z23

// LOAD32_Z loads 32 bytes at off0 (off1 = off0+16) from each row of a
// full group, dword k of rows 0-15 to Zk.
#define LOAD32_Z(off0, off1) \
	LOAD16_Z(off0, Z0, Z1, Z2, Z3, X0, X1, X2, X3); \
	LOAD16_Z(off1, Z4, Z5, Z6, Z7, X4, X5, X6, X7); \
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19); \
	TRANSPOSE4(Z4, Z5, Z6, Z7, Z16, Z17, Z18, Z19)

// GATHER32_Z is LOAD32_Z for a partial group, o0-o7 the dwords' offsets.
#define GATHER32_Z(o0, o1, o2, o3, o4, o5, o6, o7) \
	GATHER_Z(o0, Z0); \
	GATHER_Z(o1, Z1); \
	GATHER_Z(o2, Z2); \
	GATHER_Z(o3, Z3); \
	GATHER_Z(o4, Z4); \
	GATHER_Z(o5, Z5); \
	GATHER_Z(o6, Z6); \
	GATHER_Z(o7, Z7)

// K4_SPLIT stores the low nibbles of code dword z at lo(DI), the sub-block
// of the chunk's low nibbles, and the high ones at hi(DI).
#define K4_SPLIT(z, lo, hi) \
	VPANDD Z13, z, Z24; \
	VMOVDQU32 Z24, lo(DI); \
	VPSRLD $4, z, Z25; \
	VPANDD Z13, Z25, Z25; \
	VMOVDQU32 Z25, hi(DI)

// K4_CHUNK stores the codes of a 32-byte chunk of nibbles in Z0-Z7 as
// the sub-blocks packed at lo and hi.
#define K4_CHUNK(lo, hi) \
	K4_SPLIT(Z0, lo, hi); \
	K4_SPLIT(Z1, lo+64, hi+64); \
	K4_SPLIT(Z2, lo+128, hi+128); \
	K4_SPLIT(Z3, lo+192, hi+192); \
	K4_SPLIT(Z4, lo+256, hi+256); \
	K4_SPLIT(Z5, lo+320, hi+320); \
	K4_SPLIT(Z6, lo+384, hi+384); \
	K4_SPLIT(Z7, lo+448, hi+448)

// func packQ4_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ4_KVNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	K_CONSTS_Z
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(0, Z9, Z10, Z11, Z12, X9, X10, X11, X12)
	TRANSPOSE4(Z9, Z10, Z11, Z12, Z16, Z17, Z18, Z19)
	K_SCALES_Z(Z9, Z10, Z11, Z12)
	LOAD32_Z(16, 32)
	K4_CHUNK(0, 640)
	LOAD32_Z(48, 64)
	K4_CHUNK(1280, 1920)
	LOAD32_Z(80, 96)
	K4_CHUNK(2560, 3200)
	LOAD32_Z(112, 128)
	K4_CHUNK(3840, 4480)
	ADDQ $5120, DI
	NEXT_BLOCK_Z(144)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(0, Z9)
	GATHER_Z(4, Z27)
	GATHER_Z(8, Z28)
	GATHER_Z(12, Z12)
	K_SCALES_Z(Z9, Z27, Z28, Z12)
	GATHER32_Z(16, 20, 24, 28, 32, 36, 40, 44)
	K4_CHUNK(0, 640)
	GATHER32_Z(48, 52, 56, 60, 64, 68, 72, 76)
	K4_CHUNK(1280, 1920)
	GATHER32_Z(80, 84, 88, 92, 96, 100, 104, 108)
	K4_CHUNK(2560, 3200)
	GATHER32_Z(112, 116, 120, 124, 128, 132, 136, 140)
	K4_CHUNK(3840, 4480)
	ADDQ $5120, DI
	ADDQ $144, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// Q5_K's fifth bits: bit j of qh byte l is that of element l of sub-block
// j. The rows' qh dwords 0-7 wait in Z24-Z31 (the scales are done by
// then); for sub-block j a shift by 4−j brings its bit of each byte to bit
// 4 of the byte, where Z23 (bytes 0x10) picks it.

// K5_SPLIT is K4_SPLIT for Q5_K, the fifth bits from qh dword q: opl
// $nl and oph $nh shift those of the low and high sub-block into place.
// Clobbers Z14, Z15.
#define K5_SPLIT(z, q, opl, nl, oph, nh, lo, hi) \
	VPANDD Z13, z, Z14; \
	opl $nl, q, Z15; \
	VPANDD Z23, Z15, Z15; \
	VPORD Z15, Z14, Z14; \
	VMOVDQU32 Z14, lo(DI); \
	VPSRLD $4, z, Z14; \
	VPANDD Z13, Z14, Z14; \
	oph $nh, q, Z15; \
	VPANDD Z23, Z15, Z15; \
	VPORD Z15, Z14, Z14; \
	VMOVDQU32 Z14, hi(DI)

// K5_CHUNK is K4_CHUNK for Q5_K.
#define K5_CHUNK(opl, nl, oph, nh, lo, hi) \
	K5_SPLIT(Z0, Z24, opl, nl, oph, nh, lo, hi); \
	K5_SPLIT(Z1, Z25, opl, nl, oph, nh, lo+64, hi+64); \
	K5_SPLIT(Z2, Z26, opl, nl, oph, nh, lo+128, hi+128); \
	K5_SPLIT(Z3, Z27, opl, nl, oph, nh, lo+192, hi+192); \
	K5_SPLIT(Z4, Z28, opl, nl, oph, nh, lo+256, hi+256); \
	K5_SPLIT(Z5, Z29, opl, nl, oph, nh, lo+320, hi+320); \
	K5_SPLIT(Z6, Z30, opl, nl, oph, nh, lo+384, hi+384); \
	K5_SPLIT(Z7, Z31, opl, nl, oph, nh, lo+448, hi+448)

// K5_QH moves the qh dwords from Z0-Z7 to Z24-Z31.
#define K5_QH \
	VMOVDQA64 Z0, Z24; \
	VMOVDQA64 Z1, Z25; \
	VMOVDQA64 Z2, Z26; \
	VMOVDQA64 Z3, Z27; \
	VMOVDQA64 Z4, Z28; \
	VMOVDQA64 Z5, Z29; \
	VMOVDQA64 Z6, Z30; \
	VMOVDQA64 Z7, Z31

// K5_CHUNKS packs the four chunks of codes, LOAD the macro that loads
// chunk c (0-3) to Z0-Z7.
#define K5_CHUNKS(LOAD0, LOAD1, LOAD2, LOAD3) \
	LOAD0; \
	K5_CHUNK(VPSLLD, 4, VPSLLD, 3, 0, 640); \
	LOAD1; \
	K5_CHUNK(VPSLLD, 2, VPSLLD, 1, 1280, 1920); \
	LOAD2; \
	K5_CHUNK(VPSLLD, 0, VPSRLD, 1, 2560, 3200); \
	LOAD3; \
	K5_CHUNK(VPSRLD, 2, VPSRLD, 3, 3840, 4480)

// func packQ5_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ5_KVNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	K_CONSTS_Z
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	LOAD16_Z(0, Z9, Z10, Z11, Z12, X9, X10, X11, X12)
	TRANSPOSE4(Z9, Z10, Z11, Z12, Z16, Z17, Z18, Z19)
	K_SCALES_Z(Z9, Z10, Z11, Z12)
	LOAD32_Z(16, 32)
	K5_QH
	K5_CHUNKS(LOAD32_Z(48, 64), LOAD32_Z(80, 96), LOAD32_Z(112, 128), LOAD32_Z(144, 160))
	ADDQ $5120, DI
	NEXT_BLOCK_Z(176)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(0, Z9)
	GATHER_Z(4, Z27)
	GATHER_Z(8, Z28)
	GATHER_Z(12, Z12)
	K_SCALES_Z(Z9, Z27, Z28, Z12)
	GATHER32_Z(16, 20, 24, 28, 32, 36, 40, 44)
	K5_QH
	K5_CHUNKS(GATHER32_Z(48, 52, 56, 60, 64, 68, 72, 76), GATHER32_Z(80, 84, 88, 92, 96, 100, 104, 108), GATHER32_Z(112, 116, 120, 124, 128, 132, 136, 140), GATHER32_Z(144, 148, 152, 156, 160, 164, 168, 172))
	ADDQ $5120, DI
	ADDQ $176, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// packQ6_KVNNI packs each Q6_K super-block as 8 blocks of 32 codes (their
// 6-bit values, unsigned) with the int32 scales of their two 16-element
// sub-blocks at 512 and 576, 640 bytes a block, then the rows' d as
// float32: 5,184 bytes. Codes 32h+l, 32h+32+l, 32h+64+l, 32h+96+l (h a
// half of 128, l < 32) share ql byte 64h+l or 64h+32+l (low, high
// nibbles) and qh byte 32h+l (bit pairs 0-3). Z13 holds bytes 0x0f, Z14
// bytes 0x30.

// Q6_CODE stores a code dword of a block: the nibbles of z shifted by
// opn $nn, the two high bits of qh dword q shifted by oph $nh.
#define Q6_CODE(z, q, opn, nn, oph, nh, off) \
	opn $nn, z, Z20; \
	VPANDD Z13, Z20, Z20; \
	oph $nh, q, Z21; \
	VPANDD Z14, Z21, Z21; \
	VPORD Z21, Z20, Z20; \
	VMOVDQU32 Z20, off(DI)

// Q6_BLOCK stores the codes of the block at off from the ql dwords in
// Z0-Z7 and the qh dwords in Z24-Z31.
#define Q6_BLOCK(opn, nn, oph, nh, off) \
	Q6_CODE(Z0, Z24, opn, nn, oph, nh, off); \
	Q6_CODE(Z1, Z25, opn, nn, oph, nh, off+64); \
	Q6_CODE(Z2, Z26, opn, nn, oph, nh, off+128); \
	Q6_CODE(Z3, Z27, opn, nn, oph, nh, off+192); \
	Q6_CODE(Z4, Z28, opn, nn, oph, nh, off+256); \
	Q6_CODE(Z5, Z29, opn, nn, oph, nh, off+320); \
	Q6_CODE(Z6, Z30, opn, nn, oph, nh, off+384); \
	Q6_CODE(Z7, Z31, opn, nn, oph, nh, off+448)

// Q6_HALF packs the four blocks of a half at base, LOADQ, LOADA and LOADB
// loading its qh and its two runs of ql to Z0-Z7.
#define Q6_HALF(LOADQ, LOADA, LOADB, base) \
	LOADQ; \
	K5_QH; \
	LOADA; \
	Q6_BLOCK(VPSRLD, 0, VPSLLD, 4, base); \
	Q6_BLOCK(VPSRLD, 4, VPSRLD, 0, base+1280); \
	LOADB; \
	Q6_BLOCK(VPSRLD, 0, VPSLLD, 2, base+640); \
	Q6_BLOCK(VPSRLD, 4, VPSRLD, 2, base+1920)

// Q6_SCALES4 stores the four int8 scales in the bytes of dword s,
// sign-extended, at o0-o3.
#define Q6_SCALES4(s, o0, o1, o2, o3) \
	VPSLLD $24, s, Z20; \
	VPSRAD $24, Z20, Z20; \
	VMOVDQU32 Z20, o0(DI); \
	VPSLLD $16, s, Z20; \
	VPSRAD $24, Z20, Z20; \
	VMOVDQU32 Z20, o1(DI); \
	VPSLLD $8, s, Z20; \
	VPSRAD $24, Z20, Z20; \
	VMOVDQU32 Z20, o2(DI); \
	VPSRAD $24, s, Z20; \
	VMOVDQU32 Z20, o3(DI)

// Q6_SCALES stores the 16 scales from the scale dwords in Z0-Z3 and d
// from the high words of Z7.
#define Q6_SCALES \
	Q6_SCALES4(Z0, 512, 576, 1152, 1216); \
	Q6_SCALES4(Z1, 1792, 1856, 2432, 2496); \
	Q6_SCALES4(Z2, 3072, 3136, 3712, 3776); \
	Q6_SCALES4(Z3, 4352, 4416, 4992, 5056); \
	VPSRLD $16, Z7, Z7; \
	VPMOVDW Z7, Y20; \
	VCVTPH2PS Y20, Z20; \
	VMOVUPS Z20, 5120(DI)

// func packQ6_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ6_KVNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	MOVL $0x30303030, DX
	VPBROADCASTD DX, Z14
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	// The scales are bytes 192-207, d bytes 208-209: dword 3 of the 16
	// bytes at 194 holds d in its high word.
	LOAD16_Z(192, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19)
	LOAD16_Z(194, Z4, Z5, Z6, Z7, X4, X5, X6, X7)
	TRANSPOSE4(Z4, Z5, Z6, Z7, Z16, Z17, Z18, Z19)
	Q6_SCALES
	Q6_HALF(LOAD32_Z(128, 144), LOAD32_Z(0, 16), LOAD32_Z(32, 48), 0)
	Q6_HALF(LOAD32_Z(160, 176), LOAD32_Z(64, 80), LOAD32_Z(96, 112), 2560)
	ADDQ $5184, DI
	NEXT_BLOCK_Z(210)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(192, Z0)
	GATHER_Z(196, Z1)
	GATHER_Z(200, Z2)
	GATHER_Z(204, Z3)
	GATHER_Z(206, Z7)
	Q6_SCALES
	Q6_HALF(GATHER32_Z(128, 132, 136, 140, 144, 148, 152, 156), GATHER32_Z(0, 4, 8, 12, 16, 20, 24, 28), GATHER32_Z(32, 36, 40, 44, 48, 52, 56, 60), 0)
	Q6_HALF(GATHER32_Z(160, 164, 168, 172, 176, 180, 184, 188), GATHER32_Z(64, 68, 72, 76, 80, 84, 88, 92), GATHER32_Z(96, 100, 104, 108, 112, 116, 120, 124), 2560)
	ADDQ $5184, DI
	ADDQ $210, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// packQ3_KVNNI packs each Q3_K super-block as packQ6_KVNNI packs Q6_K,
// for mulPackedQ6_KVNNI: codes q = low bits + 4·high bit (0..7, the −4
// of a clear high bit coming out through the table as Q6_K's 32 does),
// the scales less 32 as int32, the rows' d. Codes 32h+32t+l (h a half of
// 128, t < 4, l < 32) are bit pair t of qs byte 32h+l (at 32) with bit
// 4h+t of hmask byte l (at 0), so Q6_BLOCK makes them with Z13 holding
// bytes 0x03 and Z14 bytes 0x04. Z12, Z15 and Z22 hold bytes 0x0f, 0x30
// and 0x20.

// Q3_SCALES stores the 16 scales from the scale dwords a0-a2 (bytes 96,
// 100, 104) as q3KScales unpacks them, a dword of four at a time, and d
// from the high words of dh (the dword at 106). Clobbers Z4-Z7, Z16.
#define Q3_SCALES(a0, a1, a2, dh) \
	VPANDD Z12, a0, Z4; \
	VPANDD Z13, a2, Z16; \
	VPSLLD $4, Z16, Z16; \
	VPORD Z16, Z4, Z4; \
	VPANDD Z12, a1, Z5; \
	VPSLLD $2, a2, Z16; \
	VPANDD Z15, Z16, Z16; \
	VPORD Z16, Z5, Z5; \
	VPSRLD $4, a0, Z6; \
	VPANDD Z12, Z6, Z6; \
	VPANDD Z15, a2, Z16; \
	VPORD Z16, Z6, Z6; \
	VPSRLD $4, a1, Z7; \
	VPANDD Z12, Z7, Z7; \
	VPSRLD $2, a2, Z16; \
	VPANDD Z15, Z16, Z16; \
	VPORD Z16, Z7, Z7; \
	VPSUBB Z22, Z4, Z4; \
	VPSUBB Z22, Z5, Z5; \
	VPSUBB Z22, Z6, Z6; \
	VPSUBB Z22, Z7, Z7; \
	Q6_SCALES4(Z4, 512, 576, 1152, 1216); \
	Q6_SCALES4(Z5, 1792, 1856, 2432, 2496); \
	Q6_SCALES4(Z6, 3072, 3136, 3712, 3776); \
	Q6_SCALES4(Z7, 4352, 4416, 4992, 5056); \
	VPSRLD $16, dh, dh; \
	VPMOVDW dh, Y20; \
	VCVTPH2PS Y20, Z20; \
	VMOVUPS Z20, 5120(DI)

// Q3_CODES packs the eight blocks, LOADH, LOAD0 and LOAD1 loading hmask
// and the qs of halves 0 and 1 to Z0-Z7.
#define Q3_CODES(LOADH, LOAD0, LOAD1) \
	LOADH; \
	K5_QH; \
	LOAD0; \
	Q6_BLOCK(VPSRLD, 0, VPSLLD, 2, 0); \
	Q6_BLOCK(VPSRLD, 2, VPSLLD, 1, 640); \
	Q6_BLOCK(VPSRLD, 4, VPSRLD, 0, 1280); \
	Q6_BLOCK(VPSRLD, 6, VPSRLD, 1, 1920); \
	LOAD1; \
	Q6_BLOCK(VPSRLD, 0, VPSRLD, 2, 2560); \
	Q6_BLOCK(VPSRLD, 2, VPSRLD, 3, 3200); \
	Q6_BLOCK(VPSRLD, 4, VPSRLD, 4, 3840); \
	Q6_BLOCK(VPSRLD, 6, VPSRLD, 5, 4480)

// func packQ3_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ3_KVNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x03030303, DX
	VPBROADCASTD DX, Z13
	MOVL $0x04040404, DX
	VPBROADCASTD DX, Z14
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z12
	MOVL $0x30303030, DX
	VPBROADCASTD DX, Z15
	MOVL $0x20202020, DX
	VPBROADCASTD DX, Z22
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	// A 16-byte load at 92 has the scale dwords as dwords 1-3; one at 94
	// has d (bytes 108-109) in the high word of dword 3, and keeps within
	// the 110-byte block.
	LOAD16_Z(92, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19)
	LOAD16_Z(94, Z8, Z9, Z10, Z11, X8, X9, X10, X11)
	TRANSPOSE4(Z8, Z9, Z10, Z11, Z16, Z17, Z18, Z19)
	Q3_SCALES(Z1, Z2, Z3, Z11)
	Q3_CODES(LOAD32_Z(0, 16), LOAD32_Z(32, 48), LOAD32_Z(64, 80))
	ADDQ $5184, DI
	NEXT_BLOCK_Z(110)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(96, Z1)
	GATHER_Z(100, Z2)
	GATHER_Z(104, Z3)
	GATHER_Z(106, Z8)
	Q3_SCALES(Z1, Z2, Z3, Z8)
	Q3_CODES(GATHER32_Z(0, 4, 8, 12, 16, 20, 24, 28), GATHER32_Z(32, 36, 40, 44, 48, 52, 56, 60), GATHER32_Z(64, 68, 72, 76, 80, 84, 88, 92))
	ADDQ $5184, DI
	ADDQ $110, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// packQ2_KVNNI packs each Q2_K super-block for mulPackedQ2_KVNNI: the
// codes and scales (low nibbles) as packQ6_KVNNI lays out Q6_K's, the
// rows' d at 5120 and dmin at 5184 as float32, and at 5248 the 16 mins
// (high nibbles) as int16 pairs, dword k holding mins 2k and 2k+1 as the
// Q8_K block's bsums pair them: 5,760 bytes. Codes 32h+32t+l are bit pair
// t of qs byte 32h+l (at 16). Z13 holds bytes 0x0f, Z14 bytes 0x03, Z15
// dwords 0x0f and Z22 dwords 0xf0000.

// Q2_MIN_PAIR stores at off the words (s>>lo)&15, (s>>hi)&15 <<16 of the
// scale dwords s, whose bytes' high nibbles are mins. Clobbers Z16, Z17.
#define Q2_MIN_PAIR(s, lo, sh, hi, off) \
	VPSRLD $lo, s, Z16; \
	VPANDD Z15, Z16, Z16; \
	sh $hi, s, Z17; \
	VPANDD Z22, Z17, Z17; \
	VPORD Z17, Z16, Z16; \
	VMOVDQU32 Z16, off(DI)

// Q2_SCALES stores the scales and mins from the scale dwords in Z0-Z3
// and d, dmin from the dwords in dd. Clobbers Z4-Z7, Z16, Z17, Z20.
#define Q2_SCALES(dd) \
	Q2_MIN_PAIR(Z0, 4, VPSLLD, 4, 5248); \
	Q2_MIN_PAIR(Z0, 20, VPSRLD, 12, 5312); \
	Q2_MIN_PAIR(Z1, 4, VPSLLD, 4, 5376); \
	Q2_MIN_PAIR(Z1, 20, VPSRLD, 12, 5440); \
	Q2_MIN_PAIR(Z2, 4, VPSLLD, 4, 5504); \
	Q2_MIN_PAIR(Z2, 20, VPSRLD, 12, 5568); \
	Q2_MIN_PAIR(Z3, 4, VPSLLD, 4, 5632); \
	Q2_MIN_PAIR(Z3, 20, VPSRLD, 12, 5696); \
	VPANDD Z13, Z0, Z4; \
	VPANDD Z13, Z1, Z5; \
	VPANDD Z13, Z2, Z6; \
	VPANDD Z13, Z3, Z7; \
	Q6_SCALES4(Z4, 512, 576, 1152, 1216); \
	Q6_SCALES4(Z5, 1792, 1856, 2432, 2496); \
	Q6_SCALES4(Z6, 3072, 3136, 3712, 3776); \
	Q6_SCALES4(Z7, 4352, 4416, 4992, 5056); \
	VPMOVDW dd, Y20; \
	VCVTPH2PS Y20, Z20; \
	VMOVUPS Z20, 5120(DI); \
	VPSRLD $16, dd, dd; \
	VPMOVDW dd, Y20; \
	VCVTPH2PS Y20, Z20; \
	VMOVUPS Z20, 5184(DI)

// Q2_CODE stores bit pair nn/2 of the qs bytes of z at off.
#define Q2_CODE(z, nn, off) \
	VPSRLD $nn, z, Z20; \
	VPANDD Z14, Z20, Z20; \
	VMOVDQU32 Z20, off(DI)

#define Q2_BLOCK(nn, off) \
	Q2_CODE(Z0, nn, off); \
	Q2_CODE(Z1, nn, off+64); \
	Q2_CODE(Z2, nn, off+128); \
	Q2_CODE(Z3, nn, off+192); \
	Q2_CODE(Z4, nn, off+256); \
	Q2_CODE(Z5, nn, off+320); \
	Q2_CODE(Z6, nn, off+384); \
	Q2_CODE(Z7, nn, off+448)

// Q2_HALF packs the four blocks of a half at base, LOAD loading its qs.
#define Q2_HALF(LOAD, base) \
	LOAD; \
	Q2_BLOCK(0, base); \
	Q2_BLOCK(2, base+640); \
	Q2_BLOCK(4, base+1280); \
	Q2_BLOCK(6, base+1920)

// func packQ2_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ2_KVNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	MOVL $0x03030303, DX
	VPBROADCASTD DX, Z14
	MOVL $0x0f, DX
	VPBROADCASTD DX, Z15
	MOVL $0xf0000, DX
	VPBROADCASTD DX, Z22
	CMPQ BX, $16
	JNE partial
	ROW_BASES

full:
	// The scales are bytes 0-15; d and dmin, bytes 80-83, are dword 3 of
	// the 16 bytes at 68.
	LOAD16_Z(68, Z8, Z9, Z10, Z11, X8, X9, X10, X11)
	TRANSPOSE4(Z8, Z9, Z10, Z11, Z16, Z17, Z18, Z19)
	LOAD16_Z(0, Z0, Z1, Z2, Z3, X0, X1, X2, X3)
	TRANSPOSE4(Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19)
	Q2_SCALES(Z11)
	Q2_HALF(LOAD32_Z(16, 32), 0)
	Q2_HALF(LOAD32_Z(48, 64), 2560)
	ADDQ $5760, DI
	NEXT_BLOCK_Z(84)
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Z(AX, BX)
	MOVL $0xffff, DX

gather:
	GATHER_Z(0, Z0)
	GATHER_Z(4, Z1)
	GATHER_Z(8, Z2)
	GATHER_Z(12, Z3)
	GATHER_Z(80, Z8)
	Q2_SCALES(Z8)
	Q2_HALF(GATHER32_Z(16, 20, 24, 28, 32, 36, 40, 44), 0)
	Q2_HALF(GATHER32_Z(48, 52, 56, 60, 64, 68, 72, 76), 2560)
	ADDQ $5760, DI
	ADDQ $84, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// The products also prefetch the prefetchLen bytes at prefetch, a cache
// line per block of a full tile: the next row group's weights, which
// packing reads in 16 (8) interleaved streams that the hardware prefetcher
// does not follow, and which would otherwise come from DRAM at full
// latency.

// The VNNI product walks the tokens eight at a time, tokens 0-3 at AX,
// AX+R8, AX+2·R8, AX+R9 (R8 the token stride, R9 three of them) and 4-7 the
// same from BX. Per block and token: the correction starts the integer sum,
// eight VPDPBUSD with the token's activation dwords broadcast from memory
// add the products of all 16 rows, and the sum is converted and scaled into
// the token's accumulator, Z24-Z31. DX walks the table, 64 bytes a block.

// LOAD_PACK_Z loads a packed block: codes to Z0-Z7, scales to Z8.
#define LOAD_PACK_Z \
	VMOVDQU32 (DI), Z0; \
	VMOVDQU32 64(DI), Z1; \
	VMOVDQU32 128(DI), Z2; \
	VMOVDQU32 192(DI), Z3; \
	VMOVDQU32 256(DI), Z4; \
	VMOVDQU32 320(DI), Z5; \
	VMOVDQU32 384(DI), Z6; \
	VMOVDQU32 448(DI), Z7; \
	VMOVUPS 512(DI), Z8

// DOT8 adds the products of code dword W with activation dword off of
// tokens 0-7 to Z16-Z23.
#define DOT8(off, W) \
	VPDPBUSD.BCST off(AX), W, Z16; \
	VPDPBUSD.BCST off(AX)(R8*1), W, Z17; \
	VPDPBUSD.BCST off(AX)(R8*2), W, Z18; \
	VPDPBUSD.BCST off(AX)(R9*1), W, Z19; \
	VPDPBUSD.BCST off(BX), W, Z20; \
	VPDPBUSD.BCST off(BX)(R8*1), W, Z21; \
	VPDPBUSD.BCST off(BX)(R8*2), W, Z22; \
	VPDPBUSD.BCST off(BX)(R9*1), W, Z23

// SCALE_Z adds integer sums i times the row scales times the token scale
// at s(DX) to acc. Clobbers i and t.
#define SCALE_Z(s, i, t, acc) \
	VCVTDQ2PS i, i; \
	VMULPS.BCST s(DX), Z8, t; \
	VFMADD231PS t, i, acc

// STORE_Z stores acc to the rows of K1 at AX, adding what is there for
// the rows of K2, and moves AX to the next token. Clobbers Z9.
#define STORE_Z(acc) \
	VMOVUPS.Z (AX), K2, Z9; \
	VADDPS Z9, acc, acc; \
	VMOVUPS acc, K1, (AX); \
	ADDQ R13, AX

// START_CORRECTION8 and START_CORRECTION1 start the sums at the table's
// corrections −mult·Σy.
#define START_CORRECTION8 \
	VPBROADCASTD 4(DX), Z16; \
	VPBROADCASTD 12(DX), Z17; \
	VPBROADCASTD 20(DX), Z18; \
	VPBROADCASTD 28(DX), Z19; \
	VPBROADCASTD 36(DX), Z20; \
	VPBROADCASTD 44(DX), Z21; \
	VPBROADCASTD 52(DX), Z22; \
	VPBROADCASTD 60(DX), Z23

#define START_CORRECTION1 VPBROADCASTD 4(DX), Z16

// START_ZERO8 and START_ZERO1 start the sums at zero: codes with a min
// are unsigned as they are.
#define START_ZERO8 \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

#define START_ZERO1 VPXORD Z16, Z16, Z16

// NO_MIN is the MIN step of the types without a min.
#define NO_MIN

// ADD_MIN8 and ADD_MIN1 add the rows' mins (after the scales in the
// packed block) times the tokens' d(x)·Σy from the table.
#define ADD_MIN8 \
	VMOVUPS 576(DI), Z8; \
	VFMADD231PS.BCST 4(DX), Z8, Z24; \
	VFMADD231PS.BCST 12(DX), Z8, Z25; \
	VFMADD231PS.BCST 20(DX), Z8, Z26; \
	VFMADD231PS.BCST 28(DX), Z8, Z27; \
	VFMADD231PS.BCST 36(DX), Z8, Z28; \
	VFMADD231PS.BCST 44(DX), Z8, Z29; \
	VFMADD231PS.BCST 52(DX), Z8, Z30; \
	VFMADD231PS.BCST 60(DX), Z8, Z31

#define ADD_MIN1 \
	VMOVUPS 576(DI), Z8; \
	VFMADD231PS.BCST 4(DX), Z8, Z24

// func mulPackedVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedVNNI(SB), NOSPLIT, $0-96
	MUL_PACKED_Z(576, 34, START_CORRECTION8, NO_MIN, START_CORRECTION1, NO_MIN)

// func mulPackedXSVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedXSVNNI(SB), NOSPLIT, $0-96
	MUL_PACKED_Z(576, 32, START_CORRECTION8, NO_MIN, START_CORRECTION1, NO_MIN)

// func mulPackedMinVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedMinVNNI(SB), NOSPLIT, $0-96
	MUL_PACKED_Z(640, 34, START_ZERO8, ADD_MIN8, START_ZERO1, ADD_MIN1)

// func mulPackedKMinVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedKMinVNNI(SB), NOSPLIT, $0-96
	MUL_PACKED_Z(640, 32, START_ZERO8, ADD_MIN8, START_ZERO1, ADD_MIN1)

// The Q6_K product keeps each token's integer sum over the super-block
// (Z24-Z31): per block and token, two sums of four VPDPBUSD, started at
// the table's −32·Σy of their sub-block of 16 (Z16-Z23), are multiplied by
// the rows' scales and added to it. The rows' d times the token's d then
// scale it once. A tile's table is 16 entries of 8 tokens, 1,024 bytes.

// LOAD_PACK_Q6 loads a packed block: codes to Z0-Z7, the scales of its
// sub-blocks to Z8 and Z9.
#define LOAD_PACK_Q6 \
	VMOVDQU32 (DI), Z0; \
	VMOVDQU32 64(DI), Z1; \
	VMOVDQU32 128(DI), Z2; \
	VMOVDQU32 192(DI), Z3; \
	VMOVDQU32 256(DI), Z4; \
	VMOVDQU32 320(DI), Z5; \
	VMOVDQU32 384(DI), Z6; \
	VMOVDQU32 448(DI), Z7; \
	VMOVDQU32 512(DI), Z8; \
	VMOVDQU32 576(DI), Z9

// SCALE_Q6_8 adds the sums Z16-Z23 times the row scales sc to Z24-Z31.
#define SCALE_Q6_8(sc) \
	VPMULLD sc, Z16, Z16; \
	VPADDD Z16, Z24, Z24; \
	VPMULLD sc, Z17, Z17; \
	VPADDD Z17, Z25, Z25; \
	VPMULLD sc, Z18, Z18; \
	VPADDD Z18, Z26, Z26; \
	VPMULLD sc, Z19, Z19; \
	VPADDD Z19, Z27, Z27; \
	VPMULLD sc, Z20, Z20; \
	VPADDD Z20, Z28, Z28; \
	VPMULLD sc, Z21, Z21; \
	VPADDD Z21, Z29, Z29; \
	VPMULLD sc, Z22, Z22; \
	VPADDD Z22, Z30, Z30; \
	VPMULLD sc, Z23, Z23; \
	VPADDD Z23, Z31, Z31

// STORE_Q6 scales the integer sum acc by the rows' d (Z8) times the
// token's d at s(DX) and stores it as STORE_Z does.
#define STORE_Q6(acc, s) \
	VCVTDQ2PS acc, acc; \
	VMULPS.BCST s(DX), Z8, Z9; \
	VMULPS Z9, acc, acc; \
	STORE_Z(acc)

// Q6_FINISH8 and Q6_FINISH1 scale and store the sums of eight tokens and
// of one, DI at the rows' d after the blocks.
#define Q6_FINISH8 \
	VMOVUPS (DI), Z8; \
	MOVQ R12, AX; \
	STORE_Q6(Z24, -1024); \
	STORE_Q6(Z25, -1016); \
	STORE_Q6(Z26, -1008); \
	STORE_Q6(Z27, -1000); \
	STORE_Q6(Z28, -992); \
	STORE_Q6(Z29, -984); \
	STORE_Q6(Z30, -976); \
	STORE_Q6(Z31, -968)

#define Q6_FINISH1 \
	VMOVUPS (DI), Z8; \
	MOVQ R12, AX; \
	STORE_Q6(Z24, -1024)

// func mulPackedQ6_KVNNI(pack *byte, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedQ6_KVNNI(SB), NOSPLIT, $0-88
	MUL_PACKED_Q6(Q6_FINISH8, Q6_FINISH1)

// The Q2_K product is the Q6_K one with the table's corrections zero, and
// with the min term −dmin·Σ m·Σy of each row and token added at the end:
// the mins, two int16 a dword (packQ2_KVNNI), meet the Q8_K block's bsums
// (at 2 past the activations' pointer after the blocks) in eight
// VPDPWSSD a token.

// Q2_MINS_TOKEN sets acc to Σ m·Σy of the rows' mins in Z0-Z7 and the
// bsums of the token whose Q8_K block's bsums lie at 2 past x.
#define Q2_MINS_TOKEN(x, acc) \
	VPXORD acc, acc, acc; \
	VPDPWSSD.BCST (2)x, Z0, acc; \
	VPDPWSSD.BCST (6)x, Z1, acc; \
	VPDPWSSD.BCST (10)x, Z2, acc; \
	VPDPWSSD.BCST (14)x, Z3, acc; \
	VPDPWSSD.BCST (18)x, Z4, acc; \
	VPDPWSSD.BCST (22)x, Z5, acc; \
	VPDPWSSD.BCST (26)x, Z6, acc; \
	VPDPWSSD.BCST (30)x, Z7, acc

// LOAD_MINS_Q2 loads the rows' d to Z8, dmin to Z10 and mins to Z0-Z7
// from DI, at the rows' d after the blocks.
#define LOAD_MINS_Q2 \
	VMOVUPS (DI), Z8; \
	VMOVUPS 64(DI), Z10; \
	VMOVDQU32 128(DI), Z0; \
	VMOVDQU32 192(DI), Z1; \
	VMOVDQU32 256(DI), Z2; \
	VMOVDQU32 320(DI), Z3; \
	VMOVDQU32 384(DI), Z4; \
	VMOVDQU32 448(DI), Z5; \
	VMOVDQU32 512(DI), Z6; \
	VMOVDQU32 576(DI), Z7

// STORE_Q2 is STORE_Q6 less the min sums m times dmin (Z10) times the
// token's d.
#define STORE_Q2(acc, m, s) \
	VCVTDQ2PS acc, acc; \
	VMULPS.BCST s(DX), Z8, Z9; \
	VMULPS Z9, acc, acc; \
	VCVTDQ2PS m, m; \
	VMULPS.BCST s(DX), Z10, Z9; \
	VFNMADD231PS Z9, m, acc; \
	STORE_Z(acc)

#define Q2_FINISH8 \
	LOAD_MINS_Q2; \
	Q2_MINS_TOKEN((AX), Z16); \
	Q2_MINS_TOKEN((AX)(R8*1), Z17); \
	Q2_MINS_TOKEN((AX)(R8*2), Z18); \
	Q2_MINS_TOKEN((AX)(R9*1), Z19); \
	Q2_MINS_TOKEN((BX), Z20); \
	Q2_MINS_TOKEN((BX)(R8*1), Z21); \
	Q2_MINS_TOKEN((BX)(R8*2), Z22); \
	Q2_MINS_TOKEN((BX)(R9*1), Z23); \
	MOVQ R12, AX; \
	STORE_Q2(Z24, Z16, -1024); \
	STORE_Q2(Z25, Z17, -1016); \
	STORE_Q2(Z26, Z18, -1008); \
	STORE_Q2(Z27, Z19, -1000); \
	STORE_Q2(Z28, Z20, -992); \
	STORE_Q2(Z29, Z21, -984); \
	STORE_Q2(Z30, Z22, -976); \
	STORE_Q2(Z31, Z23, -968)

#define Q2_FINISH1 \
	LOAD_MINS_Q2; \
	Q2_MINS_TOKEN((AX), Z16); \
	MOVQ R12, AX; \
	STORE_Q2(Z24, Z16, -1024)

// func mulPackedQ2_KVNNI(pack *byte, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedQ2_KVNNI(SB), NOSPLIT, $0-88
	MUL_PACKED_Q6(Q2_FINISH8, Q2_FINISH1)

// ROW_OFFSETS_Y sets Y10 to the byte offsets of 8 rows rowBytes apart,
// rows past nrows repeating the last. Clobbers nrows and Y11.
#define ROW_OFFSETS_Y(rowBytes, nrows) \
	VMOVDQU rowIota<>(SB), Y10; \
	DECQ nrows; \
	VMOVQ nrows, X11; \
	VPBROADCASTD X11, Y11; \
	VPMINSD Y11, Y10, Y10; \
	VMOVQ rowBytes, X11; \
	VPBROADCASTD X11, Y11; \
	VPMULLD Y11, Y10, Y10

// GATHER_Y loads the dword at off in each of the 8 rows at SI+Y10 into y.
#define GATHER_Y(off, y) \
	VPCMPEQD Y9, Y9, Y9; \
	VPGATHERDD Y9, off(SI)(Y10*1), y

// SCALES_Y turns the dwords in Y8, whose low words are fp16 scales, into
// 8 float32 scales.
#define SCALES_Y \
	VPSHUFB Y12, Y8, Y8; \
	VPERMQ $0x08, Y8, Y8; \
	VCVTPH2PS X8, Y8

// LOAD8_Y loads 16 bytes at off from each row of a full group of 8 so
// that TRANSPOSE4 leaves dword k of rows 0-7 in order in register k.
#define LOAD8_Y(off, y0, y1, y2, y3, x0, x1, x2, x3) \
	VMOVDQU off(SI), x0; \
	VINSERTI128 $1, off(R10), y0, y0; \
	VMOVDQU off(SI)(R8*1), x1; \
	VINSERTI128 $1, off(R10)(R8*1), y1, y1; \
	VMOVDQU off(SI)(R8*2), x2; \
	VINSERTI128 $1, off(R10)(R8*2), y2, y2; \
	VMOVDQU off(SI)(R9*1), x3; \
	VINSERTI128 $1, off(R10)(R9*1), y3, y3

// SCALES8_Y sets Y8 to the float32 scales of a full group of 8.
#define SCALES8_Y \
	INSERT4_SCALES(SI, 0, 1, 2, 3, X8); \
	INSERT4_SCALES(R10, 4, 5, 6, 7, X8); \
	VCVTPH2PS X8, Y8

// NIBBLES_Y splits the packed nibbles of dwords 0-3 in Y0-Y3 into the
// codes of dwords 0-7 in Y0-Y7. Y13 holds bytes 0x0f.
#define NIBBLES_Y \
	VPSRLD $4, Y0, Y4; \
	VPSRLD $4, Y1, Y5; \
	VPSRLD $4, Y2, Y6; \
	VPSRLD $4, Y3, Y7; \
	VPAND Y13, Y0, Y0; \
	VPAND Y13, Y1, Y1; \
	VPAND Y13, Y2, Y2; \
	VPAND Y13, Y3, Y3; \
	VPAND Y13, Y4, Y4; \
	VPAND Y13, Y5, Y5; \
	VPAND Y13, Y6, Y6; \
	VPAND Y13, Y7, Y7

// PACK_Q4_Y splits the packed nibbles of dwords 0-3 in Y0-Y3 into the
// codes of dwords 0-7 and stores them and the scales in Y8 at DI, which it
// advances. Y13 holds bytes 0x0f.
#define PACK_Q4_Y \
	NIBBLES_Y; \
	VMOVDQU Y0, (DI); \
	VMOVDQU Y1, 32(DI); \
	VMOVDQU Y2, 64(DI); \
	VMOVDQU Y3, 96(DI); \
	VMOVDQU Y4, 128(DI); \
	VMOVDQU Y5, 160(DI); \
	VMOVDQU Y6, 192(DI); \
	VMOVDQU Y7, 224(DI); \
	VMOVUPS Y8, 256(DI); \
	ADDQ $288, DI

// func packQ4_0AVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ4_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VMOVD DX, X13
	VPBROADCASTD X13, Y13
	CMPQ BX, $8
	JNE partial
	MOVQ AX, R8
	LEAQ (AX)(AX*2), R9
	LEAQ (SI)(R8*4), R10

full:
	LOAD8_Y(2, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	TRANSPOSE4(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	SCALES8_Y
	PACK_Q4_Y
	ADDQ $18, SI
	ADDQ $18, R10
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Y(AX, BX)
	VMOVDQU lowWords<>(SB), Y12

gather:
	GATHER_Y(2, Y0)
	GATHER_Y(6, Y1)
	GATHER_Y(10, Y2)
	GATHER_Y(14, Y3)
	GATHER_Y(0, Y8)
	SCALES_Y
	PACK_Q4_Y
	ADDQ $18, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// STORE_Q8_Y stores |codes| of dword k (in y) at 32·k(DI) and the codes
// at 256+32·k(DI). Clobbers Y9.
#define STORE_Q8_Y(y, abs, signed) \
	VPABSB y, Y9; \
	VMOVDQU Y9, abs(DI); \
	VMOVDQU y, signed(DI)

// PACK_Q8_Y stores the codes of dwords 0-7 in Y0-Y7 and the scales in Y8
// at DI, which it advances.
#define PACK_Q8_Y \
	STORE_Q8_Y(Y0, 0, 256); \
	STORE_Q8_Y(Y1, 32, 288); \
	STORE_Q8_Y(Y2, 64, 320); \
	STORE_Q8_Y(Y3, 96, 352); \
	STORE_Q8_Y(Y4, 128, 384); \
	STORE_Q8_Y(Y5, 160, 416); \
	STORE_Q8_Y(Y6, 192, 448); \
	STORE_Q8_Y(Y7, 224, 480); \
	VMOVUPS Y8, 512(DI); \
	ADDQ $544, DI

// func packQ8_0AVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packQ8_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	CMPQ BX, $8
	JNE partial
	MOVQ AX, R8
	LEAQ (AX)(AX*2), R9
	LEAQ (SI)(R8*4), R10

full:
	LOAD8_Y(2, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	LOAD8_Y(18, Y4, Y5, Y6, Y7, X4, X5, X6, X7)
	TRANSPOSE4(Y0, Y1, Y2, Y3, Y10, Y11, Y12, Y13)
	TRANSPOSE4(Y4, Y5, Y6, Y7, Y10, Y11, Y12, Y13)
	SCALES8_Y
	PACK_Q8_Y
	ADDQ $34, SI
	ADDQ $34, R10
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Y(AX, BX)
	VMOVDQU lowWords<>(SB), Y12

gather:
	GATHER_Y(2, Y0)
	GATHER_Y(6, Y1)
	GATHER_Y(10, Y2)
	GATHER_Y(14, Y3)
	GATHER_Y(18, Y4)
	GATHER_Y(22, Y5)
	GATHER_Y(26, Y6)
	GATHER_Y(30, Y7)
	GATHER_Y(0, Y8)
	SCALES_Y
	PACK_Q8_Y
	ADDQ $34, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// packIQ4_NLAVX2 packs IQ4_NL blocks as packQ8_0AVX2 packs Q8_0 blocks,
// the table values (from Y14) standing for the codes, so that
// mulPackedQ8_0AVX2 multiplies them.

// IQ4_NL_Y replaces the codes in Y0-Y7 by the table values they index.
#define IQ4_NL_Y \
	VPSHUFB Y0, Y14, Y0; \
	VPSHUFB Y1, Y14, Y1; \
	VPSHUFB Y2, Y14, Y2; \
	VPSHUFB Y3, Y14, Y3; \
	VPSHUFB Y4, Y14, Y4; \
	VPSHUFB Y5, Y14, Y5; \
	VPSHUFB Y6, Y14, Y6; \
	VPSHUFB Y7, Y14, Y7

// func packIQ4_NLAVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)
TEXT ·packIQ4_NLAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), AX
	MOVQ nrows+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ dst+32(FP), DI
	MOVL $0x0f0f0f0f, DX
	VMOVD DX, X13
	VPBROADCASTD X13, Y13
	VBROADCASTI128 iq4Signed<>(SB), Y14
	CMPQ BX, $8
	JNE partial
	MOVQ AX, R8
	LEAQ (AX)(AX*2), R9
	LEAQ (SI)(R8*4), R10

full:
	LOAD8_Y(2, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	TRANSPOSE4(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	SCALES8_Y
	NIBBLES_Y
	IQ4_NL_Y
	PACK_Q8_Y
	ADDQ $18, SI
	ADDQ $18, R10
	DECQ CX
	JNZ full
	VZEROUPPER
	RET

partial:
	ROW_OFFSETS_Y(AX, BX)
	VMOVDQU lowWords<>(SB), Y12

gather:
	GATHER_Y(2, Y0)
	GATHER_Y(6, Y1)
	GATHER_Y(10, Y2)
	GATHER_Y(14, Y3)
	GATHER_Y(0, Y8)
	SCALES_Y
	NIBBLES_Y
	IQ4_NL_Y
	PACK_Q8_Y
	ADDQ $18, SI
	DECQ CX
	JNZ gather
	VZEROUPPER
	RET

// The AVX2 products walk the tokens four at a time at AX, AX+R8, AX+2·R8,
// AX+R9, the codes of a packed block in Y0-Y7 and the tokens' accumulators
// in Y8-Y11; Y15 holds the mask of the rows to store. DX walks the table,
// 32 bytes a block.

// TOKEN_Q4_Y adds the product of the packed Q4_0 block at DI with the
// activation block at X (a memory operand without offset), table entry at
// s(DX), to acc. The products of nibbles (≤ 15) with codes (|y| ≤ 127) sum
// to at most 2·15·127 per VPMADDUBSW word and 8 of those fit an int16, so
// the words are added before one VPMADDWD widens them.
#define TOKEN_Q4_Y(X, s, acc) \
	VPBROADCASTD 2 X, Y12; \
	VPMADDUBSW Y12, Y0, Y13; \
	VPBROADCASTD 6 X, Y12; \
	VPMADDUBSW Y12, Y1, Y14; \
	VPADDW Y14, Y13, Y13; \
	VPBROADCASTD 10 X, Y12; \
	VPMADDUBSW Y12, Y2, Y14; \
	VPADDW Y14, Y13, Y13; \
	VPBROADCASTD 14 X, Y12; \
	VPMADDUBSW Y12, Y3, Y14; \
	VPADDW Y14, Y13, Y13; \
	VPBROADCASTD 18 X, Y12; \
	VPMADDUBSW Y12, Y4, Y14; \
	VPADDW Y14, Y13, Y13; \
	VPBROADCASTD 22 X, Y12; \
	VPMADDUBSW Y12, Y5, Y14; \
	VPADDW Y14, Y13, Y13; \
	VPBROADCASTD 26 X, Y12; \
	VPMADDUBSW Y12, Y6, Y14; \
	VPADDW Y14, Y13, Y13; \
	VPBROADCASTD 30 X, Y12; \
	VPMADDUBSW Y12, Y7, Y14; \
	VPADDW Y14, Y13, Y13; \
	VPMADDWD wordOnes<>(SB), Y13, Y13; \
	VPBROADCASTD s+4(DX), Y14; \
	VPADDD Y14, Y13, Y13; \
	VCVTDQ2PS Y13, Y13; \
	VBROADCASTSS s(DX), Y14; \
	VMULPS 256(DI), Y14, Y14; \
	VFMADD231PS Y14, Y13, acc

// Q8_TERM_Y adds the product of |code| dword Yk (signed codes at sign(DI))
// and activation dword off of X to the dword sums in sum. Products of
// |w| ≤ 128 and |y| ≤ 127 fit one VPMADDUBSW word pair but not more.
#define Q8_TERM_Y(X, off, Yk, sign, sum) \
	VPBROADCASTD off X, Y12; \
	VPSIGNB sign(DI), Y12, Y12; \
	VPMADDUBSW Y12, Yk, Y12; \
	VPMADDWD wordOnes<>(SB), Y12, Y12; \
	VPADDD Y12, sum, sum

// TOKEN_Q8_Y is TOKEN_Q4_Y for a packed Q8_0 block.
#define TOKEN_Q8_Y(X, s, acc) \
	VPBROADCASTD 2 X, Y12; \
	VPSIGNB 256(DI), Y12, Y12; \
	VPMADDUBSW Y12, Y0, Y12; \
	VPMADDWD wordOnes<>(SB), Y12, Y13; \
	Q8_TERM_Y(X, 6, Y1, 288, Y13); \
	Q8_TERM_Y(X, 10, Y2, 320, Y13); \
	Q8_TERM_Y(X, 14, Y3, 352, Y13); \
	Q8_TERM_Y(X, 18, Y4, 384, Y13); \
	Q8_TERM_Y(X, 22, Y5, 416, Y13); \
	Q8_TERM_Y(X, 26, Y6, 448, Y13); \
	Q8_TERM_Y(X, 30, Y7, 480, Y13); \
	VCVTDQ2PS Y13, Y13; \
	VBROADCASTSS s(DX), Y14; \
	VMULPS 512(DI), Y14, Y14; \
	VFMADD231PS Y14, Y13, acc

// LOAD_PACK_Y loads the codes of a packed block to Y0-Y7.
#define LOAD_PACK_Y \
	VMOVDQU (DI), Y0; \
	VMOVDQU 32(DI), Y1; \
	VMOVDQU 64(DI), Y2; \
	VMOVDQU 96(DI), Y3; \
	VMOVDQU 128(DI), Y4; \
	VMOVDQU 160(DI), Y5; \
	VMOVDQU 192(DI), Y6; \
	VMOVDQU 224(DI), Y7

// STORE_Y stores acc to out at AX, adding what is there if accumulating,
// and moves AX to the next token. All 8 rows are stored when R10 is 0,
// else the rows of the mask Y15, adding those of Y14. VMASKMOVPS is slow
// on AMD, so it is kept to row remainders and split long rows.
#define STORE_Y(acc, plain, next) \
	TESTQ R10, R10; \
	JZ plain; \
	VMASKMOVPS (AX), Y14, Y12; \
	VADDPS Y12, acc, acc; \
	VMASKMOVPS acc, Y15, (AX); \
	JMP next; \
plain: \
	VMOVUPS acc, (AX); \
next: \
	ADDQ R13, AX

// func mulPackedQ4_0AVX2(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedQ4_0AVX2(SB), NOSPLIT, $0-96
	MUL_PACKED_Y(TOKEN_Q4_Y, 288)

// func mulPackedQ8_0AVX2(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
TEXT ·mulPackedQ8_0AVX2(SB), NOSPLIT, $0-96
	MUL_PACKED_Y(TOKEN_Q8_Y, 544)
