//go:build amd64 && !purego

#include "textflag.h"

// HPF is how far ahead of the row being read the F16/BF16 row kernels
// prefetch: decode calls them row after row over contiguous rows, so the
// prefetch runs into the rows that follow. 8 KiB gave +3-5% on SmolLM's
// F16 and BF16 decode (2 threads, seven alternating rounds; 32 KiB was
// no better).
#define HPF 8192

// func dotBF16F32AVX2(w *uint16, x *float32, n int) float32
//
// As matVecF16RowsAVX2 for one row, a BF16 value widened by zero-extending
// it into the high half of a 32-bit lane.
TEXT ·dotBF16F32AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

bf16loop:
	PREFETCHT0 HPF(SI)
	VPMOVZXWD (SI), Y4
	VPMOVZXWD 16(SI), Y5
	VPMOVZXWD 32(SI), Y6
	VPMOVZXWD 48(SI), Y7
	VPSLLD $16, Y4, Y4
	VPSLLD $16, Y5, Y5
	VPSLLD $16, Y6, Y6
	VPSLLD $16, Y7, Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JNZ  bf16loop
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func widenF16AVX2(w *uint16, dst *float32, n int)
//
// dst[i] = w[i] as float32, for n > 0, a multiple of 8.
TEXT ·widenF16AVX2(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

wf16loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       wf16loop
	VZEROUPPER
	RET

// func widenBF16AVX2(w *uint16, dst *float32, n int)
//
// As widenF16AVX2 for BF16 values.
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

wbf16loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       wbf16loop
	VZEROUPPER
	RET

// func matVecF16RowsAVX2(w *uint16, x *float32, n int, out *float32, rows int)
//
// out[r] = Σ w[r][i]·x[i] for rows rows of n F16 values one after the
// other (n a multiple of 32): each row 64 elements (two cache lines, two
// prefetches) a step into four accumulators, 32 for a row's odd last
// step, the row loop in the kernel, the rows read as one stream. (32
// elements a step: Llama-1B F16 decode 7.2-7.7 against 8.3-8.7 tok/s on
// an AVX2 Zen 3, 2 threads; 1B/2 F16 37.2 against 39.8, the mean of seven
// alternated rounds, llama.cpp 38.3.) (Four rows at
// a time, sharing each load of x, ran faster where the weights fit in
// the caches (test-256: 4,800 against 3,700 tok/s) but slower from memory,
// four streams at once (Llama-1B F16: 14-17 against 20.5).)
TEXT ·matVecF16RowsAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), DX
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9

f16row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   DI, BX
	MOVQ   DX, CX

	CMPQ CX, $64
	JL   f16rowtail

f16rowloop:
	PREFETCHT0  HPF(SI)
	PREFETCHT0  (HPF+64)(SI)
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VCVTPH2PS   64(SI), Y8
	VCVTPH2PS   80(SI), Y9
	VCVTPH2PS   96(SI), Y10
	VCVTPH2PS   112(SI), Y11
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	VFMADD231PS 128(BX), Y8, Y0
	VFMADD231PS 160(BX), Y9, Y1
	VFMADD231PS 192(BX), Y10, Y2
	VFMADD231PS 224(BX), Y11, Y3
	ADDQ        $128, SI
	ADDQ        $256, BX
	SUBQ        $64, CX
	CMPQ        CX, $64
	JGE         f16rowloop

f16rowtail:
	TESTQ       CX, CX
	JZ          f16rowsum
	PREFETCHT0  HPF(SI)
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	ADDQ        $64, SI

f16rowsum:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	MOVSS        X0, (R8)
	ADDQ         $4, R8
	DECQ         R9
	JNZ          f16row
	VZEROUPPER
	RET
