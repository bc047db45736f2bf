//go:build amd64 && !purego

#include "textflag.h"
#include "panel_amd64.h"

// Float32 kernels for attention: a small matrix product and the softmax
// exponential. AVX2 + FMA.

// MATMUL_F32_YMM and MATMUL_F32_ZMM are the bodies of the attention
// products below: LOADB loads 16 (YMM) or 32 (ZMM) values of a row of B
// at CX into Y8/Y9 or Z8/Z9 as float32, BSHIFT is log2 of B's element
// size, BTILE the bytes of a tile's columns of B.
#define MATMUL_F32_YMM(LOADB, BSHIFT, BTILE) \
	MOVQ a+0(FP), SI; \
	MOVQ lda+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ b+16(FP), DI; \
	MOVQ ldb+24(FP), R9; \
	SHLQ $BSHIFT, R9; \
	MOVQ k+32(FP), R10; \
	MOVQ c+40(FP), DX; \
	MOVQ ldc+48(FP), R11; \
	SHLQ $2, R11; \
	MOVQ tiles+56(FP), R12; \
	LEAQ (SI)(R8*2), BX; \
	ADDQ R8, BX; \
tile: \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	MOVQ SI, AX; \
	MOVQ BX, R14; \
	MOVQ DI, CX; \
	MOVQ R10, R13; \
kloop: \
	LOADB; \
	VBROADCASTSS (AX), Y10; \
	VFMADD231PS Y8, Y10, Y0; \
	VFMADD231PS Y9, Y10, Y1; \
	VBROADCASTSS (AX)(R8*1), Y11; \
	VFMADD231PS Y8, Y11, Y2; \
	VFMADD231PS Y9, Y11, Y3; \
	VBROADCASTSS (AX)(R8*2), Y12; \
	VFMADD231PS Y8, Y12, Y4; \
	VFMADD231PS Y9, Y12, Y5; \
	VBROADCASTSS (R14), Y13; \
	VFMADD231PS Y8, Y13, Y6; \
	VFMADD231PS Y9, Y13, Y7; \
	ADDQ $4, AX; \
	ADDQ $4, R14; \
	ADDQ R9, CX; \
	DECQ R13; \
	JNZ kloop; \
	LEAQ (DX)(R11*2), CX; \
	ADDQ R11, CX; \
	CMPQ accumulate+64(FP), $0; \
	JEQ store; \
	VADDPS (DX), Y0, Y0; \
	VADDPS 32(DX), Y1, Y1; \
	VADDPS (DX)(R11*1), Y2, Y2; \
	VADDPS 32(DX)(R11*1), Y3, Y3; \
	VADDPS (DX)(R11*2), Y4, Y4; \
	VADDPS 32(DX)(R11*2), Y5, Y5; \
	VADDPS (CX), Y6, Y6; \
	VADDPS 32(CX), Y7, Y7; \
store: \
	VMOVUPS Y0, (DX); \
	VMOVUPS Y1, 32(DX); \
	VMOVUPS Y2, (DX)(R11*1); \
	VMOVUPS Y3, 32(DX)(R11*1); \
	VMOVUPS Y4, (DX)(R11*2); \
	VMOVUPS Y5, 32(DX)(R11*2); \
	VMOVUPS Y6, (CX); \
	VMOVUPS Y7, 32(CX); \
	ADDQ $BTILE, DI; \
	ADDQ $64, DX; \
	DECQ R12; \
	JNZ tile; \
	VZEROUPPER; \
	RET;

// MATMUL_F32_YMM_ROW is MATMUL_F32_YMM for one row of A and C: the same
// operations on each element of C (an FMA chain over k from zero, then C
// added), so that a row's results are the same bits whether it is
// multiplied alone or in a tile of four.
#define MATMUL_F32_YMM_ROW(LOADB, BSHIFT, BTILE) \
	MOVQ a+0(FP), SI; \
	MOVQ b+16(FP), DI; \
	MOVQ ldb+24(FP), R9; \
	SHLQ $BSHIFT, R9; \
	MOVQ k+32(FP), R10; \
	MOVQ c+40(FP), DX; \
	MOVQ tiles+56(FP), R12; \
rtile: \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	MOVQ SI, AX; \
	MOVQ DI, CX; \
	MOVQ R10, R13; \
rkloop: \
	LOADB; \
	VBROADCASTSS (AX), Y10; \
	VFMADD231PS Y8, Y10, Y0; \
	VFMADD231PS Y9, Y10, Y1; \
	ADDQ $4, AX; \
	ADDQ R9, CX; \
	DECQ R13; \
	JNZ rkloop; \
	CMPQ accumulate+64(FP), $0; \
	JEQ rstore; \
	VADDPS (DX), Y0, Y0; \
	VADDPS 32(DX), Y1, Y1; \
rstore: \
	VMOVUPS Y0, (DX); \
	VMOVUPS Y1, 32(DX); \
	ADDQ $BTILE, DI; \
	ADDQ $64, DX; \
	DECQ R12; \
	JNZ rtile; \
	VZEROUPPER; \
	RET;

// MATMUL_F32_YMM_8COL is MATMUL_F32_YMM for 8 columns (one register a
// row; tiles unused), and MATMUL_F32_YMM_ROW_8COL the same for one row:
// the columns past a multiple of 16, such as a value product's over a
// head dimension of 8. Each element of C is the same FMA chain as in the
// wider tiles.
#define MATMUL_F32_YMM_8COL(LOADB, BSHIFT) \
	MOVQ a+0(FP), SI; \
	MOVQ lda+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ b+16(FP), CX; \
	MOVQ ldb+24(FP), R9; \
	SHLQ $BSHIFT, R9; \
	MOVQ k+32(FP), R13; \
	MOVQ c+40(FP), DX; \
	MOVQ ldc+48(FP), R11; \
	SHLQ $2, R11; \
	LEAQ (SI)(R8*2), R14; \
	ADDQ R8, R14; \
	MOVQ SI, AX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y6, Y6, Y6; \
c8kloop: \
	LOADB; \
	VBROADCASTSS (AX), Y10; \
	VFMADD231PS Y8, Y10, Y0; \
	VBROADCASTSS (AX)(R8*1), Y11; \
	VFMADD231PS Y8, Y11, Y2; \
	VBROADCASTSS (AX)(R8*2), Y12; \
	VFMADD231PS Y8, Y12, Y4; \
	VBROADCASTSS (R14), Y13; \
	VFMADD231PS Y8, Y13, Y6; \
	ADDQ $4, AX; \
	ADDQ $4, R14; \
	ADDQ R9, CX; \
	DECQ R13; \
	JNZ c8kloop; \
	LEAQ (DX)(R11*2), CX; \
	ADDQ R11, CX; \
	CMPQ accumulate+64(FP), $0; \
	JEQ c8store; \
	VADDPS (DX), Y0, Y0; \
	VADDPS (DX)(R11*1), Y2, Y2; \
	VADDPS (DX)(R11*2), Y4, Y4; \
	VADDPS (CX), Y6, Y6; \
c8store: \
	VMOVUPS Y0, (DX); \
	VMOVUPS Y2, (DX)(R11*1); \
	VMOVUPS Y4, (DX)(R11*2); \
	VMOVUPS Y6, (CX); \
	VZEROUPPER; \
	RET;

#define MATMUL_F32_YMM_ROW_8COL(LOADB, BSHIFT) \
	MOVQ a+0(FP), AX; \
	MOVQ b+16(FP), CX; \
	MOVQ ldb+24(FP), R9; \
	SHLQ $BSHIFT, R9; \
	MOVQ k+32(FP), R13; \
	MOVQ c+40(FP), DX; \
	VXORPS Y0, Y0, Y0; \
r8kloop: \
	LOADB; \
	VBROADCASTSS (AX), Y10; \
	VFMADD231PS Y8, Y10, Y0; \
	ADDQ $4, AX; \
	ADDQ R9, CX; \
	DECQ R13; \
	JNZ r8kloop; \
	CMPQ accumulate+64(FP), $0; \
	JEQ r8store; \
	VADDPS (DX), Y0, Y0; \
r8store: \
	VMOVUPS Y0, (DX); \
	VZEROUPPER; \
	RET;

#define MATMUL_F32_ZMM(LOADB, BSHIFT, BTILE) \
	MOVQ a+0(FP), SI; \
	MOVQ lda+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ b+16(FP), DI; \
	MOVQ ldb+24(FP), R9; \
	SHLQ $BSHIFT, R9; \
	MOVQ k+32(FP), R10; \
	MOVQ c+40(FP), DX; \
	MOVQ ldc+48(FP), R11; \
	SHLQ $2, R11; \
	MOVQ tiles+56(FP), R12; \
	LEAQ (SI)(R8*2), BX; \
	ADDQ R8, BX; \
ztile: \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	MOVQ SI, AX; \
	MOVQ BX, R14; \
	MOVQ DI, CX; \
	MOVQ R10, R13; \
zkloop: \
	LOADB; \
	VBROADCASTSS (AX), Z10; \
	VFMADD231PS Z8, Z10, Z0; \
	VFMADD231PS Z9, Z10, Z1; \
	VBROADCASTSS (AX)(R8*1), Z11; \
	VFMADD231PS Z8, Z11, Z2; \
	VFMADD231PS Z9, Z11, Z3; \
	VBROADCASTSS (AX)(R8*2), Z12; \
	VFMADD231PS Z8, Z12, Z4; \
	VFMADD231PS Z9, Z12, Z5; \
	VBROADCASTSS (R14), Z13; \
	VFMADD231PS Z8, Z13, Z6; \
	VFMADD231PS Z9, Z13, Z7; \
	ADDQ $4, AX; \
	ADDQ $4, R14; \
	ADDQ R9, CX; \
	DECQ R13; \
	JNZ zkloop; \
	LEAQ (DX)(R11*2), CX; \
	ADDQ R11, CX; \
	CMPQ accumulate+64(FP), $0; \
	JEQ zstore; \
	VADDPS (DX), Z0, Z0; \
	VADDPS 64(DX), Z1, Z1; \
	VADDPS (DX)(R11*1), Z2, Z2; \
	VADDPS 64(DX)(R11*1), Z3, Z3; \
	VADDPS (DX)(R11*2), Z4, Z4; \
	VADDPS 64(DX)(R11*2), Z5, Z5; \
	VADDPS (CX), Z6, Z6; \
	VADDPS 64(CX), Z7, Z7; \
zstore: \
	VMOVUPS Z0, (DX); \
	VMOVUPS Z1, 64(DX); \
	VMOVUPS Z2, (DX)(R11*1); \
	VMOVUPS Z3, 64(DX)(R11*1); \
	VMOVUPS Z4, (DX)(R11*2); \
	VMOVUPS Z5, 64(DX)(R11*2); \
	VMOVUPS Z6, (CX); \
	VMOVUPS Z7, 64(CX); \
	ADDQ $BTILE, DI; \
	ADDQ $128, DX; \
	DECQ R12; \
	JNZ ztile; \
	VZEROUPPER; \
	RET;

// MATMUL_F32_ZMM8 is MATMUL_F32_ZMM for 8 rows of A: Z0-Z15 the 8×32
// tile of C, each load of B (Z16, Z17) used by 16 FMAs instead of 8,
// which halves the widening of a float16 B.
#define MATMUL_F32_ZMM8(LOADB, BSHIFT, BTILE) \
	MOVQ a+0(FP), SI; \
	MOVQ lda+8(FP), R8; \
	SHLQ $2, R8; \
	LEAQ (R8)(R8*2), R14; \
	MOVQ b+16(FP), DI; \
	MOVQ ldb+24(FP), R9; \
	SHLQ $BSHIFT, R9; \
	MOVQ k+32(FP), R10; \
	MOVQ c+40(FP), DX; \
	MOVQ ldc+48(FP), R11; \
	SHLQ $2, R11; \
	MOVQ tiles+56(FP), R12; \
z8tile: \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	MOVQ SI, AX; \
	LEAQ (SI)(R8*4), BX; \
	MOVQ DI, CX; \
	MOVQ R10, R13; \
z8kloop: \
	LOADB; \
	VBROADCASTSS (AX), Z18; \
	VFMADD231PS Z16, Z18, Z0; \
	VFMADD231PS Z17, Z18, Z1; \
	VBROADCASTSS (AX)(R8*1), Z19; \
	VFMADD231PS Z16, Z19, Z2; \
	VFMADD231PS Z17, Z19, Z3; \
	VBROADCASTSS (AX)(R8*2), Z20; \
	VFMADD231PS Z16, Z20, Z4; \
	VFMADD231PS Z17, Z20, Z5; \
	VBROADCASTSS (AX)(R14*1), Z21; \
	VFMADD231PS Z16, Z21, Z6; \
	VFMADD231PS Z17, Z21, Z7; \
	VBROADCASTSS (BX), Z18; \
	VFMADD231PS Z16, Z18, Z8; \
	VFMADD231PS Z17, Z18, Z9; \
	VBROADCASTSS (BX)(R8*1), Z19; \
	VFMADD231PS Z16, Z19, Z10; \
	VFMADD231PS Z17, Z19, Z11; \
	VBROADCASTSS (BX)(R8*2), Z20; \
	VFMADD231PS Z16, Z20, Z12; \
	VFMADD231PS Z17, Z20, Z13; \
	VBROADCASTSS (BX)(R14*1), Z21; \
	VFMADD231PS Z16, Z21, Z14; \
	VFMADD231PS Z17, Z21, Z15; \
	ADDQ $4, AX; \
	ADDQ $4, BX; \
	ADDQ R9, CX; \
	DECQ R13; \
	JNZ z8kloop; \
	LEAQ (DX)(R11*2), CX; \
	ADDQ R11, CX; \
	LEAQ (DX)(R11*4), BX; \
	LEAQ (CX)(R11*4), R13; \
	CMPQ accumulate+64(FP), $0; \
	JEQ z8store; \
	VADDPS (DX), Z0, Z0; \
	VADDPS 64(DX), Z1, Z1; \
	VADDPS (DX)(R11*1), Z2, Z2; \
	VADDPS 64(DX)(R11*1), Z3, Z3; \
	VADDPS (DX)(R11*2), Z4, Z4; \
	VADDPS 64(DX)(R11*2), Z5, Z5; \
	VADDPS (CX), Z6, Z6; \
	VADDPS 64(CX), Z7, Z7; \
	VADDPS (BX), Z8, Z8; \
	VADDPS 64(BX), Z9, Z9; \
	VADDPS (BX)(R11*1), Z10, Z10; \
	VADDPS 64(BX)(R11*1), Z11, Z11; \
	VADDPS (BX)(R11*2), Z12, Z12; \
	VADDPS 64(BX)(R11*2), Z13, Z13; \
	VADDPS (R13), Z14, Z14; \
	VADDPS 64(R13), Z15, Z15; \
z8store: \
	VMOVUPS Z0, (DX); \
	VMOVUPS Z1, 64(DX); \
	VMOVUPS Z2, (DX)(R11*1); \
	VMOVUPS Z3, 64(DX)(R11*1); \
	VMOVUPS Z4, (DX)(R11*2); \
	VMOVUPS Z5, 64(DX)(R11*2); \
	VMOVUPS Z6, (CX); \
	VMOVUPS Z7, 64(CX); \
	VMOVUPS Z8, (BX); \
	VMOVUPS Z9, 64(BX); \
	VMOVUPS Z10, (BX)(R11*1); \
	VMOVUPS Z11, 64(BX)(R11*1); \
	VMOVUPS Z12, (BX)(R11*2); \
	VMOVUPS Z13, 64(BX)(R11*2); \
	VMOVUPS Z14, (R13); \
	VMOVUPS Z15, 64(R13); \
	ADDQ $BTILE, DI; \
	ADDQ $128, DX; \
	DECQ R12; \
	JNZ z8tile; \
	VZEROUPPER; \
	RET;

#define LOADB_F32_Y VMOVUPS (CX), Y8; VMOVUPS 32(CX), Y9
#define LOADB_F16_Y VCVTPH2PS (CX), Y8; VCVTPH2PS 16(CX), Y9
#define LOADB_F32_Z VMOVUPS (CX), Z8; VMOVUPS 64(CX), Z9
#define LOADB_F16_Z VCVTPH2PS (CX), Z8; VCVTPH2PS 32(CX), Z9
#define LOADB_F32_Z8 VMOVUPS (CX), Z16; VMOVUPS 64(CX), Z17
#define LOADB_F16_Z8 VCVTPH2PS (CX), Z16; VCVTPH2PS 32(CX), Z17

// func matMulF32AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
//
// For each 16-column tile of B and C, Y0-Y7 accumulate the 4×16 tile of C
// (two registers a row). Each step of the k loop loads 16 floats of a row
// of B and broadcasts one element of each row of A: 6 loads for 8 FMAs,
// and eight independent accumulators cover the FMA latency.
TEXT ·matMulF32AVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM(LOADB_F32_Y, 2, 64)

// func matMulF32RowAVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
//
// matMulF32AVX2 for one row (lda and ldc unused): the rows past a
// multiple of four, such as a decode token's two or three query heads of
// a KV head.
TEXT ·matMulF32RowAVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM_ROW(LOADB_F32_Y, 2, 64)

// func matMulF32F16RowAVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
TEXT ·matMulF32F16RowAVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM_ROW(LOADB_F16_Y, 1, 32)

#define LOADB_F32_8 VMOVUPS (CX), Y8
#define LOADB_F16_8 VCVTPH2PS (CX), Y8

// func matMulF32Col8AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
//
// Rows 0-3 of C for 8 columns, tiles unused (as in the three below).
TEXT ·matMulF32Col8AVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM_8COL(LOADB_F32_8, 2)

// func matMulF32F16Col8AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
TEXT ·matMulF32F16Col8AVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM_8COL(LOADB_F16_8, 1)

// func matMulF32RowCol8AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
TEXT ·matMulF32RowCol8AVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM_ROW_8COL(LOADB_F32_8, 2)

// func matMulF32F16RowCol8AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
TEXT ·matMulF32F16RowCol8AVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM_ROW_8COL(LOADB_F16_8, 1)

// func matMulF32AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
//
// matMulF32AVX2 on ZMM registers: 32-column tiles, Z0-Z7 the 4×32 tile
// of C, twice the columns an FMA.
TEXT ·matMulF32AVX512(SB), NOSPLIT, $0-72
	MATMUL_F32_ZMM(LOADB_F32_Z, 2, 128)

// func matMulF32F16AVX2(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
//
// matMulF32AVX2 with B in float16, widened as it is loaded (the f16 KV
// cache's products).
TEXT ·matMulF32F16AVX2(SB), NOSPLIT, $0-72
	MATMUL_F32_YMM(LOADB_F16_Y, 1, 32)

// func matMulF32F16AVX512(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
TEXT ·matMulF32F16AVX512(SB), NOSPLIT, $0-72
	MATMUL_F32_ZMM(LOADB_F16_Z, 1, 64)

// The ZMM kernel matMulFloatPanelAVX512 multiplies tokens by a panel of
// 48 weight rows stored column by column (the pack*PanelAVX512 functions
// fill it): the 48 weights of a column are three registers, Z24-Z26, and a
// token's value in that column, broadcast, is multiplied into the token's
// three registers of accumulators (Z0-Z23 for eight tokens). A token's 48
// results are then its accumulators as they stand, stored side by side in
// the output, with no sums across lanes. A column step is 11 loads for 24
// FMAs: three of the panel, which streams from L2, and eight broadcasts
// from the tokens' rows.

// FP_TOKEN adds the column's weights times the token's value at src to the
// token's accumulators c0-c2.
#define FP_TOKEN(src, c0, c1, c2) \
	VBROADCASTSS src, Z28; \
	VFMADD231PS Z24, Z28, c0; \
	VFMADD231PS Z25, Z28, c1; \
	VFMADD231PS Z26, Z28, c2

// func matMulFloatPanelAVX512(x *float32, ldx int, p *float32, k int, c *float32, ldc int, m int, mask uint64, pf *byte, pfLines int)
//
// Eight tokens at a time, then four, two and one as m has them. Each
// column step of the eight-token loop prefetches a line of the weights the
// caller packs next (pfLines lines from pf), and once past them the last
// line again.
TEXT ·matMulFloatPanelAVX512(SB), NOSPLIT, $0-80
	MOVQ x+0(FP), SI
	MOVQ ldx+8(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9 // 3 tokens
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), R10
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R11
	SHLQ $2, R11
	MOVQ m+48(FP), R12
	MOVQ mask+56(FP), AX
	KMOVW AX, K1
	SHRQ $16, AX
	KMOVW AX, K2
	SHRQ $16, AX
	KMOVW AX, K3
	MOVQ pf+64(FP), CX
	MOVQ pfLines+72(FP), R15
	DECQ R15
	SHLQ $6, R15
	ADDQ CX, R15 // the last line to prefetch
	CMPQ R12, $8
	JLT  tail4

group8:
	FP_ZERO(Z0, Z1, Z2)
	FP_ZERO(Z3, Z4, Z5)
	FP_ZERO(Z6, Z7, Z8)
	FP_ZERO(Z9, Z10, Z11)
	FP_ZERO(Z12, Z13, Z14)
	FP_ZERO(Z15, Z16, Z17)
	FP_ZERO(Z18, Z19, Z20)
	FP_ZERO(Z21, Z22, Z23)
	FP_START

loop8:
	PREFETCHT0 (CX)
	ADDQ    $64, CX
	CMPQ    CX, R15
	CMOVQHI R15, CX
	FP_LOADW
	FP_TOKEN((AX), Z0, Z1, Z2)
	FP_TOKEN((AX)(R8*1), Z3, Z4, Z5)
	FP_TOKEN((AX)(R8*2), Z6, Z7, Z8)
	FP_TOKEN((AX)(R9*1), Z9, Z10, Z11)
	FP_TOKEN((BX), Z12, Z13, Z14)
	FP_TOKEN((BX)(R8*1), Z15, Z16, Z17)
	FP_TOKEN((BX)(R8*2), Z18, Z19, Z20)
	FP_TOKEN((BX)(R9*1), Z21, Z22, Z23)
	FP_NEXT
	DECQ R13
	JNZ  loop8
	FP_STORE(Z0, Z1, Z2)
	FP_STORE(Z3, Z4, Z5)
	FP_STORE(Z6, Z7, Z8)
	FP_STORE(Z9, Z10, Z11)
	FP_STORE(Z12, Z13, Z14)
	FP_STORE(Z15, Z16, Z17)
	FP_STORE(Z18, Z19, Z20)
	FP_STORE(Z21, Z22, Z23)
	LEAQ (SI)(R8*8), SI
	SUBQ $8, R12
	CMPQ R12, $8
	JGE  group8

tail4:
	TESTQ $4, R12
	JZ    tail2
	FP_ZERO(Z0, Z1, Z2)
	FP_ZERO(Z3, Z4, Z5)
	FP_ZERO(Z6, Z7, Z8)
	FP_ZERO(Z9, Z10, Z11)
	FP_START

loop4:
	FP_LOADW
	FP_TOKEN((AX), Z0, Z1, Z2)
	FP_TOKEN((AX)(R8*1), Z3, Z4, Z5)
	FP_TOKEN((AX)(R8*2), Z6, Z7, Z8)
	FP_TOKEN((AX)(R9*1), Z9, Z10, Z11)
	FP_NEXT
	DECQ R13
	JNZ  loop4
	FP_STORE(Z0, Z1, Z2)
	FP_STORE(Z3, Z4, Z5)
	FP_STORE(Z6, Z7, Z8)
	FP_STORE(Z9, Z10, Z11)
	LEAQ (SI)(R8*4), SI

tail2:
	TESTQ $2, R12
	JZ    tail1
	FP_ZERO(Z0, Z1, Z2)
	FP_ZERO(Z3, Z4, Z5)
	FP_START

loop2:
	FP_LOADW
	FP_TOKEN((AX), Z0, Z1, Z2)
	FP_TOKEN((AX)(R8*1), Z3, Z4, Z5)
	FP_NEXT
	DECQ R13
	JNZ  loop2
	FP_STORE(Z0, Z1, Z2)
	FP_STORE(Z3, Z4, Z5)
	LEAQ (SI)(R8*2), SI

tail1:
	TESTQ $1, R12
	JZ    done
	FP_ZERO(Z0, Z1, Z2)
	FP_START

loop1:
	FP_LOADW
	FP_TOKEN((AX), Z0, Z1, Z2)
	FP_NEXT
	DECQ R13
	JNZ  loop1
	FP_STORE(Z0, Z1, Z2)

done:
	VZEROUPPER
	RET

// The pack*PanelAVX512 functions widen 16 rows of k weights (k > 0, a
// multiple of 16) and store them transposed into a 48-row panel: p[l*48+i]
// is row i's weight l. Each 16×16 block is 16 registers of rows,
// transposed in four rounds of shuffles: pairs of rows interleaved, then
// pairs of pairs, which leaves in each 128-bit lane four rows of one
// column, then the lanes exchanged twice. That is 64 shuffles for 256
// weights, which the products then use once per token. The rows of a
// panel not prefetched while the kernel multiplied the one before come
// from memory as 16 short streams at once, which the hardware prefetcher
// followed late: prefetching each row 512 bytes ahead made such a pass
// ~8% faster.

// PANEL_T16 transposes the 16×16 block in Z0-Z15 (row i in Zi) into
// Z0-Z15 (column j in Zj). Clobbers Z16-Z31.
#define PANEL_T16 \
	VUNPCKLPS Z1, Z0, Z16; \
	VUNPCKHPS Z1, Z0, Z17; \
	VUNPCKLPS Z3, Z2, Z18; \
	VUNPCKHPS Z3, Z2, Z19; \
	VUNPCKLPS Z5, Z4, Z20; \
	VUNPCKHPS Z5, Z4, Z21; \
	VUNPCKLPS Z7, Z6, Z22; \
	VUNPCKHPS Z7, Z6, Z23; \
	VUNPCKLPS Z9, Z8, Z24; \
	VUNPCKHPS Z9, Z8, Z25; \
	VUNPCKLPS Z11, Z10, Z26; \
	VUNPCKHPS Z11, Z10, Z27; \
	VUNPCKLPS Z13, Z12, Z28; \
	VUNPCKHPS Z13, Z12, Z29; \
	VUNPCKLPS Z15, Z14, Z30; \
	VUNPCKHPS Z15, Z14, Z31; \
	VUNPCKLPD Z18, Z16, Z0; \
	VUNPCKHPD Z18, Z16, Z1; \
	VUNPCKLPD Z19, Z17, Z2; \
	VUNPCKHPD Z19, Z17, Z3; \
	VUNPCKLPD Z22, Z20, Z4; \
	VUNPCKHPD Z22, Z20, Z5; \
	VUNPCKLPD Z23, Z21, Z6; \
	VUNPCKHPD Z23, Z21, Z7; \
	VUNPCKLPD Z26, Z24, Z8; \
	VUNPCKHPD Z26, Z24, Z9; \
	VUNPCKLPD Z27, Z25, Z10; \
	VUNPCKHPD Z27, Z25, Z11; \
	VUNPCKLPD Z30, Z28, Z12; \
	VUNPCKHPD Z30, Z28, Z13; \
	VUNPCKLPD Z31, Z29, Z14; \
	VUNPCKHPD Z31, Z29, Z15; \
	VSHUFF32X4 $0x88, Z4, Z0, Z16; \
	VSHUFF32X4 $0xdd, Z4, Z0, Z20; \
	VSHUFF32X4 $0x88, Z12, Z8, Z24; \
	VSHUFF32X4 $0xdd, Z12, Z8, Z28; \
	VSHUFF32X4 $0x88, Z5, Z1, Z17; \
	VSHUFF32X4 $0xdd, Z5, Z1, Z21; \
	VSHUFF32X4 $0x88, Z13, Z9, Z25; \
	VSHUFF32X4 $0xdd, Z13, Z9, Z29; \
	VSHUFF32X4 $0x88, Z6, Z2, Z18; \
	VSHUFF32X4 $0xdd, Z6, Z2, Z22; \
	VSHUFF32X4 $0x88, Z14, Z10, Z26; \
	VSHUFF32X4 $0xdd, Z14, Z10, Z30; \
	VSHUFF32X4 $0x88, Z7, Z3, Z19; \
	VSHUFF32X4 $0xdd, Z7, Z3, Z23; \
	VSHUFF32X4 $0x88, Z15, Z11, Z27; \
	VSHUFF32X4 $0xdd, Z15, Z11, Z31; \
	VSHUFF32X4 $0x88, Z24, Z16, Z0; \
	VSHUFF32X4 $0xdd, Z24, Z16, Z8; \
	VSHUFF32X4 $0x88, Z28, Z20, Z4; \
	VSHUFF32X4 $0xdd, Z28, Z20, Z12; \
	VSHUFF32X4 $0x88, Z25, Z17, Z1; \
	VSHUFF32X4 $0xdd, Z25, Z17, Z9; \
	VSHUFF32X4 $0x88, Z29, Z21, Z5; \
	VSHUFF32X4 $0xdd, Z29, Z21, Z13; \
	VSHUFF32X4 $0x88, Z26, Z18, Z2; \
	VSHUFF32X4 $0xdd, Z26, Z18, Z10; \
	VSHUFF32X4 $0x88, Z30, Z22, Z6; \
	VSHUFF32X4 $0xdd, Z30, Z22, Z14; \
	VSHUFF32X4 $0x88, Z27, Z19, Z3; \
	VSHUFF32X4 $0xdd, Z27, Z19, Z11; \
	VSHUFF32X4 $0x88, Z31, Z23, Z7; \
	VSHUFF32X4 $0xdd, Z31, Z23, Z15

// PANEL_STORE16 stores Z0-Z15, 16 columns, at DI and every 192 bytes on.
#define PANEL_STORE16 \
	VMOVUPS Z0, (DI); \
	VMOVUPS Z1, 192(DI); \
	VMOVUPS Z2, 384(DI); \
	VMOVUPS Z3, 576(DI); \
	VMOVUPS Z4, 768(DI); \
	VMOVUPS Z5, 960(DI); \
	VMOVUPS Z6, 1152(DI); \
	VMOVUPS Z7, 1344(DI); \
	VMOVUPS Z8, 1536(DI); \
	VMOVUPS Z9, 1728(DI); \
	VMOVUPS Z10, 1920(DI); \
	VMOVUPS Z11, 2112(DI); \
	VMOVUPS Z12, 2304(DI); \
	VMOVUPS Z13, 2496(DI); \
	VMOVUPS Z14, 2688(DI); \
	VMOVUPS Z15, 2880(DI)

// ROW_F32, ROW_F16 and ROW_BF16 load one row's 16 columns at m into z as
// float32 and prefetch pm, the row 512 bytes on.
#define ROW_F32(m, pm, z) \
	VMOVUPS m, z; \
	PREFETCHT0 pm

#define ROW_F16(m, pm, z) \
	VCVTPH2PS m, z; \
	PREFETCHT0 pm

#define ROW_BF16(m, pm, z) \
	VPMOVZXWD m, z; \
	VPSLLD $16, z, z; \
	PREFETCHT0 pm

// ROWS4 loads four rows, R8 bytes apart from AX (R9 three of them), into
// z0-z3 with ROW, then moves AX on four rows.
#define ROWS4(ROW, z0, z1, z2, z3) \
	ROW((AX), 512(AX), z0); \
	ROW((AX)(R8*1), 512(AX)(R8*1), z1); \
	ROW((AX)(R8*2), 512(AX)(R8*2), z2); \
	ROW((AX)(R9*1), 512(AX)(R9*1), z3); \
	LEAQ (AX)(R8*4), AX

// PANEL_LOAD16 loads 16 columns of 16 rows, R8 bytes apart, from SI into
// Z0-Z15 as float32 with ROW (ROW_F32, ROW_F16 or ROW_BF16), prefetching
// each row 512 bytes on. Clobbers AX.
#define PANEL_LOAD16(ROW) \
	MOVQ SI, AX; \
	ROWS4(ROW, Z0, Z1, Z2, Z3); \
	ROWS4(ROW, Z4, Z5, Z6, Z7); \
	ROWS4(ROW, Z8, Z9, Z10, Z11); \
	ROWS4(ROW, Z12, Z13, Z14, Z15)

// PANEL_PACK is the body of the pack functions: 16 columns at a time of
// the 16 rows at SI (R8 bytes apart), loaded with ROW, transposed and
// stored at DI, SI moving on colBytes, until CX columns are done. The
// TEXT loads SI, R8, DI and CX itself.
#define PANEL_PACK(ROW, colBytes, loop) \
	LEAQ (R8)(R8*2), R9; \
loop: \
	PANEL_LOAD16(ROW); \
	PANEL_T16; \
	PANEL_STORE16; \
	ADDQ $colBytes, SI; \
	ADDQ $3072, DI; \
	SUBQ $16, CX; \
	JNZ loop; \
	VZEROUPPER; \
	RET

// func packF32PanelAVX512(w *float32, ldw int, p *float32, k int)
TEXT ·packF32PanelAVX512(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	PANEL_PACK(ROW_F32, 64, packf32loop)

// func packF16PanelAVX512(w *uint16, ldw int, p *float32, k int)
TEXT ·packF16PanelAVX512(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	PANEL_PACK(ROW_F16, 32, packf16loop)

// func packBF16PanelAVX512(w *uint16, ldw int, p *float32, k int)
TEXT ·packBF16PanelAVX512(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	PANEL_PACK(ROW_BF16, 32, packbf16loop)

// Constants of expSumAVX2 that do not fit in registers, 8 copies each.
#define CONST8(name, bits) \
	DATA name<>+0x00(SB)/4, bits; \
	DATA name<>+0x04(SB)/4, bits; \
	DATA name<>+0x08(SB)/4, bits; \
	DATA name<>+0x0c(SB)/4, bits; \
	DATA name<>+0x10(SB)/4, bits; \
	DATA name<>+0x14(SB)/4, bits; \
	DATA name<>+0x18(SB)/4, bits; \
	DATA name<>+0x1c(SB)/4, bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

CONST8(expLn2Lo, $0x35bfbe8e)
CONST8(expP4, $0x3f7ffff6)
CONST8(expOne, $0x3f800000)
CONST8(expAbs, $0x7fffffff)
CONST8(exp126, $0x42fc0000)
CONST8(exp192, $0x43400000)
CONST8(expG, $0x82000000)
CONST8(expBias, $0x7f000000)

// BROADCAST_CONST loads a float32 constant given by its bits into all
// lanes of y. Clobbers AX and X0.
#define BROADCAST_CONST(bits, y) \
	MOVL bits, AX; \
	VMOVD AX, X0; \
	VPBROADCASTD X0, y

// EXP_SETUP loads the constants of EXP into Y8-Y14.
#define EXP_SETUP \
	BROADCAST_CONST($0x3fb8aa3b, Y14); /* log2 e */ \
	BROADCAST_CONST($0x4b400000, Y13); /* 0x1.8p23 */ \
	BROADCAST_CONST($0x3f317200, Y12); /* ln2hi */ \
	BROADCAST_CONST($0x3c072010, Y11); /* p0 */ \
	BROADCAST_CONST($0x3d2b9f17, Y10); /* p1 */ \
	BROADCAST_CONST($0x3e2aaf33, Y9);  /* p2 */ \
	BROADCAST_CONST($0x3efffedb, Y8)   /* p3 */

// EXP sets Y5 to e^x for the 8 lanes of x in Y0: the steps of expf in
// exp.go. Lanes with |n| > 126 need the two-factor scaling of EXP_WIDE,
// which jumps back to after the JNZ: softmax never needs it unless a score
// is 87 below the maximum. Clobbers Y0-Y6 and AX.
#define EXP(wide) \
	VMOVAPS Y13, Y1; \
	VFMADD231PS Y14, Y0, Y1;              /* z = x·log2e + 0x1.8p23 */ \
	VSUBPS Y13, Y1, Y2;                   /* n = z − 0x1.8p23 */ \
	VFNMADD231PS Y12, Y2, Y0;             /* b = x − n·ln2hi */ \
	VFNMADD231PS expLn2Lo<>(SB), Y2, Y0;  /* b −= n·ln2lo */ \
	VPSLLD $23, Y1, Y1;                   /* e = n in the exponent field */ \
	VMULPS Y0, Y0, Y3;                    /* u = b² */ \
	VMOVAPS Y11, Y4; \
	VFMADD213PS Y10, Y0, Y4;              /* p0·b + p1 */ \
	VMOVAPS Y9, Y5; \
	VFMADD213PS Y8, Y0, Y5;               /* p2·b + p3 */ \
	VFMADD213PS Y5, Y3, Y4;               /* (p0·b + p1)·u + p2·b + p3 */ \
	VMULPS expP4<>(SB), Y0, Y5;           /* p4·b */ \
	VFMADD213PS Y5, Y3, Y4;               /* j = e^b − 1 */ \
	VPADDD expOne<>(SB), Y1, Y5;          /* k = 2^n */ \
	VFMADD213PS Y5, Y4, Y5;               /* j·k + k */ \
	VANDPS expAbs<>(SB), Y2, Y6; \
	VCMPPS $0x1e, exp126<>(SB), Y6, Y6;   /* |n| > 126 (false for NaN) */ \
	VMOVMSKPS Y6, AX; \
	TESTL AX, AX; \
	JNZ wide

// EXP_WIDE recomputes Y5 in the lanes of Y6 (|n| > 126) from what EXP
// left in Y1, Y2 and Y4: 2^n = s1·s2 with s1 = 2^-125 for n ≤ 0, 2^127
// otherwise, and s1² where |n| > 192.
#define EXP_WIDE(back) \
	VXORPS Y3, Y3, Y3; \
	VCMPPS $0x12, Y3, Y2, Y3;             /* n ≤ 0 */ \
	VANDPS expG<>(SB), Y3, Y3;            /* g */ \
	VPADDD expBias<>(SB), Y3, Y0;         /* s1 = g + 0x7f000000 */ \
	VPSUBD Y3, Y1, Y1;                    /* s2 = e − g */ \
	VFMADD213PS Y1, Y4, Y1;               /* s2·j + s2 */ \
	VMULPS Y0, Y1, Y1;                    /* · s1 */ \
	VBLENDVPS Y6, Y1, Y5, Y5; \
	VMULPS Y0, Y0, Y0;                    /* s1² */ \
	VANDPS expAbs<>(SB), Y2, Y3; \
	VCMPPS $0x1e, exp192<>(SB), Y3, Y3;   /* |n| > 192 */ \
	VBLENDVPS Y3, Y0, Y5, Y5; \
	JMP back

// func expSumAVX2(x *float32, n int, shift float32) float32
TEXT ·expSumAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	EXP_SETUP
	VBROADCASTSS shift+16(FP), Y15
	VXORPS Y7, Y7, Y7 // sum

loop:
	VMOVUPS (SI), Y0
	VSUBPS Y15, Y0, Y0
	EXP(wide)

next:
	VMOVUPS Y5, (SI)
	VADDPS Y5, Y7, Y7
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ loop

	VEXTRACTF128 $1, Y7, X0
	VADDPS X7, X0, X0
	VPERMILPS $0x4e, X0, X1
	VADDPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VADDSS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

wide:
	EXP_WIDE(next)

// func swiGLUAVX2(dst, gate, up *float32, n int)
//
// dst = gate·up / (1 + e^−gate), 8 lanes at a time, with gate in Y15.
TEXT ·swiGLUAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DX
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DI
	MOVQ n+24(FP), CX
	EXP_SETUP
	BROADCAST_CONST($0x80000000, Y7) // sign bit

loop:
	VMOVUPS (SI), Y15
	VXORPS Y7, Y15, Y0
	EXP(wide)

next:
	VADDPS expOne<>(SB), Y5, Y5 // 1 + e^−gate (expOne is 1.0)
	VMULPS (DI), Y15, Y15
	VDIVPS Y5, Y15, Y15
	VMOVUPS Y15, (DX)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

wide:
	EXP_WIDE(next)

// func maxAVX2(x *float32, n int) float32
//
// The maximum of n ≥ 8 floats, or NaN if there is one: four accumulators
// of maxima and one of unordered comparisons. A tail shorter than 8 is
// read as the last 8 elements again, which does not change the result.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ -32(SI)(CX*4), DX // the last 8 elements
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VXORPS Y4, Y4, Y4 // NaN lanes

loop32:
	CMPQ CX, $32
	JL loop8
	VMOVUPS (SI), Y5
	VMOVUPS 32(SI), Y6
	VMOVUPS 64(SI), Y7
	VMOVUPS 96(SI), Y8
	VMAXPS Y5, Y0, Y0
	VMAXPS Y6, Y1, Y1
	VMAXPS Y7, Y2, Y2
	VMAXPS Y8, Y3, Y3
	VCMPPS $3, Y5, Y5, Y5 // unordered: NaN
	VCMPPS $3, Y6, Y6, Y6
	VCMPPS $3, Y7, Y7, Y7
	VCMPPS $3, Y8, Y8, Y8
	VORPS Y5, Y6, Y5
	VORPS Y7, Y8, Y7
	VORPS Y5, Y4, Y4
	VORPS Y7, Y4, Y4
	ADDQ $128, SI
	SUBQ $32, CX
	JMP loop32

loop8:
	CMPQ CX, $8
	JL tail
	VMOVUPS (SI), Y5
	VMAXPS Y5, Y0, Y0
	VCMPPS $3, Y5, Y5, Y5
	VORPS Y5, Y4, Y4
	ADDQ $32, SI
	SUBQ $8, CX
	JMP loop8

tail:
	TESTQ CX, CX
	JZ reduce
	VMOVUPS (DX), Y5
	VMAXPS Y5, Y0, Y0
	VCMPPS $3, Y5, Y5, Y5
	VORPS Y5, Y4, Y4

reduce:
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXSS X1, X0, X0
	VMOVMSKPS Y4, AX
	TESTL AX, AX
	JZ done
	MOVL $0x7fc00000, AX // NaN
	VMOVD AX, X0

done:
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET

// func toBF16AVX512(x *float32, dst *uint16, n int)
//
// dst[i] = F32ToBF16(x[i]) for n > 0, a multiple of 16: rounded to nearest
// with ties to even in integer arithmetic, (u + 0x7fff + bit 16 of u) >> 16,
// so subnormals stay (VCVTNEPS2BF16 would flush them), and a NaN's upper
// half with its quiet bit set.
TEXT ·toBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	MOVL $1, AX
	VPBROADCASTD AX, Z31
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z30
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z29
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z28
	MOVL $0x40, AX
	VPBROADCASTD AX, Z27

bf16cvt:
	VMOVDQU32 (SI), Z0
	VPSRLD    $16, Z0, Z1
	VPANDD    Z31, Z1, Z2
	VPADDD    Z30, Z0, Z3
	VPADDD    Z2, Z3, Z3
	VPSRLD    $16, Z3, Z3
	VPANDD    Z29, Z0, Z4
	VPCMPUD   $6, Z28, Z4, K1 // |u| > +Inf: NaN
	VPORD     Z27, Z1, K1, Z3
	VPMOVDW   Z3, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       bf16cvt
	VZEROUPPER
	RET

// func matMulF32x8AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
//
// matMulF32AVX512 for rows 0-7 of C.
TEXT ·matMulF32x8AVX512(SB), NOSPLIT, $0-72
	MATMUL_F32_ZMM8(LOADB_F32_Z8, 2, 128)

// func matMulF32F16x8AVX512(a *float32, lda int, b *uint16, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
TEXT ·matMulF32F16x8AVX512(SB), NOSPLIT, $0-72
	MATMUL_F32_ZMM8(LOADB_F16_Z8, 1, 64)

// The AVX2 panel's steps (matMulFloatPanelAVX2): PANEL_FMA3 adds the
// column's 24 weights (Y12-Y14) times the token's value at src to its
// accumulators; PANEL_ADD3 adds the token's 24 results at CX, under the
// row masks in Y12-Y14, to them; PANEL_STORE3 stores them there.
#define PANEL_FMA3(src, c0, c1, c2) \
	VBROADCASTSS src, Y15; \
	VFMADD231PS Y12, Y15, c0; \
	VFMADD231PS Y13, Y15, c1; \
	VFMADD231PS Y14, Y15, c2

#define PANEL_ADD3(c0, c1, c2) \
	VMASKMOVPS (CX), Y12, Y15; \
	VADDPS Y15, c0, c0; \
	VMASKMOVPS 32(CX), Y13, Y15; \
	VADDPS Y15, c1, c1; \
	VMASKMOVPS 64(CX), Y14, Y15; \
	VADDPS Y15, c2, c2

#define PANEL_STORE3(c0, c1, c2) \
	VMASKMOVPS c0, Y12, (CX); \
	VMASKMOVPS c1, Y13, 32(CX); \
	VMASKMOVPS c2, Y14, 64(CX)

// func matMulFloatPanelAVX2(x *float32, ldx int, p *float32, k int, c *float32, ldc int, m int, mask *int32, accumulate int)
//
// matMulFloatPanelAVX512 on YMM registers: a panel of 24 rows (three
// registers a column, Y12-Y14) times four tokens at a time (Y0-Y11 their
// accumulators, Y15 the broadcast value): a column step is 7 loads for 12
// FMAs, and twelve independent accumulators cover the FMA latency. Tokens
// past a multiple of four take a one-token loop. A token's 24 results are
// stored under the 24 lanes of mask (-1: the row is in the panel), or
// added to what is there when accumulate is not 0.
TEXT ·matMulFloatPanelAVX2(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), SI
	MOVQ ldx+8(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9 // 3 tokens
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), R10
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R11
	SHLQ $2, R11
	MOVQ m+48(FP), R12
	MOVQ mask+56(FP), R14
	MOVQ accumulate+64(FP), R15
	CMPQ R12, $4
	JLT  ytail

ygroup4:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ DI, BX
	MOVQ SI, AX
	MOVQ R10, R13

yloop4:
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	VMOVUPS 64(BX), Y14
	PANEL_FMA3((AX), Y0, Y1, Y2)
	PANEL_FMA3((AX)(R8*1), Y3, Y4, Y5)
	PANEL_FMA3((AX)(R8*2), Y6, Y7, Y8)
	PANEL_FMA3((AX)(R9*1), Y9, Y10, Y11)
	ADDQ $96, BX
	ADDQ $4, AX
	DECQ R13
	JNZ  yloop4
	VMOVUPS (R14), Y12
	VMOVUPS 32(R14), Y13
	VMOVUPS 64(R14), Y14
	MOVQ DX, CX
	TESTQ R15, R15
	JZ   ystore4
	PANEL_ADD3(Y0, Y1, Y2)
	ADDQ R11, CX
	PANEL_ADD3(Y3, Y4, Y5)
	ADDQ R11, CX
	PANEL_ADD3(Y6, Y7, Y8)
	ADDQ R11, CX
	PANEL_ADD3(Y9, Y10, Y11)
	MOVQ DX, CX

ystore4:
	PANEL_STORE3(Y0, Y1, Y2)
	ADDQ R11, CX
	PANEL_STORE3(Y3, Y4, Y5)
	ADDQ R11, CX
	PANEL_STORE3(Y6, Y7, Y8)
	ADDQ R11, CX
	PANEL_STORE3(Y9, Y10, Y11)
	LEAQ (SI)(R8*4), SI
	LEAQ (DX)(R11*4), DX
	SUBQ $4, R12
	CMPQ R12, $4
	JGE  ygroup4

ytail:
	TESTQ R12, R12
	JZ    ydone

ytoken:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	MOVQ DI, BX
	MOVQ SI, AX
	MOVQ R10, R13

yloop1:
	VBROADCASTSS (AX), Y15
	VFMADD231PS (BX), Y15, Y0
	VFMADD231PS 32(BX), Y15, Y1
	VFMADD231PS 64(BX), Y15, Y2
	ADDQ $96, BX
	ADDQ $4, AX
	DECQ R13
	JNZ  yloop1
	VMOVUPS (R14), Y12
	VMOVUPS 32(R14), Y13
	VMOVUPS 64(R14), Y14
	MOVQ DX, CX
	TESTQ R15, R15
	JZ   ystore1
	PANEL_ADD3(Y0, Y1, Y2)

ystore1:
	PANEL_STORE3(Y0, Y1, Y2)
	ADDQ R8, SI
	ADDQ R11, DX
	DECQ R12
	JNZ  ytoken

ydone:
	VZEROUPPER
	RET

// The AVX2 panel's packing: eight rows of a column block of eight,
// widened to float32 in Y0-Y7 (LOAD8: row r's eight values at SI, SI+R8,
// SI+2·R8, SI+R9, then BX and on), transposed (Y8-Y15 the pairs, Y0-Y7
// the quads, Y8-Y15 the columns) and stored as eight columns of the panel,
// 96 bytes apart.
#define PACK8_LOAD_F32(off) \
	VMOVUPS off(SI), Y0; \
	VMOVUPS off(SI)(R8*1), Y1; \
	VMOVUPS off(SI)(R8*2), Y2; \
	VMOVUPS off(SI)(R9*1), Y3; \
	VMOVUPS off(BX), Y4; \
	VMOVUPS off(BX)(R8*1), Y5; \
	VMOVUPS off(BX)(R8*2), Y6; \
	VMOVUPS off(BX)(R9*1), Y7

#define PACK8_LOAD_F16(off) \
	VCVTPH2PS off(SI), Y0; \
	VCVTPH2PS off(SI)(R8*1), Y1; \
	VCVTPH2PS off(SI)(R8*2), Y2; \
	VCVTPH2PS off(SI)(R9*1), Y3; \
	VCVTPH2PS off(BX), Y4; \
	VCVTPH2PS off(BX)(R8*1), Y5; \
	VCVTPH2PS off(BX)(R8*2), Y6; \
	VCVTPH2PS off(BX)(R9*1), Y7

#define BF16_ROW(src, y) \
	VPMOVZXWD src, y; \
	VPSLLD $16, y, y

#define PACK8_LOAD_BF16(off) \
	BF16_ROW(off(SI), Y0); \
	BF16_ROW(off(SI)(R8*1), Y1); \
	BF16_ROW(off(SI)(R8*2), Y2); \
	BF16_ROW(off(SI)(R9*1), Y3); \
	BF16_ROW(off(BX), Y4); \
	BF16_ROW(off(BX)(R8*1), Y5); \
	BF16_ROW(off(BX)(R8*2), Y6); \
	BF16_ROW(off(BX)(R9*1), Y7)

#define PACK8_T \
	VUNPCKLPS Y1, Y0, Y8; \
	VUNPCKHPS Y1, Y0, Y9; \
	VUNPCKLPS Y3, Y2, Y10; \
	VUNPCKHPS Y3, Y2, Y11; \
	VUNPCKLPS Y5, Y4, Y12; \
	VUNPCKHPS Y5, Y4, Y13; \
	VUNPCKLPS Y7, Y6, Y14; \
	VUNPCKHPS Y7, Y6, Y15; \
	VSHUFPS $0x44, Y10, Y8, Y0; \
	VSHUFPS $0xee, Y10, Y8, Y1; \
	VSHUFPS $0x44, Y11, Y9, Y2; \
	VSHUFPS $0xee, Y11, Y9, Y3; \
	VSHUFPS $0x44, Y14, Y12, Y4; \
	VSHUFPS $0xee, Y14, Y12, Y5; \
	VSHUFPS $0x44, Y15, Y13, Y6; \
	VSHUFPS $0xee, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8; \
	VPERM2F128 $0x20, Y5, Y1, Y9; \
	VPERM2F128 $0x20, Y6, Y2, Y10; \
	VPERM2F128 $0x20, Y7, Y3, Y11; \
	VPERM2F128 $0x31, Y4, Y0, Y12; \
	VPERM2F128 $0x31, Y5, Y1, Y13; \
	VPERM2F128 $0x31, Y6, Y2, Y14; \
	VPERM2F128 $0x31, Y7, Y3, Y15; \
	VMOVUPS Y8, (DI); \
	VMOVUPS Y9, 96(DI); \
	VMOVUPS Y10, 192(DI); \
	VMOVUPS Y11, 288(DI); \
	VMOVUPS Y12, 384(DI); \
	VMOVUPS Y13, 480(DI); \
	VMOVUPS Y14, 576(DI); \
	VMOVUPS Y15, 672(DI)

// PACK8 is the body of the pack8*AVX2 functions, w in SI, ldw in R8, p
// in DI and k in CX: LOAD the block at SI/BX, transpose and store it,
// COLBYTES the bytes of eight elements.
#define PACK8(LOAD, COLBYTES, loop) \
	LEAQ (R8)(R8*2), R9; \
	LEAQ (SI)(R8*4), BX; \
loop: \
	LOAD(0); \
	PACK8_T; \
	ADDQ $COLBYTES, SI; \
	ADDQ $COLBYTES, BX; \
	ADDQ $768, DI; \
	SUBQ $8, CX; \
	JNZ loop; \
	VZEROUPPER; \
	RET

// func pack8F32AVX2(w *float32, ldw int, p *float32, k int)
//
// pack8F32AVX2 lays eight rows of k > 0 elements (a multiple of 8; ldw
// bytes apart) into the AVX2 panel at p: element l of row r at
// p[l*24+r].
TEXT ·pack8F32AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	PACK8(PACK8_LOAD_F32, 32, pack8f32loop)

// func pack8F16AVX2(w *uint16, ldw int, p *float32, k int)
TEXT ·pack8F16AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	PACK8(PACK8_LOAD_F16, 16, pack8f16loop)

// func pack8BF16AVX2(w *uint16, ldw int, p *float32, k int)
TEXT ·pack8BF16AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	PACK8(PACK8_LOAD_BF16, 16, pack8bf16loop)
