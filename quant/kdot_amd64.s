//go:build amd64 && !purego

#include "textflag.h"
#include "matvec_amd64.h"

// AVX2 kernels of the K-quant × Q8_K dot products. Weight codes are
// unsigned, so VPMADDUBSW multiplies them with the signed activation codes
// directly (at most 2·63·127 per int16 pair, no saturation), and VPMADDWD
// against the sub-block scale (Q4_K, Q5_K; Q6_K's, whose 16-element
// sub-blocks split a register, spread over the two lanes) widens to
// int32 and applies the scale, so one accumulator serves the whole
// super-block.

// VPSHUFB patterns spreading the int16 scales 2t and 2t+1 (of the eight
// of a half, in both 128-bit lanes) over the low and high lanes, for
// t = 0..3: a Q6_K row of 32 codes spans two 16-element sub-blocks, one
// per lane.
DATA q6KScaleShuf<>+0x00(SB)/8, $0x0100010001000100
DATA q6KScaleShuf<>+0x08(SB)/8, $0x0100010001000100
DATA q6KScaleShuf<>+0x10(SB)/8, $0x0302030203020302
DATA q6KScaleShuf<>+0x18(SB)/8, $0x0302030203020302
DATA q6KScaleShuf<>+0x20(SB)/8, $0x0504050405040504
DATA q6KScaleShuf<>+0x28(SB)/8, $0x0504050405040504
DATA q6KScaleShuf<>+0x30(SB)/8, $0x0706070607060706
DATA q6KScaleShuf<>+0x38(SB)/8, $0x0706070607060706
DATA q6KScaleShuf<>+0x40(SB)/8, $0x0908090809080908
DATA q6KScaleShuf<>+0x48(SB)/8, $0x0908090809080908
DATA q6KScaleShuf<>+0x50(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6KScaleShuf<>+0x58(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6KScaleShuf<>+0x60(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6KScaleShuf<>+0x68(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6KScaleShuf<>+0x70(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q6KScaleShuf<>+0x78(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q6KScaleShuf<>(SB), RODATA|NOPTR, $128

// Q6K_SUM adds the scaled sums of the 32 codes in Y1 (sub-blocks 2t, 2t+1
// of the half at DI) to Y0, with the half's scales as int16 in both lanes
// of Y5 and the VPSHUFB pattern for t in pat: VPMADDWD applies the scale
// as it widens the pair sums (s·a + s·b, the same integers as widening
// against ones and a VPMULLD). Clobbers Y1, Y3.
#define Q6K_SUM(t, pat) \
	VPMADDUBSW (32*t)(DI), Y1, Y1; \
	VPSHUFB pat, Y5, Y3; \
	VPMADDWD Y3, Y1, Y1; \
	VPADDD Y1, Y0, Y0

// Q6K_HALF adds half h (128 codes) of the super-block at SI, against the
// activations at DI, to Y0. Clobbers Y1-Y3, Y5-Y8.
#define Q6K_HALF(h) \
	VPMOVSXBW (192+8*h)(SI), X5; \
	VINSERTI128 $1, X5, Y5, Y5; \
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


// Whole-row kernels: each returns the float dot product of a row of
// nblocks super-blocks with nblocks Q8_K blocks, doing in assembly what
// the Go halves above leave to Go (scale unpacking, the min or offset
// terms, the float scales), so a row costs no Go work per block. The
// integer sums of a block stay in 8 int32 lanes and are converted and
// FMA-accumulated with d·x.d without a horizontal sum per block.

// VPSHUFB patterns broadcasting int16 element k of each 128-bit lane, for
// k = 0..7.
DATA shufK4<>+0x00(SB)/8, $0x0100010001000100
DATA shufK4<>+0x08(SB)/8, $0x0100010001000100
DATA shufK4<>+0x10(SB)/8, $0x0100010001000100
DATA shufK4<>+0x18(SB)/8, $0x0100010001000100
DATA shufK4<>+0x20(SB)/8, $0x0302030203020302
DATA shufK4<>+0x28(SB)/8, $0x0302030203020302
DATA shufK4<>+0x30(SB)/8, $0x0302030203020302
DATA shufK4<>+0x38(SB)/8, $0x0302030203020302
DATA shufK4<>+0x40(SB)/8, $0x0504050405040504
DATA shufK4<>+0x48(SB)/8, $0x0504050405040504
DATA shufK4<>+0x50(SB)/8, $0x0504050405040504
DATA shufK4<>+0x58(SB)/8, $0x0504050405040504
DATA shufK4<>+0x60(SB)/8, $0x0706070607060706
DATA shufK4<>+0x68(SB)/8, $0x0706070607060706
DATA shufK4<>+0x70(SB)/8, $0x0706070607060706
DATA shufK4<>+0x78(SB)/8, $0x0706070607060706
DATA shufK4<>+0x80(SB)/8, $0x0908090809080908
DATA shufK4<>+0x88(SB)/8, $0x0908090809080908
DATA shufK4<>+0x90(SB)/8, $0x0908090809080908
DATA shufK4<>+0x98(SB)/8, $0x0908090809080908
DATA shufK4<>+0xa0(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA shufK4<>+0xa8(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA shufK4<>+0xb0(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA shufK4<>+0xb8(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA shufK4<>+0xc0(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA shufK4<>+0xc8(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA shufK4<>+0xd0(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA shufK4<>+0xd8(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA shufK4<>+0xe0(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA shufK4<>+0xe8(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA shufK4<>+0xf0(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA shufK4<>+0xf8(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL shufK4<>(SB), RODATA|NOPTR, $256

// Q4K_UNPACK reads the 12 packed scale bytes at 4(SI) (Q4_K, Q5_K) and
// leaves the eight 6-bit scales as int16 in both lanes of Y3 and the eight
// mins as dwords in Y5, as ggml unpacks them with 32-bit masks. Clobbers
// AX, BX, DX, R8-R12.
#define Q4K_UNPACK \
	MOVL 4(SI), AX; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), DX; \
	MOVL DX, R8; \
	SHRL $4, R8; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL BX, R9; \
	SHRL $6, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, R8; \
	MOVL BX, R10; \
	ANDL $0x3f3f3f3f, R10; \
	MOVL DX, R11; \
	ANDL $0x0f0f0f0f, R11; \
	MOVL AX, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL R12, R11; \
	ANDL $0x3f3f3f3f, AX; \
	VMOVD AX, X3; \
	VPINSRD $1, R11, X3, X3; \
	VPMOVZXBW X3, X3; \
	VINSERTI128 $1, X3, Y3, Y3; \
	VMOVD R10, X5; \
	VPINSRD $1, R8, X5, X5; \
	VPMOVZXBD X5, Y5

// Q4K_ROW_PAIR adds the scaled sums of sub-blocks 2c and 2c+1, whose codes
// are in Y1 (low) and Y2 (high), to Y0. Clobbers Y1, Y2, Y4.
#define Q4K_ROW_PAIR(c) \
	VPMADDUBSW (4+64*c)(DI), Y1, Y1; \
	VPMADDUBSW (4+64*c+32)(DI), Y2, Y2; \
	VPSHUFB shufK4<>+(64*c)(SB), Y3, Y4; \
	VPMADDWD Y4, Y1, Y1; \
	VPSHUFB shufK4<>+(64*c+32)(SB), Y3, Y4; \
	VPMADDWD Y4, Y2, Y2; \
	VPADDD Y1, Y0, Y0; \
	VPADDD Y2, Y0, Y0

// Q4K_CODES loads the nibbles of sub-blocks 2c, 2c+1 from off(SI) into Y1
// and Y2.
#define Q4K_CODES(off) \
	VMOVDQU off(SI), Y1; \
	VPSRLW $4, Y1, Y2; \
	VPAND Y15, Y1, Y1; \
	VPAND Y15, Y2, Y2

// Q5K_HIGH ors the fifth bits of sub-blocks 2c, 2c+1 (bits 2c, 2c+1 of the
// qh bytes in Y6) into Y1 and Y2. Clobbers Y4.
#define Q5K_HIGH(c) \
	VPSRLW $(2*c), Y6, Y4; \
	VPAND Y14, Y4, Y4; \
	VPSLLW $4, Y4, Y4; \
	VPOR Y4, Y1, Y1; \
	VPSRLW $(2*c+1), Y6, Y4; \
	VPAND Y14, Y4, Y4; \
	VPSLLW $4, Y4, Y4; \
	VPOR Y4, Y2, Y2

// Q4K_FINISH_AT adds x.d·(d·iacc − dmin·Σ_j m_j·(bsums[2j]+bsums[2j+1]))
// to the float lanes of facc, for the block at SI (d, dmin at 0, 2) and the
// Q8_K block at x. Clobbers iacc, Y6-Y9.
#define Q4K_FINISH_AT(x, iacc, facc) \
	VMOVDQU 260(x), Y6; \
	VPMADDWD Y13, Y6, Y6; \
	VPMULLD Y5, Y6, Y6; \
	VCVTDQ2PS iacc, iacc; \
	VCVTDQ2PS Y6, Y6; \
	VBROADCASTSS (x), Y8; \
	VPBROADCASTW (SI), X7; \
	VCVTPH2PS X7, Y7; \
	VMULPS Y8, Y7, Y7; \
	VFMADD231PS Y7, iacc, facc; \
	VPBROADCASTW 2(SI), X9; \
	VCVTPH2PS X9, Y9; \
	VMULPS Y8, Y9, Y9; \
	VFNMADD231PS Y9, Y6, facc

// Q4K_FINISH is Q4K_FINISH_AT for the one-token kernels' registers.
#define Q4K_FINISH Q4K_FINISH_AT(DI, Y0, Y10)

// ROW_CONSTS sets Y15 to bytes 0x0f, Y14 to bytes 0x01, Y13 to int16
// ones, and zeroes the float accumulator Y10.
#define ROW_CONSTS \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x01010101, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	VPCMPEQW Y13, Y13, Y13; \
	VPSRLW $15, Y13, Y13; \
	VXORPS Y10, Y10, Y10

// ROW_RESULT leaves the sum of Y10's lanes in X10.
#define ROW_RESULT \
	VEXTRACTF128 $1, Y10, X1; \
	VADDPS X1, X10, X10; \
	VHADDPS X10, X10, X10; \
	VHADDPS X10, X10, X10; \
	VZEROUPPER

// Q4K_ROW_BLOCK, Q5K_ROW_BLOCK and Q6K_ROW_BLOCK add the product of the
// super-block at SI and the Q8_K block at DI (Q6_K: DI+4) to the row's
// float sum (Y10; Q6_K: Y12) and advance both: the bodies of the row
// kernels and of the matVec kernels, which loop over rows.
#define Q4K_ROW_BLOCK \
	Q4K_UNPACK; \
	VPXOR Y0, Y0, Y0; \
	Q4K_CODES(16); \
	Q4K_ROW_PAIR(0); \
	Q4K_CODES(48); \
	Q4K_ROW_PAIR(1); \
	Q4K_CODES(80); \
	Q4K_ROW_PAIR(2); \
	Q4K_CODES(112); \
	Q4K_ROW_PAIR(3); \
	Q4K_FINISH; \
	ADDQ $144, SI; \
	ADDQ $292, DI

#define Q5K_ROW_BLOCK \
	Q4K_UNPACK; \
	VPXOR Y0, Y0, Y0; \
	VMOVDQU 16(SI), Y6; \
	Q4K_CODES(48); \
	Q5K_HIGH(0); \
	Q4K_ROW_PAIR(0); \
	Q4K_CODES(80); \
	Q5K_HIGH(1); \
	Q4K_ROW_PAIR(1); \
	Q4K_CODES(112); \
	Q5K_HIGH(2); \
	Q4K_ROW_PAIR(2); \
	Q4K_CODES(144); \
	Q5K_HIGH(3); \
	Q4K_ROW_PAIR(3); \
	Q4K_FINISH; \
	ADDQ $176, SI; \
	ADDQ $292, DI

#define Q6K_ROW_BLOCK \
	VPXOR Y0, Y0, Y0; \
	Q6K_HALF(0); \
	Q6K_HALF(1); \
	VPMOVSXBW 192(SI), Y1; \
	VPMADDWD (DI), Y1, Y1; \
	VPSLLD $5, Y1, Y1; \
	VPSUBD Y1, Y0, Y0; \
	VCVTDQ2PS Y0, Y0; \
	VBROADCASTSS -260(DI), Y8; \
	VPBROADCASTW 208(SI), X7; \
	VCVTPH2PS X7, Y7; \
	VMULPS Y8, Y7, Y7; \
	VFMADD231PS Y7, Y0, Y12; \
	ADDQ $210, SI; \
	ADDQ $36, DI

// Q6K_ROW_CONSTS sets the Q6_K row kernel's constants: masks in Y13-Y15,
// VPSHUFB patterns in Y9-Y11 and Y4. Clobbers AX.
#define Q6K_ROW_CONSTS \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x03030303, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL $0x30303030, AX; \
	VMOVD AX, X13; \
	VPBROADCASTD X13, Y13; \
	VMOVDQU q6KScaleShuf<>+0(SB), Y9; \
	VMOVDQU q6KScaleShuf<>+32(SB), Y10; \
	VMOVDQU q6KScaleShuf<>+64(SB), Y11; \
	VMOVDQU q6KScaleShuf<>+96(SB), Y4

// HSUM8 leaves the sum of y's 8 lanes (x its low half) in x. Clobbers X1.
#define HSUM8(y, x) \
	VEXTRACTF128 $1, y, X1; \
	VADDPS X1, x, x; \
	VHADDPS x, x, x; \
	VHADDPS x, x, x

// ROW_DOT is the body of the row kernels whose sum ends in Y10: CONSTS,
// then BLOCK over the CX blocks at SI and DI, then ROW_RESULT (the sum in
// X10). The TEXT loads SI, DI and CX itself (go vet checks the frame
// references line by line).
#define ROW_DOT(CONSTS, BLOCK, loop, done) \
	CONSTS; \
	TESTQ CX, CX; \
	JLE done; \
loop: \
	BLOCK; \
	DECQ CX; \
	JNZ loop; \
done: \
	ROW_RESULT

// func dotQ4KRowAVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ4KRowAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ROW_DOT(ROW_CONSTS, Q4K_ROW_BLOCK, q4rloop, q4rdone)
	MOVSS X10, ret+24(FP)
	RET

// func dotQ5KRowAVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ5KRowAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ROW_DOT(ROW_CONSTS, Q5K_ROW_BLOCK, q5rloop, q5rdone)
	MOVSS X10, ret+24(FP)
	RET

// Int16 ones, read from memory: dotQ6KRowAVX2 has no register to spare.
DATA onesW<>+0x00(SB)/8, $0x0001000100010001
DATA onesW<>+0x08(SB)/8, $0x0001000100010001
DATA onesW<>+0x10(SB)/8, $0x0001000100010001
DATA onesW<>+0x18(SB)/8, $0x0001000100010001
GLOBL onesW<>(SB), RODATA|NOPTR, $32

// func dotQ6KRowAVX2(w, x *byte, nblocks int) float32
//
// The offset of 32 comes out of each block's integer lanes, through the
// bsums, before they are scaled by d·x.d into the float sum in Y12.
TEXT ·dotQ6KRowAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	Q6K_ROW_CONSTS
	VXORPS Y12, Y12, Y12
	ADDQ $4, DI
	TESTQ CX, CX
	JLE q6rdone
q6rloop:
	Q6K_ROW_BLOCK
	DECQ CX
	JNZ q6rloop
q6rdone:
	VEXTRACTF128 $1, Y12, X1
	VADDPS X1, X12, X12
	VHADDPS X12, X12, X12
	VHADDPS X12, X12, X12
	VZEROUPPER
	MOVSS X12, ret+24(FP)
	RET

// VPERMD indices that undo the lane interleaving of VPACKSSDW/VPACKSSWB.
DATA kPackPerm<>+0x00(SB)/4, $0
DATA kPackPerm<>+0x04(SB)/4, $4
DATA kPackPerm<>+0x08(SB)/4, $1
DATA kPackPerm<>+0x0c(SB)/4, $5
DATA kPackPerm<>+0x10(SB)/4, $2
DATA kPackPerm<>+0x14(SB)/4, $6
DATA kPackPerm<>+0x18(SB)/4, $3
DATA kPackPerm<>+0x1c(SB)/4, $7
GLOBL kPackPerm<>(SB), RODATA|NOPTR, $32

// ROUND_K scales v by Y8 and rounds it half away from zero to int32 lanes,
// as roundInt8 does: trunc(v + copysign(0.49999997, v)) equals roundf(v)
// for every float32 in the int8 range (see ROUND_Q8 in dot_amd64.s and
// TestRoundHalfAwayTrick). Y14 holds the sign mask, Y13 0.49999997.
#define ROUND_K(v) \
	VMULPS Y8, v, v; \
	VANDPS Y14, v, Y9; \
	VORPS Y13, Y9, Y9; \
	VADDPS Y9, v, v; \
	VCVTTPS2DQ v, v

// QK_GROUP quantizes the 32 values at (128*g)(SI) to the codes at
// (4+32*g)(DI) and stores the sums of each 16 as bsums 2g and 2g+1. Codes
// of -128 (only from NaN or ±Inf) are flagged in Y7; Y6 holds bytes 0x80.
#define QK_GROUP(g) \
	VMOVUPS (128*g)(SI), Y0; \
	VMOVUPS (128*g+32)(SI), Y1; \
	VMOVUPS (128*g+64)(SI), Y2; \
	VMOVUPS (128*g+96)(SI), Y3; \
	ROUND_K(Y0); \
	ROUND_K(Y1); \
	ROUND_K(Y2); \
	ROUND_K(Y3); \
	VPACKSSDW Y1, Y0, Y0; \
	VPACKSSDW Y3, Y2, Y2; \
	VPACKSSWB Y2, Y0, Y0; \
	VPERMD Y0, Y10, Y0; \
	VMOVDQU Y0, (4+32*g)(DI); \
	VPCMPEQB Y0, Y6, Y5; \
	VPOR Y5, Y7, Y7; \
	VPMADDUBSW Y0, Y11, Y1; \
	VPMADDWD onesW<>(SB), Y1, Y1; \
	VPHADDD Y1, Y1, Y1; \
	VPHADDD Y1, Y1, Y1; \
	VMOVD X1, AX; \
	MOVW AX, (260+4*g)(DI); \
	VEXTRACTI128 $1, Y1, X2; \
	VMOVD X2, AX; \
	MOVW AX, (262+4*g)(DI)

// func quantizeQ8_KAVX2(x *float32, dst *byte, nblocks int)
TEXT ·quantizeQ8_KAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ nblocks+16(FP), CX
	MOVL $0x7fffffff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15 // |·| mask
	MOVL $0x80000000, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14 // sign mask
	MOVL $0x3effffff, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13 // 0.49999997
	MOVL $0x42fe0000, AX
	VMOVD AX, X12 // 127.0
	MOVL $0x01010101, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11 // bytes 1
	VMOVDQU kPackPerm<>(SB), Y10
	TESTQ CX, CX
	JLE qkdone
qkloop:
	// amax over the 256 values.
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	MOVQ SI, R8
	MOVQ $8, DX
qkmax:
	VANDPS (R8), Y15, Y0
	VANDPS 32(R8), Y15, Y1
	VANDPS 64(R8), Y15, Y2
	VANDPS 96(R8), Y15, Y3
	VMAXPS Y0, Y4, Y4
	VMAXPS Y1, Y5, Y5
	VMAXPS Y2, Y4, Y4
	VMAXPS Y3, Y5, Y5
	ADDQ $128, R8
	DECQ DX
	JNZ qkmax
	VMAXPS Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VPERMILPS $0x4e, X4, X5
	VMAXPS X5, X4, X4
	VPERMILPS $0xb1, X4, X5
	VMAXPS X5, X4, X4

	// d = amax/127; id = d != 0 ? 1/d : 0.
	VDIVSS X12, X4, X4
	VMOVSS X4, (DI)
	MOVL $0x3f800000, AX
	VMOVD AX, X7
	VXORPS X6, X6, X6
	VCMPSS $4, X6, X4, X5
	VDIVSS X4, X7, X8
	VANDPS X5, X8, X8
	VBROADCASTSS X8, Y8
	MOVL $0x80808080, AX
	VMOVD AX, X6
	VPBROADCASTD X6, Y6
	VPXOR Y7, Y7, Y7

	QK_GROUP(0)
	QK_GROUP(1)
	QK_GROUP(2)
	QK_GROUP(3)
	QK_GROUP(4)
	QK_GROUP(5)
	QK_GROUP(6)
	QK_GROUP(7)

	// A code of -128 means non-finite input: mark d NaN so that the Go
	// caller redoes the block.
	VPTEST Y7, Y7
	JZ qknext
	MOVL $0x7fc00000, (DI)
qknext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ qkloop
qkdone:
	VZEROUPPER
	RET

// Q4K_PAIR2 adds the scaled sums of sub-blocks 2c and 2c+1 (codes in Y1,
// Y2) against two tokens' activations, at DI (to Y0) and R13 (to Y12): the
// codes and the scale patterns (Y4, Y6) are made once for both. Clobbers
// Y4, Y6-Y8.
#define Q4K_PAIR2(c) \
	VPSHUFB shufK4<>+(64*c)(SB), Y3, Y4; \
	VPSHUFB shufK4<>+(64*c+32)(SB), Y3, Y6; \
	VPMADDUBSW (4+64*c)(DI), Y1, Y7; \
	VPMADDUBSW (4+64*c+32)(DI), Y2, Y8; \
	VPMADDWD Y4, Y7, Y7; \
	VPMADDWD Y6, Y8, Y8; \
	VPADDD Y7, Y0, Y0; \
	VPADDD Y8, Y0, Y0; \
	VPMADDUBSW (4+64*c)(R13), Y1, Y7; \
	VPMADDUBSW (4+64*c+32)(R13), Y2, Y8; \
	VPMADDWD Y4, Y7, Y7; \
	VPMADDWD Y6, Y8, Y8; \
	VPADDD Y7, Y12, Y12; \
	VPADDD Y8, Y12, Y12

// func dotQ4KRow2AVX2(w, x0, x1 *byte, nblocks int, out *float32)
//
// The dot products of a row of nblocks Q4_K super-blocks with two tokens'
// Q8_K blocks (x0, x1), to out[0] and out[1]: each block's scales and
// nibbles are unpacked once for both tokens, as the prefill's products
// repeat them for every token. Each token's arithmetic is dotQ4KRowAVX2's,
// in the same order.
TEXT ·dotQ4KRow2AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DI
	MOVQ x1+16(FP), R13
	MOVQ nblocks+24(FP), CX
	ROW_CONSTS
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JLE q4r2done
q4r2loop:
	Q4K_UNPACK
	VPXOR Y0, Y0, Y0
	VPXOR Y12, Y12, Y12
	Q4K_CODES(16)
	Q4K_PAIR2(0)
	Q4K_CODES(48)
	Q4K_PAIR2(1)
	Q4K_CODES(80)
	Q4K_PAIR2(2)
	Q4K_CODES(112)
	Q4K_PAIR2(3)
	Q4K_FINISH_AT(DI, Y0, Y10)
	Q4K_FINISH_AT(R13, Y12, Y11)
	ADDQ $144, SI
	ADDQ $292, DI
	ADDQ $292, R13
	DECQ CX
	JNZ q4r2loop
q4r2done:
	VEXTRACTF128 $1, Y11, X1
	VADDPS X1, X11, X11
	VHADDPS X11, X11, X11
	VHADDPS X11, X11, X11
	ROW_RESULT
	MOVQ out+32(FP), AX
	MOVSS X10, (AX)
	MOVSS X11, 4(AX)
	RET

// KQ_PAIR4_TOKEN adds the scaled sums of sub-blocks 2c, 2c+1 (codes in
// Y1, Y2, scale patterns in Y4 and phi) against the token whose Q8_K block
// is at x, to iacc. Clobbers Y7, Y8.
#define KQ_PAIR4_TOKEN(c, x, iacc, phi) \
	VPMADDUBSW (4+64*c)x, Y1, Y7; \
	VPMADDUBSW (4+64*c+32)x, Y2, Y8; \
	VPMADDWD Y4, Y7, Y7; \
	VPMADDWD phi, Y8, Y8; \
	VPADDD Y7, iacc, iacc; \
	VPADDD Y8, iacc, iacc

// KQ_PAIR4 is Q4K_PAIR2 for four tokens, DI, DI+R13, DI+2·R13, DI+R14, to
// Y0, Y9, Y12 and acc3, with the high scale pattern in phi (Q4_K: Y6, Y14;
// Q5_K, whose Y6 holds the qh bytes and Y14 a mask: Y11, Y10).
#define KQ_PAIR4(c, phi, acc3) \
	VPSHUFB shufK4<>+(64*c)(SB), Y3, Y4; \
	VPSHUFB shufK4<>+(64*c+32)(SB), Y3, phi; \
	KQ_PAIR4_TOKEN(c, (DI), Y0, phi); \
	KQ_PAIR4_TOKEN(c, (DI)(R13*1), Y9, phi); \
	KQ_PAIR4_TOKEN(c, (DI)(R13*2), Y12, phi); \
	KQ_PAIR4_TOKEN(c, (DI)(R14*1), acc3, phi)

// Q4K_FINISH4 adds x.d·(d·iacc − dmin·Σ_j m_j·(bsums[2j]+bsums[2j+1])) to
// the 8 floats at aoff(AX), for the Q8_K block at R8, with d and dmin as
// floats in Y1 and Y2. Clobbers iacc, Y6-Y8.
#define Q4K_FINISH4(iacc, aoff) \
	VMOVDQU 260(R8), Y6; \
	VPMADDWD Y13, Y6, Y6; \
	VPMULLD Y5, Y6, Y6; \
	VCVTDQ2PS iacc, iacc; \
	VCVTDQ2PS Y6, Y6; \
	VBROADCASTSS (R8), Y8; \
	VMULPS Y1, Y8, Y7; \
	VMULPS Y2, Y8, Y8; \
	VMULPS Y7, iacc, iacc; \
	VFNMADD231PS Y8, Y6, iacc; \
	VADDPS aoff(AX), iacc, iacc; \
	VMOVUPS iacc, aoff(AX)

// Q4K_FINISH4_ALL finishes the super-block at SI for the four tokens of
// KQ_PAIR4, whose sums are in Y0, Y9, Y12 and acc3, into the floats at AX.
#define Q4K_FINISH4_ALL(acc3) \
	VPBROADCASTW (SI), X1; \
	VCVTPH2PS X1, Y1; \
	VPBROADCASTW 2(SI), X2; \
	VCVTPH2PS X2, Y2; \
	MOVQ DI, R8; \
	Q4K_FINISH4(Y0, 0); \
	LEAQ (DI)(R13*1), R8; \
	Q4K_FINISH4(Y9, 32); \
	LEAQ (DI)(R13*2), R8; \
	Q4K_FINISH4(Y12, 64); \
	LEAQ (DI)(R14*1), R8; \
	Q4K_FINISH4(acc3, 96)

// func dotQ4KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)
//
// dotQ4KRowAVX2 for four tokens whose Q8_K rows are xstride bytes apart
// from x: each super-block's scales, nibbles and d, dmin are unpacked once
// for the four. Token t's sum is left as 8 partial sums added to acc[8t:],
// for the caller to reduce.
TEXT ·dotQ4KRow4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xstride+16(FP), R13
	LEAQ (R13)(R13*2), R14
	MOVQ nblocks+24(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VPCMPEQW Y13, Y13, Y13
	VPSRLW $15, Y13, Y13
	TESTQ CX, CX
	JLE q4r4done
q4r4loop:
	Q4K_UNPACK
	VPXOR Y0, Y0, Y0
	VPXOR Y9, Y9, Y9
	VPXOR Y12, Y12, Y12
	VPXOR Y14, Y14, Y14
	Q4K_CODES(16)
	KQ_PAIR4(0, Y6, Y14)
	Q4K_CODES(48)
	KQ_PAIR4(1, Y6, Y14)
	Q4K_CODES(80)
	KQ_PAIR4(2, Y6, Y14)
	Q4K_CODES(112)
	KQ_PAIR4(3, Y6, Y14)
	MOVQ acc+32(FP), AX
	Q4K_FINISH4_ALL(Y14)
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q4r4loop
q4r4done:
	VZEROUPPER
	RET

// func dotQ5KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)
//
// dotQ4KRow4AVX2 for Q5_K: dotQ5KRowAVX2's arithmetic for four tokens,
// each super-block unpacked once for the four.
TEXT ·dotQ5KRow4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xstride+16(FP), R13
	LEAQ (R13)(R13*2), R14
	MOVQ nblocks+24(FP), CX
	ROW_CONSTS
	TESTQ CX, CX
	JLE q5r4done
q5r4loop:
	Q4K_UNPACK
	VPXOR Y0, Y0, Y0
	VPXOR Y9, Y9, Y9
	VPXOR Y12, Y12, Y12
	VPXOR Y10, Y10, Y10
	VMOVDQU 16(SI), Y6
	Q4K_CODES(48)
	Q5K_HIGH(0)
	KQ_PAIR4(0, Y11, Y10)
	Q4K_CODES(80)
	Q5K_HIGH(1)
	KQ_PAIR4(1, Y11, Y10)
	Q4K_CODES(112)
	Q5K_HIGH(2)
	KQ_PAIR4(2, Y11, Y10)
	Q4K_CODES(144)
	Q5K_HIGH(3)
	KQ_PAIR4(3, Y11, Y10)
	MOVQ acc+32(FP), AX
	Q4K_FINISH4_ALL(Y10)
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q5r4loop
q5r4done:
	VZEROUPPER
	RET

// Q6K4_SUM adds the scaled sums of the 32 codes in Y1 (sub-blocks 2t,
// 2t+1 of half h) against four tokens (DI, DI+R13, DI+2·R13, DI+R14) to
// Y0, Y9, Y10, Y11: the scales are spread once (Y3, from the half's int16
// scales in both lanes of Y5 and the VPSHUFB pattern for t, loaded into
// Y12) for the four, and applied by VPMADDWD as it widens (Q6K_SUM).
// Clobbers Y2, Y3, Y12.
#define Q6K4_TOKEN(h, t, x, iacc) \
	VPMADDUBSW (4+128*h+32*t)x, Y1, Y2; \
	VPMADDWD Y3, Y2, Y2; \
	VPADDD Y2, iacc, iacc

#define Q6K4_SUM(h, t) \
	VMOVDQU q6KScaleShuf<>+(32*t)(SB), Y12; \
	VPSHUFB Y12, Y5, Y3; \
	Q6K4_TOKEN(h, t, (DI), Y0); \
	Q6K4_TOKEN(h, t, (DI)(R13*1), Y9); \
	Q6K4_TOKEN(h, t, (DI)(R13*2), Y10); \
	Q6K4_TOKEN(h, t, (DI)(R14*1), Y11)

// Q6K4_HALF is Q6K_HALF for four tokens. Clobbers Y1-Y3, Y5-Y8, Y12.
#define Q6K4_HALF(h) \
	VPMOVSXBW (192+8*h)(SI), X5; \
	VINSERTI128 $1, X5, Y5, Y5; \
	VMOVDQU (128+32*h)(SI), Y6; \
	VMOVDQU (64*h)(SI), Y7; \
	VMOVDQU (64*h+32)(SI), Y8; \
	VPAND Y15, Y7, Y1; \
	VPAND Y14, Y6, Y2; \
	VPSLLW $4, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K4_SUM(h, 0); \
	VPAND Y15, Y8, Y1; \
	VPSLLW $2, Y6, Y2; \
	VPAND Y13, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K4_SUM(h, 1); \
	VPSRLW $4, Y7, Y1; \
	VPAND Y15, Y1, Y1; \
	VPAND Y13, Y6, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K4_SUM(h, 2); \
	VPSRLW $4, Y8, Y1; \
	VPAND Y15, Y1, Y1; \
	VPSRLW $2, Y6, Y2; \
	VPAND Y13, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6K4_SUM(h, 3)

// Q6K4_FINISH takes the offset of 32 out of iacc through the bsums of the
// Q8_K block at R8 (the super-block's scales as int16 in Y5), and adds
// d·x.d·iacc (d as floats in Y1) to the 8 floats at aoff(AX). Clobbers
// iacc, Y2, Y3.
#define Q6K4_FINISH(iacc, aoff) \
	VPMADDWD 260(R8), Y5, Y2; \
	VPSLLD $5, Y2, Y2; \
	VPSUBD Y2, iacc, iacc; \
	VCVTDQ2PS iacc, iacc; \
	VBROADCASTSS (R8), Y3; \
	VMULPS Y1, Y3, Y3; \
	VMULPS Y3, iacc, iacc; \
	VADDPS aoff(AX), iacc, iacc; \
	VMOVUPS iacc, aoff(AX)

// func dotQ6KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)
//
// dotQ4KRow4AVX2 for Q6_K: dotQ6KRowAVX2's arithmetic for four tokens,
// each super-block decoded once for the four.
TEXT ·dotQ6KRow4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xstride+16(FP), R13
	LEAQ (R13)(R13*2), R14
	MOVQ nblocks+24(FP), CX
	MOVQ acc+32(FP), AX
	MOVL $0x0f0f0f0f, DX
	VMOVD DX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x03030303, DX
	VMOVD DX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x30303030, DX
	VMOVD DX, X13
	VPBROADCASTD X13, Y13
	TESTQ CX, CX
	JLE q6r4done
q6r4loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	Q6K4_HALF(0)
	Q6K4_HALF(1)
	VPMOVSXBW 192(SI), Y5
	VPBROADCASTW 208(SI), X1
	VCVTPH2PS X1, Y1
	MOVQ DI, R8
	Q6K4_FINISH(Y0, 0)
	LEAQ (DI)(R13*1), R8
	Q6K4_FINISH(Y9, 32)
	LEAQ (DI)(R13*2), R8
	Q6K4_FINISH(Y10, 64)
	LEAQ (DI)(R14*1), R8
	Q6K4_FINISH(Y11, 96)
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q6r4loop
q6r4done:
	VZEROUPPER
	RET

// func matVecQ4KAVX2(w, x *byte, nblocks int, out *float32, rows int)
//
// dotQ4KRowAVX2 for rows consecutive rows of w against one Q8_K row x,
// into out[0:rows] (nblocks ≥ 1, rows ≥ 1): the decode step's product,
// the row loop here, where a Go call a row set up the constants and
// reduced the sum each time. Q4K_UNPACK takes AX, BX, DX and R8-R12; the
// loop keeps x in R15, out in R13 and the rows left in R14.
TEXT ·matVecQ4KAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R15
	MOVQ out+24(FP), R13
	MOVQ rows+32(FP), R14
	ROW_CONSTS
	MATVEC_ROWS(Q4K_ROW_BLOCK, HSUM8(Y10, X10), Y10, X10, nblocks+16(FP), q4mvrow, q4mvloop)

// func matVecQ5KAVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ5KAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R15
	MOVQ out+24(FP), R13
	MOVQ rows+32(FP), R14
	ROW_CONSTS
	MATVEC_ROWS(Q5K_ROW_BLOCK, HSUM8(Y10, X10), Y10, X10, nblocks+16(FP), q5mvrow, q5mvloop)

// func matVecQ6KAVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ6KAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R15
	MOVQ out+24(FP), R13
	MOVQ rows+32(FP), R14
	Q6K_ROW_CONSTS
	ADDQ $4, R15
	MATVEC_ROWS(Q6K_ROW_BLOCK, HSUM8(Y12, X12), Y12, X12, nblocks+16(FP), q6mvrow, q6mvloop)

// Q2_K and Q3_K: the codes of sub-blocks 16·(8h+2t) and 16·(8h+2t)+16 are
// bit pair t of the 32 qs bytes of half h, one sub-block a 128-bit lane,
// so a row of 32 codes takes VPMADDUBSW once against the activations and
// VPMADDWD once against int16 scales laid out as (sc[j] in the low lane,
// sc[j+1] in the high lane). evenOdd puts the even scales in the low eight
// bytes and the odd ones in the high eight, so that after widening to
// int16 shufK4's pattern 4h+t picks exactly that pair. The scales' other
// term, the min (Q2_K) or the −4 of a clear high bit (Q3_K), is a sum over
// sub-blocks of the scale times Σy, which one VPMADDWD against the Q8_K
// block's bsums gives for the whole super-block.
DATA evenOdd<>+0x00(SB)/8, $0x0e0c0a0806040200
DATA evenOdd<>+0x08(SB)/8, $0x0f0d0b0907050301
GLOBL evenOdd<>(SB), RODATA|NOPTR, $16

// K23_SUB adds the scaled sums of the codes in Y1 (sub-blocks 8h+2t,
// 8h+2t+1) against the activations at DI to Y0. Y3 holds the scales in
// evenOdd order. Clobbers Y1, Y4.
#define K23_SUB(h, t) \
	VPMADDUBSW (4+128*h+32*t)(DI), Y1, Y1; \
	VPSHUFB shufK4<>+(32*(4*h+t))(SB), Y3, Y4; \
	VPMADDWD Y4, Y1, Y1; \
	VPADDD Y1, Y0, Y0

// Q2K_ROW_CONSTS sets Y15 to bytes 0x0f, Y14 to bytes 0x03 and Y13 to the
// evenOdd pattern, and zeroes the float accumulator Y10. Clobbers AX.
#define Q2K_ROW_CONSTS \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x03030303, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	VMOVDQU evenOdd<>(SB), X13; \
	VXORPS Y10, Y10, Y10

// Q2K_CODES sets Y1 to bit pair t of the qs bytes in Y7.
#define Q2K_CODES(t) \
	VPSRLW $(2*t), Y7, Y1; \
	VPAND Y14, Y1, Y1

// Q2K_HALF adds half h of the super-block at SI.
#define Q2K_HALF(h) \
	VMOVDQU (16+32*h)(SI), Y7; \
	VPAND Y14, Y7, Y1; \
	K23_SUB(h, 0); \
	Q2K_CODES(1); \
	K23_SUB(h, 1); \
	Q2K_CODES(2); \
	K23_SUB(h, 2); \
	Q2K_CODES(3); \
	K23_SUB(h, 3)

// Q2K_ROW_BLOCK adds x.d·(d·Σ sc·Σq·y − dmin·Σ m·Σy) for the Q2_K
// super-block at SI and the Q8_K block at DI to Y10 and advances both.
// Clobbers Y0-Y9.
#define Q2K_ROW_BLOCK \
	VMOVDQU (SI), X3; \
	VPSRLW $4, X3, X5; \
	VPAND X15, X5, X5; \
	VPMOVZXBW X5, Y5; \
	VPAND X15, X3, X3; \
	VPSHUFB X13, X3, X3; \
	VPMOVZXBW X3, Y3; \
	VPXOR Y0, Y0, Y0; \
	Q2K_HALF(0); \
	Q2K_HALF(1); \
	VPMADDWD 260(DI), Y5, Y5; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y5, Y5; \
	VBROADCASTSS (DI), Y8; \
	VPBROADCASTW 80(SI), X7; \
	VCVTPH2PS X7, Y7; \
	VMULPS Y8, Y7, Y7; \
	VFMADD231PS Y7, Y0, Y10; \
	VPBROADCASTW 82(SI), X9; \
	VCVTPH2PS X9, Y9; \
	VMULPS Y8, Y9, Y9; \
	VFNMADD231PS Y9, Y5, Y10; \
	ADDQ $84, SI; \
	ADDQ $292, DI

// Q3K_ROW_CONSTS sets Y15 to bytes 0x03, Y14 to bytes 0x04, Y13 to the
// evenOdd pattern and Y12 to bytes 32, and zeroes the float accumulator
// Y10. Clobbers AX.
#define Q3K_ROW_CONSTS \
	MOVL $0x03030303, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x04040404, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	VMOVDQU evenOdd<>(SB), X13; \
	MOVL $0x20202020, AX; \
	VMOVD AX, X12; \
	VPBROADCASTD X12, Y12; \
	VXORPS Y10, Y10, Y10

// Q3K_UNPACK leaves the 16 scales of the block at SI, less 32, as int16
// in Y5 (in order) and Y3 (evenOdd order): the low nibbles are those of
// bytes 0-7, the high bit pairs those of bytes 8-11, as q3KScales reads
// them, assembled a dword of four scales at a time. Clobbers AX, BX, DX,
// R8-R11.
#define Q3K_UNPACK \
	MOVL 96(SI), AX; \
	MOVL 100(SI), BX; \
	MOVL 104(SI), DX; \
	MOVL AX, R8; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL DX, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, R8; \
	MOVL BX, R9; \
	ANDL $0x0f0f0f0f, R9; \
	MOVL DX, R10; \
	SHLL $2, R10; \
	ANDL $0x30303030, R10; \
	ORL R10, R9; \
	SHRL $4, AX; \
	ANDL $0x0f0f0f0f, AX; \
	MOVL DX, R10; \
	ANDL $0x30303030, R10; \
	ORL AX, R10; \
	SHRL $4, BX; \
	ANDL $0x0f0f0f0f, BX; \
	MOVL DX, R11; \
	SHRL $2, R11; \
	ANDL $0x30303030, R11; \
	ORL BX, R11; \
	VMOVD R8, X3; \
	VPINSRD $1, R9, X3, X3; \
	VPINSRD $2, R10, X3, X3; \
	VPINSRD $3, R11, X3, X3; \
	VPSUBB X12, X3, X3; \
	VPMOVSXBW X3, Y5; \
	VPSHUFB X13, X3, X3; \
	VPMOVSXBW X3, Y3

// Q3K_CODES sets Y1 to bit pair t of the qs bytes in Y7 with high bit
// 4h+t of the hmask bytes in Y6 as its bit 2, shifted there by hop $hn.
// Clobbers Y2.
#define Q3K_CODES(t, hop, hn) \
	VPSRLW $(2*t), Y7, Y1; \
	VPAND Y15, Y1, Y1; \
	hop $hn, Y6, Y2; \
	VPAND Y14, Y2, Y2; \
	VPOR Y2, Y1, Y1

// Q3K_ROW_BLOCK adds x.d·d·Σ (sc−32)·(Σq·y − 4·Σy), q = low bits + 4·high
// bit, for the Q3_K super-block at SI and the Q8_K block at DI to Y10 and
// advances both. Clobbers Y0-Y9.
#define Q3K_ROW_BLOCK \
	Q3K_UNPACK; \
	VMOVDQU (SI), Y6; \
	VPXOR Y0, Y0, Y0; \
	VMOVDQU 32(SI), Y7; \
	Q3K_CODES(0, VPSLLW, 2); \
	K23_SUB(0, 0); \
	Q3K_CODES(1, VPSLLW, 1); \
	K23_SUB(0, 1); \
	Q3K_CODES(2, VPSRLW, 0); \
	K23_SUB(0, 2); \
	Q3K_CODES(3, VPSRLW, 1); \
	K23_SUB(0, 3); \
	VMOVDQU 64(SI), Y7; \
	Q3K_CODES(0, VPSRLW, 2); \
	K23_SUB(1, 0); \
	Q3K_CODES(1, VPSRLW, 3); \
	K23_SUB(1, 1); \
	Q3K_CODES(2, VPSRLW, 4); \
	K23_SUB(1, 2); \
	Q3K_CODES(3, VPSRLW, 5); \
	K23_SUB(1, 3); \
	VPMADDWD 260(DI), Y5, Y5; \
	VPSLLD $2, Y5, Y5; \
	VPSUBD Y5, Y0, Y0; \
	VCVTDQ2PS Y0, Y0; \
	VBROADCASTSS (DI), Y8; \
	VPBROADCASTW 108(SI), X7; \
	VCVTPH2PS X7, Y7; \
	VMULPS Y8, Y7, Y7; \
	VFMADD231PS Y7, Y0, Y10; \
	ADDQ $110, SI; \
	ADDQ $292, DI

// func dotQ2KRowAVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ2KRowAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ROW_DOT(Q2K_ROW_CONSTS, Q2K_ROW_BLOCK, q2rloop, q2rdone)
	MOVSS X10, ret+24(FP)
	RET

// func dotQ3KRowAVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ3KRowAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ROW_DOT(Q3K_ROW_CONSTS, Q3K_ROW_BLOCK, q3rloop, q3rdone)
	MOVSS X10, ret+24(FP)
	RET

// func matVecQ2KAVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ2KAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R15
	MOVQ out+24(FP), R13
	MOVQ rows+32(FP), R14
	Q2K_ROW_CONSTS
	MATVEC_ROWS(Q2K_ROW_BLOCK, HSUM8(Y10, X10), Y10, X10, nblocks+16(FP), q2mvrow, q2mvloop)

// func matVecQ3KAVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ3KAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R15
	MOVQ out+24(FP), R13
	MOVQ rows+32(FP), R14
	Q3K_ROW_CONSTS
	MATVEC_ROWS(Q3K_ROW_BLOCK, HSUM8(Y10, X10), Y10, X10, nblocks+16(FP), q3mvrow, q3mvloop)
