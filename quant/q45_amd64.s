//go:build amd64 && !purego

#include "textflag.h"

// Dot products of Q4_1, Q5_0 and Q5_1 rows with float32 activations: each
// block's codes widened to floats in registers and multiplied by the
// activations, the values those of the dequantizers (d·q + m; d·(q − 16)).
// AVX2 + FMA + F16C. Nibble bytes: elements 0-15 in the low nibbles of the
// 16 code bytes, 16-31 in the high ones; the fifth bits in a u32, bit i for
// element i.

DATA nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nib<>(SB), RODATA|NOPTR, $16

DATA sixteen<>+0(SB)/8, $0x1010101010101010
DATA sixteen<>+8(SB)/8, $0x1010101010101010
GLOBL sixteen<>(SB), RODATA|NOPTR, $16

// Bytes 0-7 take byte 0 of the high-bit word, 8-15 byte 1 (lo); 2 and 3 (hi).
DATA spreadlo<>+0(SB)/8, $0x0000000000000000
DATA spreadlo<>+8(SB)/8, $0x0101010101010101
GLOBL spreadlo<>(SB), RODATA|NOPTR, $16
DATA spreadhi<>+0(SB)/8, $0x0202020202020202
DATA spreadhi<>+8(SB)/8, $0x0303030303030303
GLOBL spreadhi<>(SB), RODATA|NOPTR, $16

DATA bits<>+0(SB)/8, $0x8040201008040201
DATA bits<>+8(SB)/8, $0x8040201008040201
GLOBL bits<>(SB), RODATA|NOPTR, $16

// CONSTS loads the masks into X9-X13.
#define CONSTS \
	VMOVDQU nib<>(SB), X13; \
	VMOVDQU spreadlo<>(SB), X12; \
	VMOVDQU spreadhi<>(SB), X11; \
	VMOVDQU bits<>(SB), X10; \
	VMOVDQU sixteen<>(SB), X9

// NIBBLES splits the 16 code bytes at off(SI) into X2 (elements 0-15) and
// X3 (16-31), one code a byte.
#define NIBBLES(off) \
	VMOVDQU off(SI), X2; \
	VPSRLW  $4, X2, X3; \
	VPAND   X13, X2, X2; \
	VPAND   X13, X3, X3

// HIGHBITS adds 16 to the codes whose bit is set in the u32 at off(SI).
#define HIGHBITS(off) \
	VPBROADCASTD off(SI), X4; \
	VPSHUFB  X12, X4, X5; \
	VPSHUFB  X11, X4, X6; \
	VPAND    X10, X5, X5; \
	VPAND    X10, X6, X6; \
	VPCMPEQB X10, X5, X5; \
	VPCMPEQB X10, X6, X6; \
	VPAND    X9, X5, X5; \
	VPAND    X9, X6, X6; \
	VPOR     X5, X2, X2; \
	VPOR     X6, X3, X3

// FLOATS widens the 32 codes of X2, X3 (bytes; MOVX the sign or zero
// extension) to floats in Y4-Y7.
#define FLOATS(MOVX) \
	MOVX      X2, Y4; \
	VPSRLDQ   $8, X2, X2; \
	MOVX      X2, Y5; \
	MOVX      X3, Y6; \
	VPSRLDQ   $8, X3, X3; \
	MOVX      X3, Y7; \
	VCVTDQ2PS Y4, Y4; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y6, Y6; \
	VCVTDQ2PS Y7, Y7

// HALF loads the f16 at off(SI) as a float broadcast to Y.
#define HALF(off, X, Y) \
	MOVWLZX      off(SI), AX; \
	VMOVD        AX, X; \
	VCVTPH2PS    X, X; \
	VBROADCASTSS X, Y

// DOT32 adds the dot product of Y4-Y7 with the 32 activations at (DI) to Y0
// and Y1.
#define DOT32 \
	VFMADD231PS (DI), Y4, Y0; \
	VFMADD231PS 32(DI), Y5, Y1; \
	VFMADD231PS 64(DI), Y6, Y0; \
	VFMADD231PS 96(DI), Y7, Y1

// func dotQ5_0F32AVX2(w *byte, x *float32, nblocks int) float32
//
// Q5_0 block (22 bytes): d f16, qh u32, qs[16]; value d·(q − 16). The
// block's sum Σ(q − 16)·x is scaled by d once.
TEXT ·dotQ5_0F32AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	CONSTS
	VXORPS Y0, Y0, Y0

q50loop:
	HALF(0, X8, Y8)
	NIBBLES(6)
	HIGHBITS(2)
	VPSUBB X9, X2, X2
	VPSUBB X9, X3, X3
	FLOATS(VPMOVSXBD)
	VMULPS      (DI), Y4, Y4
	VFMADD231PS 32(DI), Y5, Y4
	VFMADD231PS 64(DI), Y6, Y4
	VFMADD231PS 96(DI), Y7, Y4
	VFMADD231PS Y4, Y8, Y0
	ADDQ        $22, SI
	ADDQ        $128, DI
	DECQ        CX
	JNZ         q50loop
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func dotQ4_1F32AVX2(w *byte, x *float32, nblocks int) float32
//
// Q4_1 block (20 bytes): d f16, m f16, qs[16]; value d·q + m.
TEXT ·dotQ4_1F32AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

q41loop:
	HALF(0, X8, Y8)
	HALF(2, X14, Y14)
	NIBBLES(4)
	FLOATS(VPMOVZXBD)
	VFMADD213PS Y14, Y8, Y4
	VFMADD213PS Y14, Y8, Y5
	VFMADD213PS Y14, Y8, Y6
	VFMADD213PS Y14, Y8, Y7
	DOT32
	ADDQ $20, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  q41loop
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func dotQ5_1F32AVX2(w *byte, x *float32, nblocks int) float32
//
// Q5_1 block (24 bytes): d f16, m f16, qh u32, qs[16]; value d·q + m.
TEXT ·dotQ5_1F32AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

q51loop:
	HALF(0, X8, Y8)
	HALF(2, X14, Y14)
	NIBBLES(8)
	HIGHBITS(4)
	FLOATS(VPMOVZXBD)
	VFMADD213PS Y14, Y8, Y4
	VFMADD213PS Y14, Y8, Y5
	VFMADD213PS Y14, Y8, Y6
	VFMADD213PS Y14, Y8, Y7
	DOT32
	ADDQ $24, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  q51loop
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET
