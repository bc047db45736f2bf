//go:build amd64 && !purego

#include "textflag.h"

// AVX2 inner loops of the K-quant × Q8_K dot products. Weight codes are
// unsigned, so VPMADDUBSW multiplies them with the signed activation codes
// directly (at most 2·15·127 per int16 pair, no saturation), and
// VPMADDWD against the broadcast sub-block scale both widens to int32 and
// applies the scale, so one accumulator serves the whole super-block.

// HSUM_D sets the low dword of xr to the sum of the 8 dwords of yr.
// Clobbers xt.
#define HSUM_D(yr, xr, xt) \
	VEXTRACTI128 $1, yr, xt; \
	VPADDD xt, xr, xr; \
	VPSHUFD $0x4e, xr, xt; \
	VPADDD xt, xr, xr; \
	VPSHUFD $0xb1, xr, xt; \
	VPADDD xt, xr, xr

// MINS_SUM stores at 4(DX) Σ_j m_j·(bsums[2j] + bsums[2j+1]) for the Q8_K
// block whose codes are at DI (its bsums follow them) and the 16 int16
// mins, each twice, at 16(BX). Clobbers Y1, Y2.
#define MINS_SUM \
	VMOVDQU 256(DI), Y1; \
	VPMADDWD 16(BX), Y1, Y1; \
	HSUM_D(Y1, X1, X2); \
	VMOVD X1, 4(DX)

// Q4K_PAIR adds the scaled sums of sub-blocks 2c and 2c+1 (the low and high
// nibbles of the 32 bytes at SI+32c) to Y0. Clobbers Y1-Y4.
#define Q4K_PAIR(c) \
	VMOVDQU (32*c)(SI), Y1; \
	VPSRLW $4, Y1, Y2; \
	VPAND Y15, Y1, Y1; \
	VPAND Y15, Y2, Y2; \
	VPMADDUBSW (64*c)(DI), Y1, Y1; \
	VPMADDUBSW (64*c+32)(DI), Y2, Y2; \
	VPBROADCASTW (4*c)(BX), Y3; \
	VPBROADCASTW (4*c+2)(BX), Y4; \
	VPMADDWD Y3, Y1, Y1; \
	VPMADDWD Y4, Y2, Y2; \
	VPADDD Y1, Y0, Y0; \
	VPADDD Y2, Y0, Y0

// func q4KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32)
TEXT ·q4KSumsAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ sc+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ out+32(FP), DX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	ADDQ $16, SI // codes of the first super-block
	ADDQ $4, DI
	TESTQ CX, CX
	JLE done
loop:
	VPXOR Y0, Y0, Y0
	Q4K_PAIR(0)
	Q4K_PAIR(1)
	Q4K_PAIR(2)
	Q4K_PAIR(3)
	HSUM_D(Y0, X0, X1)
	VMOVD X0, (DX)
	MINS_SUM
	ADDQ $144, SI
	ADDQ $292, DI
	ADDQ $48, BX
	ADDQ $8, DX
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// VPERMD indices spreading scales 2t and 2t+1 over the low and high 128-bit
// lanes, for t = 0..3: a Q6_K row of 32 codes spans two 16-element
// sub-blocks, one per lane.
DATA q6KScaleIdx<>+0x00(SB)/4, $0
DATA q6KScaleIdx<>+0x04(SB)/4, $0
DATA q6KScaleIdx<>+0x08(SB)/4, $0
DATA q6KScaleIdx<>+0x0c(SB)/4, $0
DATA q6KScaleIdx<>+0x10(SB)/4, $1
DATA q6KScaleIdx<>+0x14(SB)/4, $1
DATA q6KScaleIdx<>+0x18(SB)/4, $1
DATA q6KScaleIdx<>+0x1c(SB)/4, $1
DATA q6KScaleIdx<>+0x20(SB)/4, $2
DATA q6KScaleIdx<>+0x24(SB)/4, $2
DATA q6KScaleIdx<>+0x28(SB)/4, $2
DATA q6KScaleIdx<>+0x2c(SB)/4, $2
DATA q6KScaleIdx<>+0x30(SB)/4, $3
DATA q6KScaleIdx<>+0x34(SB)/4, $3
DATA q6KScaleIdx<>+0x38(SB)/4, $3
DATA q6KScaleIdx<>+0x3c(SB)/4, $3
DATA q6KScaleIdx<>+0x40(SB)/4, $4
DATA q6KScaleIdx<>+0x44(SB)/4, $4
DATA q6KScaleIdx<>+0x48(SB)/4, $4
DATA q6KScaleIdx<>+0x4c(SB)/4, $4
DATA q6KScaleIdx<>+0x50(SB)/4, $5
DATA q6KScaleIdx<>+0x54(SB)/4, $5
DATA q6KScaleIdx<>+0x58(SB)/4, $5
DATA q6KScaleIdx<>+0x5c(SB)/4, $5
DATA q6KScaleIdx<>+0x60(SB)/4, $6
DATA q6KScaleIdx<>+0x64(SB)/4, $6
DATA q6KScaleIdx<>+0x68(SB)/4, $6
DATA q6KScaleIdx<>+0x6c(SB)/4, $6
DATA q6KScaleIdx<>+0x70(SB)/4, $7
DATA q6KScaleIdx<>+0x74(SB)/4, $7
DATA q6KScaleIdx<>+0x78(SB)/4, $7
DATA q6KScaleIdx<>+0x7c(SB)/4, $7
GLOBL q6KScaleIdx<>(SB), RODATA|NOPTR, $128

// Q6K_SUM adds the scaled sums of the 32 codes in Y1 (sub-blocks 2t, 2t+1
// of the half at DI) to Y0, with the half's scales as dwords in Y5 and the
// VPERMD indices for t in idx. Clobbers Y1, Y3.
#define Q6K_SUM(t, idx) \
	VPMADDUBSW (32*t)(DI), Y1, Y1; \
	VPMADDWD Y12, Y1, Y1; \
	VPERMD Y5, idx, Y3; \
	VPMULLD Y3, Y1, Y1; \
	VPADDD Y1, Y0, Y0

// Q6K_HALF adds half h (128 codes) of the super-block at SI, against the
// activations at DI, to Y0. Clobbers Y1-Y3, Y5-Y8.
#define Q6K_HALF(h) \
	VPMOVSXBD (192+8*h)(SI), Y5; \
	VMOVDQU (128+32*h)(SI), Y6; \
	VMOVDQU (64*h)(SI), Y7; \
	VMOVDQU (64*h+32)(SI), Y8; \
	VPAND Y15, Y7, Y1; \
	VPAND Y14, Y6, Y2; \
	VPSLLW $4, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K_SUM(0, Y9); \
	VPAND Y15, Y8, Y1; \
	VPSLLW $2, Y6, Y2; \
	VPAND Y13, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K_SUM(1, Y10); \
	VPSRLW $4, Y7, Y1; \
	VPAND Y15, Y1, Y1; \
	VPAND Y13, Y6, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K_SUM(2, Y11); \
	VPSRLW $4, Y8, Y1; \
	VPAND Y15, Y1, Y1; \
	VPSRLW $2, Y6, Y2; \
	VPAND Y13, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K_SUM(3, Y4); \
	ADDQ $128, DI

// func q6KSumsAVX2(w, x *byte, nblocks int, out *int32)
TEXT ·q6KSumsAVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	MOVQ out+24(FP), DX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x03030303, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x30303030, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VPCMPEQW Y12, Y12, Y12
	VPSRLW $15, Y12, Y12
	VMOVDQU q6KScaleIdx<>+0(SB), Y9
	VMOVDQU q6KScaleIdx<>+32(SB), Y10
	VMOVDQU q6KScaleIdx<>+64(SB), Y11
	VMOVDQU q6KScaleIdx<>+96(SB), Y4
	ADDQ $4, DI // codes of the first Q8_K block
	TESTQ CX, CX
	JLE q6done
q6loop:
	VPXOR Y0, Y0, Y0
	Q6K_HALF(0)
	Q6K_HALF(1)
	HSUM_D(Y0, X0, X1)
	VMOVD X0, (DX)
	// Σ_j scale_j·bsums_j, for the offset of 32; DI is now at the bsums.
	VPMOVSXBW 192(SI), Y1
	VPMADDWD (DI), Y1, Y1
	HSUM_D(Y1, X1, X2)
	VMOVD X1, 4(DX)
	ADDQ $210, SI
	ADDQ $36, DI // 292 − the 256 codes the halves stepped over
	ADDQ $8, DX
	DECQ CX
	JNZ q6loop
q6done:
	VZEROUPPER
	RET

// Q5K_PAIR is Q4K_PAIR for Q5_K: the fifth bits of sub-blocks 2c and 2c+1
// are bits 2c and 2c+1 of the 32 qh bytes in Y6, moved to bit 4 of each
// code. The nibbles are at SI+32+32c (past qh). Clobbers Y1-Y4, Y7.
#define Q5K_PAIR(c) \
	VMOVDQU (32+32*c)(SI), Y1; \
	VPSRLW $4, Y1, Y2; \
	VPAND Y15, Y1, Y1; \
	VPAND Y15, Y2, Y2; \
	VPSRLW $(2*c), Y6, Y3; \
	VPAND Y14, Y3, Y3; \
	VPSLLW $4, Y3, Y3; \
	VPOR Y3, Y1, Y1; \
	VPSRLW $(2*c+1), Y6, Y3; \
	VPAND Y14, Y3, Y3; \
	VPSLLW $4, Y3, Y3; \
	VPOR Y3, Y2, Y2; \
	VPMADDUBSW (64*c)(DI), Y1, Y1; \
	VPMADDUBSW (64*c+32)(DI), Y2, Y2; \
	VPBROADCASTW (4*c)(BX), Y3; \
	VPBROADCASTW (4*c+2)(BX), Y4; \
	VPMADDWD Y3, Y1, Y1; \
	VPMADDWD Y4, Y2, Y2; \
	VPADDD Y1, Y0, Y0; \
	VPADDD Y2, Y0, Y0

// func q5KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32)
TEXT ·q5KSumsAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ sc+16(FP), BX
	MOVQ nblocks+24(FP), CX
	MOVQ out+32(FP), DX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x01010101, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	ADDQ $16, SI // qh of the first super-block
	ADDQ $4, DI
	TESTQ CX, CX
	JLE q5done
q5loop:
	VPXOR Y0, Y0, Y0
	VMOVDQU (SI), Y6
	Q5K_PAIR(0)
	Q5K_PAIR(1)
	Q5K_PAIR(2)
	Q5K_PAIR(3)
	HSUM_D(Y0, X0, X1)
	VMOVD X0, (DX)
	MINS_SUM
	ADDQ $176, SI
	ADDQ $292, DI
	ADDQ $48, BX
	ADDQ $8, DX
	DECQ CX
	JNZ q5loop
q5done:
	VZEROUPPER
	RET
