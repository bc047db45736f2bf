//go:build amd64 && !purego

#include "textflag.h"

// HPF is how far ahead of the row being read the F16/BF16 row kernels
// prefetch: decode calls them row after row over contiguous rows, so the
// prefetch runs into the rows that follow. 8 KiB gave +3-5% on SmolLM's
// F16 and BF16 decode (2 threads, seven alternating rounds; 32 KiB was
// no better).
#define HPF 8192

// WIDEN_F16 and WIDEN_BF16 load 8 values at src into Y as float32: a
// BF16 value is the high half of its float32.
#define WIDEN_F16(src, Y) VCVTPH2PS src, Y
#define WIDEN_BF16(src, Y) \
	VPMOVZXWD src, Y; \
	VPSLLD    $16, Y, Y

// HALF_ROWS is the body of matVecF16RowsAVX2 and matVecBF16RowsAVX2,
// the values widened by WIDEN: out[r] = Σ w[r][i]·x[i] for rows rows of n
// values one after the other (n a multiple of 32): each row 64 elements (two cache lines, two
// prefetches) a step into four accumulators, 32 for a row's odd last
// step, the row loop in the kernel, the rows read as one stream. (32
// elements a step: Llama-1B F16 decode 7.2-7.7 against 8.3-8.7 tok/s on
// an AVX2 Zen 3, 2 threads; 1B/2 F16 37.2 against 39.8, the mean of seven
// alternated rounds, llama.cpp 38.3.) (Four rows at
// a time, sharing each load of x, ran faster where the weights fit in
// the caches (test-256: 4,800 against 3,700 tok/s) but slower from memory,
// four streams at once (Llama-1B F16: 14-17 against 20.5).)
#define HALF_ROWS(WIDEN) \
	MOVQ w+0(FP), SI; \
	MOVQ x+8(FP), DI; \
	MOVQ n+16(FP), DX; \
	MOVQ out+24(FP), R8; \
	MOVQ rows+32(FP), R9; \
row: \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	MOVQ   DI, BX; \
	MOVQ   DX, CX; \
	CMPQ   CX, $64; \
	JL     tail; \
loop: \
	PREFETCHT0  HPF(SI); \
	PREFETCHT0  (HPF+64)(SI); \
	WIDEN((SI), Y4); \
	WIDEN(16(SI), Y5); \
	WIDEN(32(SI), Y6); \
	WIDEN(48(SI), Y7); \
	WIDEN(64(SI), Y8); \
	WIDEN(80(SI), Y9); \
	WIDEN(96(SI), Y10); \
	WIDEN(112(SI), Y11); \
	VFMADD231PS (BX), Y4, Y0; \
	VFMADD231PS 32(BX), Y5, Y1; \
	VFMADD231PS 64(BX), Y6, Y2; \
	VFMADD231PS 96(BX), Y7, Y3; \
	VFMADD231PS 128(BX), Y8, Y0; \
	VFMADD231PS 160(BX), Y9, Y1; \
	VFMADD231PS 192(BX), Y10, Y2; \
	VFMADD231PS 224(BX), Y11, Y3; \
	ADDQ        $128, SI; \
	ADDQ        $256, BX; \
	SUBQ        $64, CX; \
	CMPQ        CX, $64; \
	JGE         loop; \
tail: \
	TESTQ       CX, CX; \
	JZ          sum; \
	PREFETCHT0  HPF(SI); \
	WIDEN((SI), Y4); \
	WIDEN(16(SI), Y5); \
	WIDEN(32(SI), Y6); \
	WIDEN(48(SI), Y7); \
	VFMADD231PS (BX), Y4, Y0; \
	VFMADD231PS 32(BX), Y5, Y1; \
	VFMADD231PS 64(BX), Y6, Y2; \
	VFMADD231PS 96(BX), Y7, Y3; \
	ADDQ        $64, SI; \
sum: \
	VADDPS       Y1, Y0, Y0; \
	VADDPS       Y3, Y2, Y2; \
	VADDPS       Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0; \
	MOVSS        X0, (R8); \
	ADDQ         $4, R8; \
	DECQ         R9; \
	JNZ          row; \
	VZEROUPPER; \
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
TEXT ·matVecF16RowsAVX2(SB), NOSPLIT, $0-40
	HALF_ROWS(WIDEN_F16)

// func matVecBF16RowsAVX2(w *uint16, x *float32, n int, out *float32, rows int)
TEXT ·matVecBF16RowsAVX2(SB), NOSPLIT, $0-40
	HALF_ROWS(WIDEN_BF16)
