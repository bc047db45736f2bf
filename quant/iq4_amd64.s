//go:build amd64 && !purego

#include "textflag.h"
#include "matvec_amd64.h"

// AVX2 IQ4 dot products. VPSHUFB looks each 4-bit index up in ggml's
// 16-entry table (kept in both lanes), giving the weights as int8; the
// signs then move onto the activations (VPSIGNB) so VPMADDUBSW can multiply
// |w| (unsigned) by ±x (signed), as in the Q4_0 kernels. |w| ≤ 127 and
// |x| ≤ 127, so the int16 pair sums cannot saturate.

DATA iq4tab<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4tab<>+8(SB)/8, $0x7159453526190d01
GLOBL iq4tab<>(SB), RODATA|NOPTR, $16

DATA iq4nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4nib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4nib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL iq4nib<>(SB), RODATA|NOPTR, $32

DATA iq4one<>+0(SB)/8, $0x0001000100010001
DATA iq4one<>+8(SB)/8, $0x0001000100010001
DATA iq4one<>+16(SB)/8, $0x0001000100010001
DATA iq4one<>+24(SB)/8, $0x0001000100010001
GLOBL iq4one<>(SB), RODATA|NOPTR, $32

#define IQ4_CONSTS \
	VBROADCASTI128 iq4tab<>(SB), Y10; \
	VMOVDQU iq4nib<>(SB), Y11; \
	VMOVDQU iq4one<>(SB), Y12

// IQ4_DOT32 leaves in dst the eight int32 partial sums of the 32 table
// values indexed by the 16 bytes at qs with the 32 int8s at xs.
// Clobbers Y1–Y3.
#define IQ4_DOT32(qs, xs, dst) \
	VMOVDQU qs, X1; \
	VPSRLW $4, X1, X2; \
	VINSERTI128 $1, X2, Y1, Y1; \
	VPAND Y11, Y1, Y1; \
	VPSHUFB Y1, Y10, Y1; \
	VMOVDQU xs, Y3; \
	VPSIGNB Y1, Y1, Y2; \
	VPSIGNB Y1, Y3, Y3; \
	VPMADDUBSW Y3, Y2, Y2; \
	VPMADDWD Y12, Y2, dst

#define IQ4_HSUM \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VPERMILPS $0x4e, X0, X1; \
	VADDPS X1, X0, X0; \
	VPERMILPS $0xb1, X0, X1; \
	VADDSS X1, X0, X0

// IQ4_NL_BLOCK adds the product of the IQ4_NL block at SI and the Q8_0
// block at DI to Y0 and advances both. Clobbers AX, BX, Y1-Y5.
#define IQ4_NL_BLOCK \
	IQ4_DOT32(2(SI), 2(DI), Y2); \
	VCVTDQ2PS Y2, Y2; \
	MOVWLZX (SI), AX; \
	MOVWLZX (DI), BX; \
	VMOVD AX, X4; \
	VPINSRW $1, BX, X4, X4; \
	VCVTPH2PS X4, X4; \
	VMOVSHDUP X4, X5; \
	VMULSS X5, X4, X4; \
	VBROADCASTSS X4, Y4; \
	VFMADD231PS Y4, Y2, Y0; \
	ADDQ $18, SI; \
	ADDQ $34, DI

// IQ4_XS_BLOCK adds the product of the IQ4_XS super-block at SI and the
// Q8_K block at DI to Y0 and advances both. Sub-block ib's scale: the low
// nibbles come in order from the 32-bit scales_l shifted by 4 each time,
// the high bit pairs from scales_h shifted by 2. Clobbers AX, BX, DX,
// R8-R11, Y1-Y6.
#define IQ4_XS_BLOCK(label) \
	MOVWLZX 2(SI), R8; \
	MOVL 4(SI), R9; \
	LEAQ 8(SI), R10; \
	LEAQ 4(DI), R11; \
	MOVQ $8, DX; \
	VPXOR Y5, Y5, Y5; \
label: \
	IQ4_DOT32((R10), (R11), Y2); \
	MOVL R9, AX; \
	ANDL $15, AX; \
	MOVL R8, BX; \
	ANDL $3, BX; \
	SHLL $4, BX; \
	ORL BX, AX; \
	SUBL $32, AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, Y6; \
	VPMULLD Y6, Y2, Y2; \
	VPADDD Y2, Y5, Y5; \
	SHRL $4, R9; \
	SHRL $2, R8; \
	ADDQ $16, R10; \
	ADDQ $32, R11; \
	DECQ DX; \
	JNZ label; \
	VCVTDQ2PS Y5, Y5; \
	MOVWLZX (SI), AX; \
	VMOVD AX, X4; \
	VCVTPH2PS X4, X4; \
	VMULSS (DI), X4, X4; \
	VBROADCASTSS X4, Y4; \
	VFMADD231PS Y4, Y5, Y0; \
	ADDQ $136, SI; \
	ADDQ $292, DI

// func dotIQ4_NLQ8_0AVX2(w, x *byte, nblocks int) float32
TEXT ·dotIQ4_NLQ8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	IQ4_CONSTS
	VXORPS Y0, Y0, Y0
	TESTQ CX, CX
	JZ nldone

nlloop:
	IQ4_NL_BLOCK
	DECQ CX
	JNZ nlloop

nldone:
	IQ4_HSUM
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotIQ4_XSQ8_KAVX2(w, x *byte, nblocks int) float32
TEXT ·dotIQ4_XSQ8_KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	IQ4_CONSTS
	VXORPS Y0, Y0, Y0
	TESTQ CX, CX
	JZ xsdone

xsblock:
	IQ4_XS_BLOCK(xssub)
	DECQ CX
	JNZ xsblock

xsdone:
	IQ4_HSUM
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func matVecIQ4_NLQ8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)
//
// dotIQ4_NLQ8_0AVX2 for rows consecutive rows of w against one Q8_0 row
// x, into out[0:rows] (nblocks ≥ 1, rows ≥ 1): the row loop here, not a
// Go call a row. x in R15, out in R13, the rows left in R14.
TEXT ·matVecIQ4_NLQ8_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R15
	MOVQ out+24(FP), R13
	MOVQ rows+32(FP), R14
	IQ4_CONSTS
	MATVEC_ROWS(IQ4_NL_BLOCK, IQ4_HSUM, Y0, X0, nblocks+16(FP), nlmvrow, nlmvloop)

// func matVecIQ4_XSQ8_KAVX2(w, x *byte, nblocks int, out *float32, rows int)
//
// dotIQ4_XSQ8_KAVX2 the same way, for one Q8_K row x.
TEXT ·matVecIQ4_XSQ8_KAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R15
	MOVQ out+24(FP), R13
	MOVQ rows+32(FP), R14
	IQ4_CONSTS
	MATVEC_ROWS(IQ4_XS_BLOCK(xsmvsub), IQ4_HSUM, Y0, X0, nblocks+16(FP), xsmvrow, xsmvloop)

// IQ4_XS_TOKEN adds one token's products with the sub-block of
// IQ4_XS_SUB4 (its values at xs) to its int32 sums acc. Clobbers Y3, Y5.
#define IQ4_XS_TOKEN(xs, acc) \
	VMOVDQU xs, Y3; \
	VPSIGNB Y1, Y3, Y3; \
	VPMADDUBSW Y3, Y2, Y5; \
	VPMADDWD Y6, Y5, Y5; \
	VPADDD Y5, acc, acc

// IQ4_XS_SUB4 adds the products of one 32-value sub-block of the IQ4_XS
// block at SI with four tokens' Q8_K values to their int32 sums Y0, Y4,
// Y7 and Y8: the table values are looked up once (Y1, their magnitudes
// Y2), and the sub-block's scale ls − 32 (from R9's low nibble and R8's
// low two bits) multiplies each token's int16 pair sums in VPMADDWD. R10
// walks the codes, R11 token 0's values (the others R12, 2·R12 and R13
// bytes on). Clobbers AX, BX, Y1-Y3, Y5, Y6.
#define IQ4_XS_SUB4 \
	VMOVDQU (R10), X1; \
	VPSRLW $4, X1, X2; \
	VINSERTI128 $1, X2, Y1, Y1; \
	VPAND Y11, Y1, Y1; \
	VPSHUFB Y1, Y10, Y1; \
	VPSIGNB Y1, Y1, Y2; \
	MOVL R9, AX; \
	ANDL $15, AX; \
	MOVL R8, BX; \
	ANDL $3, BX; \
	SHLL $4, BX; \
	ORL BX, AX; \
	SUBL $32, AX; \
	VMOVD AX, X6; \
	VPBROADCASTW X6, Y6; \
	IQ4_XS_TOKEN((R11), Y0); \
	IQ4_XS_TOKEN((R11)(R12*1), Y4); \
	IQ4_XS_TOKEN((R11)(R12*2), Y7); \
	IQ4_XS_TOKEN((R11)(R13*1), Y8); \
	SHRL $4, R9; \
	SHRL $2, R8; \
	ADDQ $16, R10; \
	ADDQ $32, R11

// func dotIQ4XSRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)
//
// dotIQ4_XSQ8_KAVX2 for four tokens' Q8_K rows xstride bytes apart (nblocks
// ≥ 1), adding token t's eight partial sums to acc[8t:8t+8]: each
// sub-block's codes are looked up once for the four. The integer sums are
// the row kernel's, the scale in VPMADDWD where it multiplies after it.
TEXT ·dotIQ4XSRow4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xstride+16(FP), R12
	MOVQ nblocks+24(FP), CX
	MOVQ acc+32(FP), R14
	LEAQ (R12)(R12*2), R13
	IQ4_CONSTS
	VMOVUPS (R14), Y13
	VMOVUPS 32(R14), Y14
	VMOVUPS 64(R14), Y15
	VMOVUPS 96(R14), Y9

xs4block:
	MOVWLZX 2(SI), R8
	MOVL 4(SI), R9
	LEAQ 8(SI), R10
	LEAQ 4(DI), R11
	MOVQ $8, DX
	VPXOR Y0, Y0, Y0
	VPXOR Y4, Y4, Y4
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8

xs4sub:
	IQ4_XS_SUB4
	DECQ DX
	JNZ  xs4sub
	MOVWLZX (SI), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5
	VMULSS (DI), X5, X6
	VBROADCASTSS X6, Y6
	VCVTDQ2PS Y0, Y0
	VFMADD231PS Y6, Y0, Y13
	VMULSS (DI)(R12*1), X5, X6
	VBROADCASTSS X6, Y6
	VCVTDQ2PS Y4, Y4
	VFMADD231PS Y6, Y4, Y14
	VMULSS (DI)(R12*2), X5, X6
	VBROADCASTSS X6, Y6
	VCVTDQ2PS Y7, Y7
	VFMADD231PS Y6, Y7, Y15
	VMULSS (DI)(R13*1), X5, X6
	VBROADCASTSS X6, Y6
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y6, Y8, Y9
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  xs4block
	VMOVUPS Y13, (R14)
	VMOVUPS Y14, 32(R14)
	VMOVUPS Y15, 64(R14)
	VMOVUPS Y9, 96(R14)
	VZEROUPPER
	RET
