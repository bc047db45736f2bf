//go:build amd64 && !purego

#include "textflag.h"

// AVX2 inner loops of the K-quant × Q8_K dot products. Weight codes are
// unsigned, so VPMADDUBSW multiplies them with the signed activation codes
// directly (at most 2·15·127 per int16 pair, no saturation), and
// VPMADDWD against the broadcast sub-block scale both widens to int32 and
// applies the scale, so one accumulator serves the whole super-block.

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
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, (DX)
	ADDQ $144, SI
	ADDQ $292, DI
	ADDQ $16, BX
	ADDQ $4, DX
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET
