//go:build amd64 && !purego

#include "textflag.h"

// Float32 kernels for attention: a small matrix product and the softmax
// exponential. AVX2 + FMA.

// func matMulF32AVX2(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, tiles int, accumulate int)
//
// For each 16-column tile of B and C, Y0-Y7 accumulate the 4×16 tile of C
// (two registers a row). Each step of the k loop loads 16 floats of a row
// of B and broadcasts one element of each row of A: 6 loads for 8 FMAs,
// and eight independent accumulators cover the FMA latency.
TEXT ·matMulF32AVX2(SB), NOSPLIT, $0-72
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R8
	SHLQ $2, R8
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	SHLQ $2, R9
	MOVQ k+32(FP), R10
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R11
	SHLQ $2, R11
	MOVQ tiles+56(FP), R12
	LEAQ (SI)(R8*2), BX
	ADDQ R8, BX // row 3 of A

tile:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ SI, AX  // rows 0-2 of A, at column l
	MOVQ BX, R14 // row 3 of A
	MOVQ DI, CX  // row l of B, this tile
	MOVQ R10, R13

kloop:
	VMOVUPS (CX), Y8
	VMOVUPS 32(CX), Y9
	VBROADCASTSS (AX), Y10
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VBROADCASTSS (AX)(R8*1), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VBROADCASTSS (AX)(R8*2), Y12
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VBROADCASTSS (R14), Y13
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ $4, AX
	ADDQ $4, R14
	ADDQ R9, CX
	DECQ R13
	JNZ kloop

	LEAQ (DX)(R11*2), CX
	ADDQ R11, CX // row 3 of C
	CMPQ accumulate+64(FP), $0
	JEQ store
	VADDPS (DX), Y0, Y0
	VADDPS 32(DX), Y1, Y1
	VADDPS (DX)(R11*1), Y2, Y2
	VADDPS 32(DX)(R11*1), Y3, Y3
	VADDPS (DX)(R11*2), Y4, Y4
	VADDPS 32(DX)(R11*2), Y5, Y5
	VADDPS (CX), Y6, Y6
	VADDPS 32(CX), Y7, Y7

store:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, (DX)(R11*1)
	VMOVUPS Y3, 32(DX)(R11*1)
	VMOVUPS Y4, (DX)(R11*2)
	VMOVUPS Y5, 32(DX)(R11*2)
	VMOVUPS Y6, (CX)
	VMOVUPS Y7, 32(CX)
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ R12
	JNZ tile
	VZEROUPPER
	RET

// The ZMM kernel matMulF32TAVX512 multiplies rows of A by four rows of B,
// both along k: C = A·Bᵀ. Z24-Z27 hold 16 floats of each row of B, and each
// row of A takes a register of accumulators per row of B (Z0-Z23 for six
// rows), summed across their lanes once at the end: 10 loads for 24 FMAs
// of 16 lanes, against 6 for 8 of 8 in matMulF32AVX2 (Zen 4 runs a ZMM FMA
// as two halves, so there the gain is in instructions and loads; Zen 5,
// this machine kind, has full-width ZMM FMAs).

// F32T_LOADB loads the four rows of B at column block off.
#define F32T_LOADB \
	VMOVUPS (R14), Z24; \
	VMOVUPS (R14)(R9*1), Z25; \
	VMOVUPS (R14)(R9*2), Z26; \
	VMOVUPS (R15), Z27

// F32T_ROW adds the products of 16 floats of a row of A at src with the
// four rows of B to the accumulators c0-c3.
#define F32T_ROW(src, c0, c1, c2, c3) \
	VMOVUPS src, Z28; \
	VFMADD231PS Z24, Z28, c0; \
	VFMADD231PS Z25, Z28, c1; \
	VFMADD231PS Z26, Z28, c2; \
	VFMADD231PS Z27, Z28, c3

#define F32T_ZERO(c0, c1, c2, c3) \
	VPXORD c0, c0, c0; \
	VPXORD c1, c1, c1; \
	VPXORD c2, c2, c2; \
	VPXORD c3, c3, c3

// F32T_START points AX and BX at rows 0 and 3 of the group of A at SI, R14
// and R15 at rows 0 and 3 of B, and R13 at the count of column blocks.
#define F32T_START \
	MOVQ SI, AX; \
	LEAQ (SI)(R8*2), BX; \
	ADDQ R8, BX; \
	MOVQ DI, R14; \
	LEAQ (DI)(R9*2), R15; \
	ADDQ R9, R15; \
	MOVQ R10, R13

#define F32T_NEXT \
	ADDQ $64, AX; \
	ADDQ $64, BX; \
	ADDQ $64, R14; \
	ADDQ $64, R15

// F32T_STORE sums each of c0-c3 across its lanes and stores the four sums
// at dst: the lanes of each pair are interleaved and added, then the pairs
// of pairs, which leaves the four partial sums side by side in each
// 128-bit lane, and the lanes are added. Clobbers Z28-Z31.
#define F32T_STORE(c0, c1, c2, c3, dst) \
	VUNPCKLPS c1, c0, Z28; \
	VUNPCKHPS c1, c0, Z29; \
	VADDPS Z29, Z28, Z28; \
	VUNPCKLPS c3, c2, Z30; \
	VUNPCKHPS c3, c2, Z31; \
	VADDPS Z31, Z30, Z30; \
	VUNPCKLPD Z30, Z28, Z29; \
	VUNPCKHPD Z30, Z28, Z31; \
	VADDPS Z31, Z29, Z29; \
	VEXTRACTF64X4 $1, Z29, Y30; \
	VADDPS Y30, Y29, Y29; \
	VEXTRACTF32X4 $1, Y29, X30; \
	VADDPS X30, X29, X29; \
	VMOVUPS X29, dst

#define F32T_ROWS6 \
	F32T_ROW((AX), Z0, Z1, Z2, Z3); \
	F32T_ROW((AX)(R8*1), Z4, Z5, Z6, Z7); \
	F32T_ROW((AX)(R8*2), Z8, Z9, Z10, Z11); \
	F32T_ROW((BX), Z12, Z13, Z14, Z15); \
	F32T_ROW((BX)(R8*1), Z16, Z17, Z18, Z19); \
	F32T_ROW((BX)(R8*2), Z20, Z21, Z22, Z23)

// func matMulF32TAVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, m int, pf *byte)
//
// Six rows of A at a time, then a tail of one to five. The first group
// prefetches the next four rows of weights the caller widens (pf): 128
// bytes a column block is 4 rows of 16 F16 or BF16 values.
TEXT ·matMulF32TAVX512(SB), NOSPLIT, $0-72
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R8
	SHLQ $2, R8
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	SHLQ $2, R9
	MOVQ k+32(FP), R10
	SHRQ $4, R10
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R11
	SHLQ $2, R11
	MOVQ m+56(FP), R12
	MOVQ pf+64(FP), CX
	CMPQ R12, $6
	JLT  tail

	F32T_ZERO(Z0, Z1, Z2, Z3)
	F32T_ZERO(Z4, Z5, Z6, Z7)
	F32T_ZERO(Z8, Z9, Z10, Z11)
	F32T_ZERO(Z12, Z13, Z14, Z15)
	F32T_ZERO(Z16, Z17, Z18, Z19)
	F32T_ZERO(Z20, Z21, Z22, Z23)
	F32T_START

first:
	PREFETCHT0 (CX)
	PREFETCHT0 64(CX)
	ADDQ $128, CX
	F32T_LOADB
	F32T_ROWS6
	F32T_NEXT
	DECQ R13
	JNZ  first
	JMP  store6

group6:
	F32T_ZERO(Z0, Z1, Z2, Z3)
	F32T_ZERO(Z4, Z5, Z6, Z7)
	F32T_ZERO(Z8, Z9, Z10, Z11)
	F32T_ZERO(Z12, Z13, Z14, Z15)
	F32T_ZERO(Z16, Z17, Z18, Z19)
	F32T_ZERO(Z20, Z21, Z22, Z23)
	F32T_START

loop6:
	F32T_LOADB
	F32T_ROWS6
	F32T_NEXT
	DECQ R13
	JNZ  loop6

store6:
	LEAQ (DX)(R11*2), R14
	ADDQ R11, R14 // row 3 of C
	F32T_STORE(Z0, Z1, Z2, Z3, (DX))
	F32T_STORE(Z4, Z5, Z6, Z7, (DX)(R11*1))
	F32T_STORE(Z8, Z9, Z10, Z11, (DX)(R11*2))
	F32T_STORE(Z12, Z13, Z14, Z15, (R14))
	F32T_STORE(Z16, Z17, Z18, Z19, (R14)(R11*1))
	F32T_STORE(Z20, Z21, Z22, Z23, (R14)(R11*2))
	LEAQ (SI)(R8*4), SI
	LEAQ (SI)(R8*2), SI // 6 rows of A on
	LEAQ (DX)(R11*4), DX
	LEAQ (DX)(R11*2), DX
	SUBQ $6, R12
	CMPQ R12, $6
	JGE  group6

tail:
	CMPQ R12, $0
	JEQ  done
	F32T_ZERO(Z0, Z1, Z2, Z3)
	F32T_ZERO(Z4, Z5, Z6, Z7)
	F32T_ZERO(Z8, Z9, Z10, Z11)
	F32T_ZERO(Z12, Z13, Z14, Z15)
	F32T_ZERO(Z16, Z17, Z18, Z19)
	F32T_START
	LEAQ (DX)(R11*2), CX
	ADDQ R11, CX // row 3 of C
	CMPQ R12, $2
	JLT  loop1
	JEQ  loop2
	CMPQ R12, $4
	JLT  loop3
	JEQ  loop4

loop5:
	F32T_LOADB
	F32T_ROW((AX), Z0, Z1, Z2, Z3)
	F32T_ROW((AX)(R8*1), Z4, Z5, Z6, Z7)
	F32T_ROW((AX)(R8*2), Z8, Z9, Z10, Z11)
	F32T_ROW((BX), Z12, Z13, Z14, Z15)
	F32T_ROW((BX)(R8*1), Z16, Z17, Z18, Z19)
	F32T_NEXT
	DECQ R13
	JNZ  loop5
	F32T_STORE(Z16, Z17, Z18, Z19, (CX)(R11*1))
	JMP  store4

loop4:
	F32T_LOADB
	F32T_ROW((AX), Z0, Z1, Z2, Z3)
	F32T_ROW((AX)(R8*1), Z4, Z5, Z6, Z7)
	F32T_ROW((AX)(R8*2), Z8, Z9, Z10, Z11)
	F32T_ROW((BX), Z12, Z13, Z14, Z15)
	F32T_NEXT
	DECQ R13
	JNZ  loop4

store4:
	F32T_STORE(Z12, Z13, Z14, Z15, (CX))
	JMP  store3

loop3:
	F32T_LOADB
	F32T_ROW((AX), Z0, Z1, Z2, Z3)
	F32T_ROW((AX)(R8*1), Z4, Z5, Z6, Z7)
	F32T_ROW((AX)(R8*2), Z8, Z9, Z10, Z11)
	F32T_NEXT
	DECQ R13
	JNZ  loop3

store3:
	F32T_STORE(Z8, Z9, Z10, Z11, (DX)(R11*2))
	JMP  store2

loop2:
	F32T_LOADB
	F32T_ROW((AX), Z0, Z1, Z2, Z3)
	F32T_ROW((AX)(R8*1), Z4, Z5, Z6, Z7)
	F32T_NEXT
	DECQ R13
	JNZ  loop2

store2:
	F32T_STORE(Z4, Z5, Z6, Z7, (DX)(R11*1))
	JMP  store1

loop1:
	F32T_LOADB
	F32T_ROW((AX), Z0, Z1, Z2, Z3)
	F32T_NEXT
	DECQ R13
	JNZ  loop1

store1:
	F32T_STORE(Z0, Z1, Z2, Z3, (DX))

done:
	VZEROUPPER
	RET

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
