//go:build amd64 && !purego

#include "textflag.h"

// AVX2 + FMA + F16C kernels. Each block's integer dot product is formed
// with VPMADDUBSW (u8 × s8 → s16 pairs) and VPMADDWD against ones (→ s32),
// converted to float and FMA-accumulated with the product of the two block
// scales, which VCVTPH2PS converts from fp16.
//
// Q4_0 nibbles are unpacked without a lane-crossing insert: VBROADCASTI128
// puts the 16 bytes in both 128-bit lanes, VPSRLVD shifts only the high
// lane's dwords right by 4, and a mask keeps one nibble per byte, giving the
// 32 codes in element order. The codes are then unsigned (0..15), so
// instead of llama.cpp's sign trick the Q4_0 kernels compute
// Σ(q−8)·y as maddubs(q, y) − maddubs(8, y): one instruction fewer per
// block, and exact for any y. The Q8_0 kernels, whose weight codes are
// signed, use the sign trick (|w| as the unsigned operand, w's sign moved
// onto y), which needs y ≠ −128.
//
// The ...VNNI variants of the MatVec kernels, for CPUs with AVX512-VNNI and
// AVX512VL (e.g. AMD Zen 4, Intel Ice Lake and later), replace the
// VPMADDUBSW/VPMADDWD pair by one VPDPBUSD on 256-bit registers; they give
// bit-identical results, as the integer sums are exact either way.

// Dword shift counts for VPSRLVD: 0 in the low lane, 4 in the high lane.
DATA nibbleShift<>+0x00(SB)/8, $0
DATA nibbleShift<>+0x08(SB)/8, $0
DATA nibbleShift<>+0x10(SB)/8, $0x0000000400000004
DATA nibbleShift<>+0x18(SB)/8, $0x0000000400000004
GLOBL nibbleShift<>(SB), RODATA|NOPTR, $32

// VPERMD indices that undo the lane interleaving of VPACKSSDW/VPACKSSWB.
DATA packPerm<>+0x00(SB)/4, $0
DATA packPerm<>+0x04(SB)/4, $4
DATA packPerm<>+0x08(SB)/4, $1
DATA packPerm<>+0x0c(SB)/4, $5
DATA packPerm<>+0x10(SB)/4, $2
DATA packPerm<>+0x14(SB)/4, $6
DATA packPerm<>+0x18(SB)/4, $3
DATA packPerm<>+0x1c(SB)/4, $7
GLOBL packPerm<>(SB), RODATA|NOPTR, $32

// Constants of the Q4_0/Q8_0 kernels:
// Y12 nibble shift counts, Y13 bytes 0x0f, Y14 bytes 0x08, Y15 int16 ones.
#define SETUP_CONSTS \
	VMOVDQU nibbleShift<>(SB), Y12; \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X13; \
	VPBROADCASTD X13, Y13; \
	MOVL $0x08080808, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW $15, Y15, Y15

// BLOCK_SCALE sets Y4 to 8 copies of d(w)·d(x), the fp16 scales at the
// start of the blocks at w and x. Clobbers Y5.
#define BLOCK_SCALE(w, x) \
	VPBROADCASTW (w), X4; \
	VCVTPH2PS X4, Y4; \
	VPBROADCASTW (x), X5; \
	VCVTPH2PS X5, Y5; \
	VMULPS Y5, Y4, Y4

// Q4_0_BLOCK adds the product of the Q4_0 block at SI and the Q8_0 block at
// DI to the 8 float lanes of acc. Clobbers Y1-Y5.
#define Q4_0_BLOCK(acc) \
	VBROADCASTI128 2(SI), Y1; \
	VPSRLVD Y12, Y1, Y1; \
	VPAND Y13, Y1, Y1; \
	VMOVDQU 2(DI), Y2; \
	VPMADDUBSW Y2, Y1, Y1; \
	VPMADDUBSW Y2, Y14, Y3; \
	VPSUBW Y3, Y1, Y1; \
	VPMADDWD Y15, Y1, Y1; \
	VCVTDQ2PS Y1, Y1; \
	BLOCK_SCALE(SI, DI); \
	VFMADD231PS Y4, Y1, acc

// Q8_0_BLOCK adds the product of the Q8_0 blocks at SI and DI to acc.
// Clobbers Y1-Y5.
#define Q8_0_BLOCK(acc) \
	VMOVDQU 2(SI), Y1; \
	VMOVDQU 2(DI), Y2; \
	VPABSB Y1, Y3; \
	VPSIGNB Y1, Y2, Y2; \
	VPMADDUBSW Y2, Y3, Y3; \
	VPMADDWD Y15, Y3, Y3; \
	VCVTDQ2PS Y3, Y3; \
	BLOCK_SCALE(SI, DI); \
	VFMADD231PS Y4, Y3, acc

// HSUM leaves the sum of the 8 lanes of y (whose low half is x) in x[0].
// Clobbers tmp.
#define HSUM(y, x, tmp) \
	VEXTRACTF128 $1, y, tmp; \
	VADDPS tmp, x, x; \
	VPERMILPS $0x4e, x, tmp; \
	VADDPS tmp, x, x; \
	VPERMILPS $0xb1, x, tmp; \
	VADDSS tmp, x, x

// ROW_LOOP runs BLOCK over CX block pairs at SI and DI, advancing both by
// a block, two blocks at a time into Y0 and Y6 (two accumulators hide the
// FMA latency). It leaves the row's 8-lane sum in Y0.
#define ROW_LOOP(BLOCK, wstride, label2, labeltail, labeldone) \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y6, Y6, Y6; \
label2: \
	CMPQ CX, $2; \
	JL labeltail; \
	BLOCK(Y0); \
	ADDQ $wstride, SI; \
	ADDQ $34, DI; \
	BLOCK(Y6); \
	ADDQ $wstride, SI; \
	ADDQ $34, DI; \
	SUBQ $2, CX; \
	JMP label2; \
labeltail: \
	TESTQ CX, CX; \
	JZ labeldone; \
	BLOCK(Y0); \
	ADDQ $wstride, SI; \
	ADDQ $34, DI; \
labeldone: \
	VADDPS Y6, Y0, Y0

// ROUND_Q8 scales v by Y8 and rounds it half away from zero to int32 lanes:
// trunc(v + copysign(0.49999997, v)) equals roundf(v) for every float32 in
// the int8 range (the sum's own rounding breaks exactly the ties that need
// breaking; checked exhaustively when this was written, see
// TestRoundHalfAwayTrick). Y14 holds the sign mask and Y13 0.49999997.
#define ROUND_Q8(v) \
	VMULPS Y8, v, v; \
	VANDPS Y14, v, Y9; \
	VORPS Y13, Y9, Y9; \
	VADDPS Y9, v, v; \
	VCVTTPS2DQ v, v

// The MatVec kernels walk four rows at once (rows 0-2 at SI, SI+R12,
// SI+2·R12, row 3 at R13; R12 is the row stride) so that each activation
// block is loaded, and its scale and correction term computed, once per
// four rows: about 12 instructions per row-block instead of 15. Leftover
// rows take the single-row loop.

// PREFETCH_START points R14 PFDIST bytes ahead of the group's first row.
// Each block step advances R14 by the bytes the step consumes (one block of
// each of four rows) and prefetches what it passes, so R14 sweeps the
// weights linearly, PFDIST ahead of the rows being read, without gaps. The
// hardware prefetcher alone cannot follow four short interleaved row
// streams: without this the kernel ran at half speed from DRAM.
//
// PFDIST covers DRAM latency at the kernels' consumption rate with room to
// spare. Measured on this machine kind (2 Zen 5 cores) on Llama-1B Q4_K_M's
// 279 MB Q8_0 head, both cores, GB/s: 4096 23.5–24.6, 32768 38.4–39.9; on
// a synthetic matrix of that size, one core / two: 1024 10.6 / 20.7, 4096
// 12.2 / 23.7, 8192 18.2 / 36.4, 16384 20–21 / 40–44, 32768 21.6 / 44,
// 65536 21.6 / 44.7. (An earlier measurement had 4096 best; prefetches
// past the matrix's end are harmless.)
#define PFDIST 32768
#define PREFETCH_START \
	MOVQ $PFDIST, R14; \
	ADDQ SI, R14

// MATVEC4_SHARED loads the activation block at DI: codes to Y2, the
// Q4_0 offset term maddubs(8, y) to Y3, and its scale to Y4.
#define MATVEC4_SHARED \
	VMOVDQU 2(DI), Y2; \
	VPMADDUBSW Y2, Y14, Y3; \
	VPBROADCASTW (DI), X4; \
	VCVTPH2PS X4, Y4

// Q4_0_ROW_TERM adds the product of the Q4_0 block whose codes are at
// codes and scale at scale with the shared activation block to acc.
// Clobbers Y5, Y6.
#define Q4_0_ROW_TERM(codes, scale, acc) \
	VBROADCASTI128 codes, Y5; \
	VPSRLVD Y12, Y5, Y5; \
	VPAND Y13, Y5, Y5; \
	VPMADDUBSW Y2, Y5, Y5; \
	VPSUBW Y3, Y5, Y5; \
	VPMADDWD Y15, Y5, Y5; \
	VCVTDQ2PS Y5, Y5; \
	VPBROADCASTW scale, X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y5, acc

// Q8_0_ROW_TERM is Q4_0_ROW_TERM for a Q8_0 weight block (Y3 unused).
#define Q8_0_ROW_TERM(codes, scale, acc) \
	VMOVDQU codes, Y5; \
	VPABSB Y5, Y6; \
	VPSIGNB Y5, Y2, Y5; \
	VPMADDUBSW Y5, Y6, Y5; \
	VPMADDWD Y15, Y5, Y5; \
	VCVTDQ2PS Y5, Y5; \
	VPBROADCASTW scale, X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y5, acc

// MATVEC4_STORE stores the sums of Y0, Y1, Y7, Y8 to four floats at R8,
// then moves SI from row 1 (where the block loop left it) to row 4, R8 on
// by four, and R9 down by four rows.
#define MATVEC4_STORE \
	VHADDPS Y1, Y0, Y0; \
	VHADDPS Y8, Y7, Y7; \
	VHADDPS Y7, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVUPS X0, (R8); \
	LEAQ (SI)(R12*2), SI; \
	ADDQ R12, SI; \
	ADDQ $16, R8; \
	SUBQ $4, R9

// MATVEC4_SHARED_VNNI loads the activation block at DI: codes to Y2,
// −8·Σy per dword (the Q4_0 offset term) to Y3, and its scale to Y4.
#define MATVEC4_SHARED_VNNI \
	VMOVDQU 2(DI), Y2; \
	VPXOR Y3, Y3, Y3; \
	VPSUBB Y2, Y3, Y9; \
	VPDPBUSD Y9, Y14, Y3; \
	VPBROADCASTW (DI), X4; \
	VCVTPH2PS X4, Y4

// Q4_0_ROW_TERM_VNNI is Q4_0_ROW_TERM with one VPDPBUSD, accumulating
// Σq·y onto the shared −8·Σy, for VPMADDUBSW, VPSUBW and VPMADDWD.
#define Q4_0_ROW_TERM_VNNI(codes, scale, acc) \
	VBROADCASTI128 codes, Y5; \
	VPSRLVD Y12, Y5, Y5; \
	VPAND Y13, Y5, Y5; \
	VMOVDQA Y3, Y6; \
	VPDPBUSD Y2, Y5, Y6; \
	VCVTDQ2PS Y6, Y5; \
	VPBROADCASTW scale, X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y5, acc

// Q8_0_ROW_TERM_VNNI is Q8_0_ROW_TERM with VPDPBUSD into a zeroed register
// for VPMADDUBSW and VPMADDWD.
#define Q8_0_ROW_TERM_VNNI(codes, scale, acc) \
	VMOVDQU codes, Y5; \
	VPABSB Y5, Y6; \
	VPSIGNB Y5, Y2, Y5; \
	VPXOR Y9, Y9, Y9; \
	VPDPBUSD Y5, Y6, Y9; \
	VCVTDQ2PS Y9, Y5; \
	VPBROADCASTW scale, X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y5, acc

// func dotQ4_0Q8_0AVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ4_0Q8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	SETUP_CONSTS
	ROW_LOOP(Q4_0_BLOCK, 18, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ8_0Q8_0AVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ8_0Q8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	SETUP_CONSTS
	ROW_LOOP(Q8_0_BLOCK, 34, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q4_1, Q5_0 and Q5_1 weights against Q8_0 activations: the Q4_0 unpack,
// the fifth bits spread to bytes (VPSHUFB picks the high-bit word's byte
// for each code byte, a per-byte bit mask and VPCMPEQB turn the bit into
// 0xff, 0x10 keeps the fifth bit), and the min term of Q4_1/Q5_1 as
// m·d(x)·Σy. Constants beside SETUP_CONSTS's: Y7 bytes 0x01, Y9 bytes
// 0x10, Y10 the byte picks, Y11 the bit masks.
DATA fifthPick<>+0x00(SB)/8, $0x0000000000000000
DATA fifthPick<>+0x08(SB)/8, $0x0101010101010101
DATA fifthPick<>+0x10(SB)/8, $0x0202020202020202
DATA fifthPick<>+0x18(SB)/8, $0x0303030303030303
GLOBL fifthPick<>(SB), RODATA|NOPTR, $32

DATA fifthBits<>+0x00(SB)/8, $0x8040201008040201
DATA fifthBits<>+0x08(SB)/8, $0x8040201008040201
DATA fifthBits<>+0x10(SB)/8, $0x8040201008040201
DATA fifthBits<>+0x18(SB)/8, $0x8040201008040201
GLOBL fifthBits<>(SB), RODATA|NOPTR, $32

#define SETUP_Q5_CONSTS \
	SETUP_CONSTS; \
	MOVL $0x01010101, AX; \
	VMOVD AX, X7; \
	VPBROADCASTD X7, Y7; \
	MOVL $0x10101010, AX; \
	VMOVD AX, X9; \
	VPBROADCASTD X9, Y9; \
	VMOVDQU fifthPick<>(SB), Y10; \
	VMOVDQU fifthBits<>(SB), Y11

// CODES4 leaves the 32 nibble codes at off(SI) in Y1, in element order.
#define CODES4(off) \
	VBROADCASTI128 off(SI), Y1; \
	VPSRLVD Y12, Y1, Y1; \
	VPAND Y13, Y1, Y1

// FIFTH adds 16 to the codes in Y1 whose bit is set in the u32 at off(SI).
// Clobbers Y3.
#define FIFTH(off) \
	VPBROADCASTD off(SI), Y3; \
	VPSHUFB Y10, Y3, Y3; \
	VPAND Y11, Y3, Y3; \
	VPCMPEQB Y11, Y3, Y3; \
	VPAND Y9, Y3, Y3; \
	VPOR Y3, Y1, Y1

// Q5_0_BLOCK adds the product of the Q5_0 block at SI (d, qh, qs) and the
// Q8_0 block at DI to acc: Σ(q−16)·y = maddubs(q, y) − maddubs(16, y).
#define Q5_0_BLOCK(acc) \
	CODES4(6); \
	FIFTH(2); \
	VMOVDQU 2(DI), Y2; \
	VPMADDUBSW Y2, Y1, Y1; \
	VPMADDUBSW Y2, Y9, Y3; \
	VPSUBW Y3, Y1, Y1; \
	VPMADDWD Y15, Y1, Y1; \
	VCVTDQ2PS Y1, Y1; \
	BLOCK_SCALE(SI, DI); \
	VFMADD231PS Y4, Y1, acc

// MIN_BLOCK finishes a Q4_1/Q5_1 block whose codes are in Y1: adds
// d·d(x)·Σq·y + m·d(x)·Σy to acc. Clobbers Y2-Y5.
#define MIN_BLOCK(acc) \
	VMOVDQU 2(DI), Y2; \
	VPMADDUBSW Y2, Y1, Y1; \
	VPMADDWD Y15, Y1, Y1; \
	VCVTDQ2PS Y1, Y1; \
	VPMADDUBSW Y2, Y7, Y3; \
	VPMADDWD Y15, Y3, Y3; \
	VCVTDQ2PS Y3, Y3; \
	BLOCK_SCALE(SI, DI); \
	VFMADD231PS Y4, Y1, acc; \
	VPBROADCASTW 2(SI), X4; \
	VCVTPH2PS X4, Y4; \
	VMULPS Y5, Y4, Y4; \
	VFMADD231PS Y4, Y3, acc

#define Q4_1_BLOCK(acc) \
	CODES4(4); \
	MIN_BLOCK(acc)

#define Q5_1_BLOCK(acc) \
	CODES4(8); \
	FIFTH(4); \
	MIN_BLOCK(acc)

// func dotQ4_1Q8_0AVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ4_1Q8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	SETUP_Q5_CONSTS
	ROW_LOOP(Q4_1_BLOCK, 20, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ5_0Q8_0AVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ5_0Q8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	SETUP_Q5_CONSTS
	ROW_LOOP(Q5_0_BLOCK, 22, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ5_1Q8_0AVX2(w, x *byte, nblocks int) float32
TEXT ·dotQ5_1Q8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	SETUP_Q5_CONSTS
	ROW_LOOP(Q5_1_BLOCK, 24, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// MATVEC_Q45 is the TEXT body of matVecQ4_1Q8_0AVX2, matVecQ5_0Q8_0AVX2
// and matVecQ5_1Q8_0AVX2: the row kernel above for rows consecutive rows
// of w (one after the other in memory) against one row of activations,
// the loop in assembly, where a Go call a row cost a sixth of a decode.
// The arguments come in SI (w), R8 (x), R9 (nblocks), R10 (out) and R11
// (rows), loaded by each TEXT itself (go vet checks the frame references
// line by line).
#define MATVEC_Q45(BLOCK, wstride, rowloop, label2, labeltail, labeldone) \
	SETUP_Q5_CONSTS; \
rowloop: \
	MOVQ R8, DI; \
	MOVQ R9, CX; \
	ROW_LOOP(BLOCK, wstride, label2, labeltail, labeldone); \
	HSUM(Y0, X0, X1); \
	MOVSS X0, (R10); \
	ADDQ $4, R10; \
	DECQ R11; \
	JNZ rowloop; \
	VZEROUPPER; \
	RET

// func matVecQ4_1Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ4_1Q8_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R8
	MOVQ nblocks+16(FP), R9
	MOVQ out+24(FP), R10
	MOVQ rows+32(FP), R11
	MATVEC_Q45(Q4_1_BLOCK, 20, mv41rows, mv41loop2, mv41tail, mv41done)

// func matVecQ5_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ5_0Q8_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R8
	MOVQ nblocks+16(FP), R9
	MOVQ out+24(FP), R10
	MOVQ rows+32(FP), R11
	MATVEC_Q45(Q5_0_BLOCK, 22, mv50rows, mv50loop2, mv50tail, mv50done)

// func matVecQ5_1Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ5_1Q8_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R8
	MOVQ nblocks+16(FP), R9
	MOVQ out+24(FP), R10
	MOVQ rows+32(FP), R11
	MATVEC_Q45(Q5_1_BLOCK, 24, mv51rows, mv51loop2, mv51tail, mv51done)

// func matVecQ4_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ4_0Q8_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	SETUP_CONSTS
	MOVQ R11, R12
	IMULQ $18, R12 // row stride

rows4:
	CMPQ R9, $4
	JL rows1
	MOVQ R10, DI
	MOVQ R11, CX
	LEAQ (SI)(R12*2), R13
	ADDQ R12, R13 // row 3
	PREFETCH_START
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8

blocks4:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	ADDQ $72, R14
	MATVEC4_SHARED
	Q4_0_ROW_TERM(2(SI), (SI), Y0)
	Q4_0_ROW_TERM(2(SI)(R12*1), (SI)(R12*1), Y1)
	Q4_0_ROW_TERM(2(SI)(R12*2), (SI)(R12*2), Y7)
	Q4_0_ROW_TERM(2(R13), (R13), Y8)
	ADDQ $18, SI
	ADDQ $18, R13
	ADDQ $34, DI
	DECQ CX
	JNZ blocks4
	MATVEC4_STORE
	JMP rows4

rows1:
	TESTQ R9, R9
	JZ end

row:
	MOVQ R10, DI
	MOVQ R11, CX
	ROW_LOOP(Q4_0_BLOCK, 18, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VMOVSS X0, (R8)
	ADDQ $4, R8
	DECQ R9
	JNZ row

end:
	VZEROUPPER
	RET

// func matVecQ4_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ4_0Q8_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	SETUP_CONSTS
	MOVQ R11, R12
	IMULQ $18, R12 // row stride

rows4:
	CMPQ R9, $4
	JL rows1
	MOVQ R10, DI
	MOVQ R11, CX
	LEAQ (SI)(R12*2), R13
	ADDQ R12, R13 // row 3
	PREFETCH_START
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8

blocks4:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	ADDQ $72, R14
	MATVEC4_SHARED_VNNI
	Q4_0_ROW_TERM_VNNI(2(SI), (SI), Y0)
	Q4_0_ROW_TERM_VNNI(2(SI)(R12*1), (SI)(R12*1), Y1)
	Q4_0_ROW_TERM_VNNI(2(SI)(R12*2), (SI)(R12*2), Y7)
	Q4_0_ROW_TERM_VNNI(2(R13), (R13), Y8)
	ADDQ $18, SI
	ADDQ $18, R13
	ADDQ $34, DI
	DECQ CX
	JNZ blocks4
	MATVEC4_STORE
	JMP rows4

rows1:
	TESTQ R9, R9
	JZ end

row:
	MOVQ R10, DI
	MOVQ R11, CX
	ROW_LOOP(Q4_0_BLOCK, 18, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VMOVSS X0, (R8)
	ADDQ $4, R8
	DECQ R9
	JNZ row

end:
	VZEROUPPER
	RET

// func matVecQ8_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ8_0Q8_0AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	SETUP_CONSTS
	MOVQ R11, R12
	IMULQ $34, R12 // row stride

rows4:
	CMPQ R9, $4
	JL rows1
	MOVQ R10, DI
	MOVQ R11, CX
	LEAQ (SI)(R12*2), R13
	ADDQ R12, R13 // row 3
	PREFETCH_START
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8

blocks4:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	ADDQ $136, R14
	MATVEC4_SHARED
	Q8_0_ROW_TERM(2(SI), (SI), Y0)
	Q8_0_ROW_TERM(2(SI)(R12*1), (SI)(R12*1), Y1)
	Q8_0_ROW_TERM(2(SI)(R12*2), (SI)(R12*2), Y7)
	Q8_0_ROW_TERM(2(R13), (R13), Y8)
	ADDQ $34, SI
	ADDQ $34, R13
	ADDQ $34, DI
	DECQ CX
	JNZ blocks4
	MATVEC4_STORE
	JMP rows4

rows1:
	TESTQ R9, R9
	JZ end

row:
	MOVQ R10, DI
	MOVQ R11, CX
	ROW_LOOP(Q8_0_BLOCK, 34, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VMOVSS X0, (R8)
	ADDQ $4, R8
	DECQ R9
	JNZ row

end:
	VZEROUPPER
	RET

// func matVecQ8_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ8_0Q8_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	SETUP_CONSTS
	MOVQ R11, R12
	IMULQ $34, R12 // row stride

rows4:
	CMPQ R9, $4
	JL rows1
	MOVQ R10, DI
	MOVQ R11, CX
	LEAQ (SI)(R12*2), R13
	ADDQ R12, R13 // row 3
	PREFETCH_START
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8

blocks4:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	ADDQ $136, R14
	MATVEC4_SHARED
	Q8_0_ROW_TERM_VNNI(2(SI), (SI), Y0)
	Q8_0_ROW_TERM_VNNI(2(SI)(R12*1), (SI)(R12*1), Y1)
	Q8_0_ROW_TERM_VNNI(2(SI)(R12*2), (SI)(R12*2), Y7)
	Q8_0_ROW_TERM_VNNI(2(R13), (R13), Y8)
	ADDQ $34, SI
	ADDQ $34, R13
	ADDQ $34, DI
	DECQ CX
	JNZ blocks4
	MATVEC4_STORE
	JMP rows4

rows1:
	TESTQ R9, R9
	JZ end

row:
	MOVQ R10, DI
	MOVQ R11, CX
	ROW_LOOP(Q8_0_BLOCK, 34, loop2, tail, done)
	HSUM(Y0, X0, X1)
	VMOVSS X0, (R8)
	ADDQ $4, R8
	DECQ R9
	JNZ row

end:
	VZEROUPPER
	RET

// func quantizeQ8_0AVX2(x *float32, dst *byte, nblocks int)
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-24
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
	VMOVD AX, X12         // 127.0
	MOVL $0x3f800000, AX
	VMOVD AX, X11         // 1.0
	VMOVDQU packPerm<>(SB), Y10
	TESTQ CX, CX
	JLE done

loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3

	// amax = max |x|
	VANDPS Y15, Y0, Y4
	VANDPS Y15, Y1, Y5
	VMAXPS Y5, Y4, Y4
	VANDPS Y15, Y2, Y5
	VMAXPS Y5, Y4, Y4
	VANDPS Y15, Y3, Y5
	VMAXPS Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VPERMILPS $0x4e, X4, X5
	VMAXPS X5, X4, X4
	VPERMILPS $0xb1, X4, X5
	VMAXSS X5, X4, X4

	// d = amax/127, stored as fp16 (round to nearest even);
	// id = d != 0 ? 1/d : 0, as the reference computes it.
	VDIVSS X12, X4, X4
	VCVTPS2PH $0, X4, X5
	VMOVD X5, AX
	MOVW AX, (DI)
	VXORPS X6, X6, X6
	VCMPSS $4, X6, X4, X7
	VDIVSS X4, X11, X8
	VANDPS X7, X8, X8
	VBROADCASTSS X8, Y8

	ROUND_Q8(Y0)
	ROUND_Q8(Y1)
	ROUND_Q8(Y2)
	ROUND_Q8(Y3)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD Y0, Y10, Y0
	VMOVDQU Y0, 2(DI)

	ADDQ $128, SI
	ADDQ $34, DI
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET

// func dotF32AVX2(a, b *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop32:
	CMPQ CX, $32
	JL loop8
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP loop32

loop8:
	CMPQ CX, $8
	JL reduce
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP loop8

reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	TESTQ CX, CX
	JZ done

scalar:
	VMOVSS (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ scalar

done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func axpyAVX2(a float32, x, y *float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y0
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	MOVQ n+24(FP), CX

loop32:
	CMPQ CX, $32
	JL loop8
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP loop32

loop8:
	CMPQ CX, $8
	JL scalar
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP loop8

scalar:
	TESTQ CX, CX
	JZ done
	VMOVSS (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS X1, (DI)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP scalar

done:
	VZEROUPPER
	RET

// The 4-row matrix–vector kernels of Q4_1, Q5_0 and Q5_1 with AVX512-VNNI,
// as matVecQ4_0Q8_0VNNI walks Q4_0: each activation block is loaded and
// prepared once for four rows, one VPDPBUSD a row takes Σq·y, and the
// weights are prefetched ahead. The integer sums are the row kernels'
// lane for lane; the float sums differ from them only in order (one
// accumulator a row, MATVEC4_STORE's sums). Registers: SETUP_Q5_CONSTS's,
// with its bytes 0x01 moved to Y20 so that Y7 is free for MATVEC4_STORE;
// accumulators Y0, Y1, Y7, Y8; Y2 the activation codes, Y4 their scale.

// MATVEC4_SHARED_MIN prepares the activation block at DI for the types
// with a min: codes to Y2, Σy a dword as float32 to Y21, the scale to Y4.
// Clobbers Y3.
#define MATVEC4_SHARED_MIN \
	VMOVDQU 2(DI), Y2; \
	VPXORD Y3, Y3, Y3; \
	VPDPBUSD Y2, Y20, Y3; \
	VCVTDQ2PS Y3, Y21; \
	VPBROADCASTW (DI), X4; \
	VCVTPH2PS X4, Y4

// MATVEC4_SHARED_Q5_0 prepares it for Q5_0: codes to Y2, −16·Σy a dword
// to Y3 (the offset term of q−16), the scale to Y4. Clobbers Y22.
#define MATVEC4_SHARED_Q5_0 \
	VMOVDQU 2(DI), Y2; \
	VPXORD Y3, Y3, Y3; \
	VPSUBB Y2, Y3, Y22; \
	VPDPBUSD Y22, Y9, Y3; \
	VPBROADCASTW (DI), X4; \
	VCVTPH2PS X4, Y4

// CODES_ROW leaves the 32 nibble codes at codes in Y5, in element order.
#define CODES_ROW(codes) \
	VBROADCASTI128 codes, Y5; \
	VPSRLVD Y12, Y5, Y5; \
	VPAND Y13, Y5, Y5

// FIFTH_ROW adds 16 to the codes in Y5 whose bit is set in the u32 at qh.
// Clobbers Y6.
#define FIFTH_ROW(qh) \
	VPBROADCASTD qh, Y6; \
	VPSHUFB Y10, Y6, Y6; \
	VPAND Y11, Y6, Y6; \
	VPCMPEQB Y11, Y6, Y6; \
	VPAND Y9, Y6, Y6; \
	VPOR Y6, Y5, Y5

// MIN_ROW_TERM adds d·d(x)·Σq·y, then m·d(x)·Σy, of the block whose codes
// are in Y5 and whose d and m are at d and m, to acc: MIN_BLOCK's terms.
// Clobbers Y5, Y6.
#define MIN_ROW_TERM(d, m, acc) \
	VPXOR Y6, Y6, Y6; \
	VPDPBUSD Y2, Y5, Y6; \
	VCVTDQ2PS Y6, Y5; \
	VPBROADCASTW d, X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y5, acc; \
	VPBROADCASTW m, X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y21, Y6, acc

// Q5_0_ROW_TERM adds d·d(x)·Σ(q−16)·y of the block whose codes are in Y5
// and whose d is at d to acc: Q5_0_BLOCK's term, with the shared offset
// term in Y3 (IQ4_NL's −128·Σy the same way). Clobbers Y5, Y6.
#define Q5_0_ROW_TERM(d, acc) \
	VMOVDQA Y3, Y6; \
	VPDPBUSD Y2, Y5, Y6; \
	VCVTDQ2PS Y6, Y5; \
	VPBROADCASTW d, X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y5, acc

// MATVEC4_START sets up a group of four rows at SI (row stride R12): DI
// and CX for the block loop, R13 at row 3, the prefetch stream, and the
// accumulators.
#define MATVEC4_START \
	MOVQ R10, DI; \
	MOVQ R11, CX; \
	LEAQ (SI)(R12*2), R13; \
	ADDQ R12, R13; \
	PREFETCH_START; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8

// MATVEC4_VNNI is the body of the 4-row kernels below, after the TEXT
// has loaded w to SI, x to R10, nblocks to R11, out to R8 and rows to R9
// (go vet checks the frame references line by line): groups of four rows
// with SHARED preparing each activation block and ROWS4 adding the four
// rows' terms (bytes a block, the prefetch stream four blocks a step),
// then the rows past the last four with the row kernel's BLOCK.
#define MATVEC4_VNNI(bytes, step, SHARED, ROWS4, BLOCK, rows4, blocks4, rows1, row, loop2, tail, done, end) \
	SETUP_Q5_CONSTS; \
	VMOVDQU32 Y7, Y20; \
	MOVQ R11, R12; \
	IMULQ $bytes, R12; \
rows4: \
	CMPQ R9, $4; \
	JL rows1; \
	MATVEC4_START; \
blocks4: \
	PREFETCHT0 (R14); \
	PREFETCHT0 64(R14); \
	ADDQ $step, R14; \
	SHARED; \
	ROWS4; \
	ADDQ $bytes, SI; \
	ADDQ $bytes, R13; \
	ADDQ $34, DI; \
	DECQ CX; \
	JNZ blocks4; \
	MATVEC4_STORE; \
	JMP rows4; \
rows1: \
	TESTQ R9, R9; \
	JZ end; \
	SETUP_Q5_CONSTS; \
row: \
	MOVQ R10, DI; \
	MOVQ R11, CX; \
	ROW_LOOP(BLOCK, bytes, loop2, tail, done); \
	HSUM(Y0, X0, X1); \
	VMOVSS X0, (R8); \
	ADDQ $4, R8; \
	DECQ R9; \
	JNZ row; \
end: \
	VZEROUPPER; \
	RET

// The four rows' terms of each type: rows 0-2 at SI + k·R12, row 3 at R13.
#define Q4_1_ROWS4 \
	CODES_ROW(4(SI)); \
	MIN_ROW_TERM((SI), 2(SI), Y0); \
	CODES_ROW(4(SI)(R12*1)); \
	MIN_ROW_TERM((SI)(R12*1), 2(SI)(R12*1), Y1); \
	CODES_ROW(4(SI)(R12*2)); \
	MIN_ROW_TERM((SI)(R12*2), 2(SI)(R12*2), Y7); \
	CODES_ROW(4(R13)); \
	MIN_ROW_TERM((R13), 2(R13), Y8)

#define Q5_0_ROWS4 \
	CODES_ROW(6(SI)); \
	FIFTH_ROW(2(SI)); \
	Q5_0_ROW_TERM((SI), Y0); \
	CODES_ROW(6(SI)(R12*1)); \
	FIFTH_ROW(2(SI)(R12*1)); \
	Q5_0_ROW_TERM((SI)(R12*1), Y1); \
	CODES_ROW(6(SI)(R12*2)); \
	FIFTH_ROW(2(SI)(R12*2)); \
	Q5_0_ROW_TERM((SI)(R12*2), Y7); \
	CODES_ROW(6(R13)); \
	FIFTH_ROW(2(R13)); \
	Q5_0_ROW_TERM((R13), Y8)

#define Q5_1_ROWS4 \
	CODES_ROW(8(SI)); \
	FIFTH_ROW(4(SI)); \
	MIN_ROW_TERM((SI), 2(SI), Y0); \
	CODES_ROW(8(SI)(R12*1)); \
	FIFTH_ROW(4(SI)(R12*1)); \
	MIN_ROW_TERM((SI)(R12*1), 2(SI)(R12*1), Y1); \
	CODES_ROW(8(SI)(R12*2)); \
	FIFTH_ROW(4(SI)(R12*2)); \
	MIN_ROW_TERM((SI)(R12*2), 2(SI)(R12*2), Y7); \
	CODES_ROW(8(R13)); \
	FIFTH_ROW(4(R13)); \
	MIN_ROW_TERM((R13), 2(R13), Y8)

// func matVecQ4_1Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ4_1Q8_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	MATVEC4_VNNI(20, 80, MATVEC4_SHARED_MIN, Q4_1_ROWS4, Q4_1_BLOCK, rows4, blocks4, rows1, row, loop2, tail, done, end)

// func matVecQ5_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ5_0Q8_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	MATVEC4_VNNI(22, 88, MATVEC4_SHARED_Q5_0, Q5_0_ROWS4, Q5_0_BLOCK, rows4, blocks4, rows1, row, loop2, tail, done, end)

// func matVecQ5_1Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ5_1Q8_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	MATVEC4_VNNI(24, 96, MATVEC4_SHARED_MIN, Q5_1_ROWS4, Q5_1_BLOCK, rows4, blocks4, rows1, row, loop2, tail, done, end)

// IQ4_NL's table (iq4_amd64.s's iq4tab) plus 128: unsigned codes for
// VPDPBUSD, whose −128·Σy the shared term takes off again.
DATA iq4utab<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA iq4utab<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL iq4utab<>(SB), RODATA|NOPTR, $16

// func matVecIQ4_NLQ8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)
//
// matVecQ4_0Q8_0VNNI for IQ4_NL weights, rows a multiple of 4: the codes
// are the table values + 128 (Y10), looked up by VPSHUFB, and the shared
// term −128·Σy (Y9 bytes 0x80). The caller takes the rows past the last
// four (MatVecRowsQ8_0).
TEXT ·matVecIQ4_NLQ8_0VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	SETUP_CONSTS
	VBROADCASTI128 iq4utab<>(SB), Y10
	MOVL $0x80808080, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9
	MOVQ R11, R12
	IMULQ $18, R12 // row stride

nlrows4:
	CMPQ R9, $4
	JL nlend
	MATVEC4_START

nlblocks4:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	ADDQ $72, R14
	VMOVDQU 2(DI), Y2
	VPXOR Y3, Y3, Y3
	VPSUBB Y2, Y3, Y11
	VPDPBUSD Y11, Y9, Y3
	VPBROADCASTW (DI), X4
	VCVTPH2PS X4, Y4
	CODES_ROW(2(SI))
	VPSHUFB Y5, Y10, Y5
	Q5_0_ROW_TERM((SI), Y0)
	CODES_ROW(2(SI)(R12*1))
	VPSHUFB Y5, Y10, Y5
	Q5_0_ROW_TERM((SI)(R12*1), Y1)
	CODES_ROW(2(SI)(R12*2))
	VPSHUFB Y5, Y10, Y5
	Q5_0_ROW_TERM((SI)(R12*2), Y7)
	CODES_ROW(2(R13))
	VPSHUFB Y5, Y10, Y5
	Q5_0_ROW_TERM((R13), Y8)
	ADDQ $18, SI
	ADDQ $18, R13
	ADDQ $34, DI
	DECQ CX
	JNZ nlblocks4
	MATVEC4_STORE
	JMP nlrows4

nlend:
	VZEROUPPER
	RET

// IQ4_XS four rows at a time (matVecIQ4_XSQ8_KRows4AVX2). A super-block's
// eight sub-block scales ls − 32 of a row are unpacked at once into the
// stack (32·r bytes on for row r), each as the int16 pair (s, s), so that
// a sub-block's int16 pair sums take their scale in VPMADDWD: one
// broadcast where the single-row kernel spends ten instructions and a
// VPMULLD on every sub-block.
DATA iq4xsShL<>+0(SB)/8, $0x0000000400000000
DATA iq4xsShL<>+8(SB)/8, $0x0000000c00000008
DATA iq4xsShL<>+16(SB)/8, $0x0000001400000010
DATA iq4xsShL<>+24(SB)/8, $0x0000001c00000018
GLOBL iq4xsShL<>(SB), RODATA|NOPTR, $32

DATA iq4xsShH<>+0(SB)/8, $0x0000000200000000
DATA iq4xsShH<>+8(SB)/8, $0x0000000600000004
DATA iq4xsShH<>+16(SB)/8, $0x0000000a00000008
DATA iq4xsShH<>+24(SB)/8, $0x0000000e0000000c
GLOBL iq4xsShH<>(SB), RODATA|NOPTR, $32

DATA iq4xsD15<>+0(SB)/8, $0x0000000f0000000f
DATA iq4xsD15<>+8(SB)/8, $0x0000000f0000000f
DATA iq4xsD15<>+16(SB)/8, $0x0000000f0000000f
DATA iq4xsD15<>+24(SB)/8, $0x0000000f0000000f
GLOBL iq4xsD15<>(SB), RODATA|NOPTR, $32

DATA iq4xsD3<>+0(SB)/8, $0x0000000300000003
DATA iq4xsD3<>+8(SB)/8, $0x0000000300000003
DATA iq4xsD3<>+16(SB)/8, $0x0000000300000003
DATA iq4xsD3<>+24(SB)/8, $0x0000000300000003
GLOBL iq4xsD3<>(SB), RODATA|NOPTR, $32

DATA iq4xsD32<>+0(SB)/8, $0x0000002000000020
DATA iq4xsD32<>+8(SB)/8, $0x0000002000000020
DATA iq4xsD32<>+16(SB)/8, $0x0000002000000020
DATA iq4xsD32<>+24(SB)/8, $0x0000002000000020
GLOBL iq4xsD32<>(SB), RODATA|NOPTR, $32

// IQ4XS_SCALES writes the eight sub-block scales of the super-block at
// row, ls − 32 with ls = scales_l nibble | scales_h bit pair << 4, as
// int16 pairs (s, s), to the 32 bytes at off(SP). Clobbers AX, Y5, Y6.
#define IQ4XS_SCALES(row, off) \
	VPBROADCASTD 4(row), Y5; \
	VPSRLVD iq4xsShL<>(SB), Y5, Y5; \
	VPAND iq4xsD15<>(SB), Y5, Y5; \
	MOVWLZX 2(row), AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, Y6; \
	VPSRLVD iq4xsShH<>(SB), Y6, Y6; \
	VPAND iq4xsD3<>(SB), Y6, Y6; \
	VPSLLD $4, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	VPSUBD iq4xsD32<>(SB), Y5, Y5; \
	VPSLLD $16, Y5, Y6; \
	VPBLENDW $0x55, Y5, Y6, Y5; \
	VMOVDQU Y5, off(SP)

// IQ4XS_ROW_SUB adds sub-block ib of the super-block at row, against the
// activations in Y3, to the int32 sums iacc, its scale the pair at
// soff(SP). Clobbers Y2, Y5, Y6.
#define IQ4XS_ROW_SUB(row, ib, soff, iacc) \
	VMOVDQU (8+16*ib)(row), X2; \
	VPSRLW $4, X2, X5; \
	VINSERTI128 $1, X5, Y2, Y2; \
	VPAND Y11, Y2, Y2; \
	VPSHUFB Y2, Y10, Y2; \
	VPSIGNB Y2, Y3, Y5; \
	VPSIGNB Y2, Y2, Y2; \
	VPMADDUBSW Y5, Y2, Y2; \
	VPBROADCASTD soff(SP), Y6; \
	VPMADDWD Y6, Y2, Y2; \
	VPADDD Y2, iacc, iacc

// IQ4XS_SUB is sub-block ib of the four rows (at SI, BX, DX and R13),
// the activations loaded once.
#define IQ4XS_SUB(ib) \
	VMOVDQU (4+32*ib)(DI), Y3; \
	IQ4XS_ROW_SUB(SI, ib, 4*ib, Y4); \
	IQ4XS_ROW_SUB(BX, ib, 32+4*ib, Y9); \
	IQ4XS_ROW_SUB(DX, ib, 64+4*ib, Y12); \
	IQ4XS_ROW_SUB(R13, ib, 96+4*ib, Y13)

// IQ4XS_ROW_FINISH adds a row's super-block, its int32 sums in iacc,
// times d(w)·d(x) to its float sums acc. Clobbers Y5, Y6.
#define IQ4XS_ROW_FINISH(d, iacc, acc) \
	VCVTDQ2PS iacc, iacc; \
	VPBROADCASTW d, X5; \
	VCVTPH2PS X5, Y5; \
	VBROADCASTSS (DI), Y6; \
	VMULPS Y6, Y5, Y5; \
	VFMADD231PS Y5, iacc, acc

// func matVecIQ4_XSQ8_KRows4AVX2(w, x *byte, nblocks int, out *float32, rows int)
//
// matVecIQ4_XSQ8_KAVX2 four rows at a time, rows a multiple of 4, walked
// as matVecQ4_0Q8_0AVX2 walks them: each activation sub-block loaded once
// for four rows, the scales unpacked once a super-block (IQ4XS_SCALES),
// the weights prefetched. The integer sums are the single-row kernel's;
// the float sums are reduced in another order. The caller takes the rows
// past the last four.
TEXT ·matVecIQ4_XSQ8_KRows4AVX2(SB), NOSPLIT, $128-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	VBROADCASTI128 iq4stab<>(SB), Y10
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVQ R11, R12
	IMULQ $136, R12 // row stride

xs4rows4:
	CMPQ R9, $4
	JL xs4end
	MATVEC4_START
	LEAQ (SI)(R12*1), BX // row 1
	LEAQ (SI)(R12*2), DX // row 2

xs4blocks:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	PREFETCHT0 192(R14)
	PREFETCHT0 256(R14)
	PREFETCHT0 320(R14)
	PREFETCHT0 384(R14)
	PREFETCHT0 448(R14)
	PREFETCHT0 512(R14)
	ADDQ $544, R14
	IQ4XS_SCALES(SI, 0)
	IQ4XS_SCALES(BX, 32)
	IQ4XS_SCALES(DX, 64)
	IQ4XS_SCALES(R13, 96)
	VPXOR Y4, Y4, Y4
	VPXOR Y9, Y9, Y9
	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	IQ4XS_SUB(0)
	IQ4XS_SUB(1)
	IQ4XS_SUB(2)
	IQ4XS_SUB(3)
	IQ4XS_SUB(4)
	IQ4XS_SUB(5)
	IQ4XS_SUB(6)
	IQ4XS_SUB(7)
	IQ4XS_ROW_FINISH((SI), Y4, Y0)
	IQ4XS_ROW_FINISH((BX), Y9, Y1)
	IQ4XS_ROW_FINISH((DX), Y12, Y7)
	IQ4XS_ROW_FINISH((R13), Y13, Y8)
	ADDQ $136, SI
	ADDQ $136, BX
	ADDQ $136, DX
	ADDQ $136, R13
	ADDQ $292, DI
	DECQ CX
	JNZ xs4blocks
	MATVEC4_STORE
	JMP xs4rows4

xs4end:
	VZEROUPPER
	RET

// The four-row AVX2 kernels of Q4_1, Q5_0, Q5_1 and IQ4_NL (…Rows4AVX2):
// rows at SI, BX, DX and R13 (R12 the row stride), each activation block
// loaded once for the four (Y2, its scale d(x) in Y4) with the term the
// rows share in Y3: maddubs(16, y) for Q5_0's offset, the float pair sums
// of Σy for the min of Q4_1 and Q5_1 (Y14 bytes 0x01 in place of
// SETUP_CONSTS's 0x08). Per lane the row kernels' arithmetic (the same
// integer sums, d(w)·d(x) and m·d(x) as they round them, the FMAs in their
// order); the float lanes are reduced in another order (MATVEC4_STORE).

// Q45_CODES leaves the 32 nibble codes at off(row) in Y5, in element
// order; Q45_FIFTH adds 16 to those whose bit is set in the u32 at
// off(row). Clobbers Y6.
#define Q45_CODES(row, off) \
	VBROADCASTI128 off(row), Y5; \
	VPSRLVD Y12, Y5, Y5; \
	VPAND Y13, Y5, Y5

#define Q45_FIFTH(row, off) \
	VPBROADCASTD off(row), Y6; \
	VPSHUFB Y10, Y6, Y6; \
	VPAND Y11, Y6, Y6; \
	VPCMPEQB Y11, Y6, Y6; \
	VPAND Y9, Y6, Y6; \
	VPOR Y6, Y5, Y5

// Q45_SCALED adds the block's d(w)·d(x) times the int32 sums in Y5 to acc.
// Clobbers Y5, Y6.
#define Q45_SCALED(row, acc) \
	VCVTDQ2PS Y5, Y5; \
	VPBROADCASTW (row), X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y5, acc

// Q45_MIN adds m·d(x) times the shared Σy pair sums (Y3) to acc, m the
// f16 at 2(row). Clobbers Y6.
#define Q45_MIN(row, acc) \
	VPBROADCASTW 2(row), X6; \
	VCVTPH2PS X6, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y6, Y3, acc

#define Q5_0_ROW4(row, acc) \
	Q45_CODES(row, 6); \
	Q45_FIFTH(row, 2); \
	VPMADDUBSW Y2, Y5, Y5; \
	VPSUBW Y3, Y5, Y5; \
	VPMADDWD Y15, Y5, Y5; \
	Q45_SCALED(row, acc)

#define Q4_1_ROW4(row, acc) \
	Q45_CODES(row, 4); \
	VPMADDUBSW Y2, Y5, Y5; \
	VPMADDWD Y15, Y5, Y5; \
	Q45_SCALED(row, acc); \
	Q45_MIN(row, acc)

#define Q5_1_ROW4(row, acc) \
	Q45_CODES(row, 8); \
	Q45_FIFTH(row, 4); \
	VPMADDUBSW Y2, Y5, Y5; \
	VPMADDWD Y15, Y5, Y5; \
	Q45_SCALED(row, acc); \
	Q45_MIN(row, acc)

// IQ4_NL_ROW4 is Q8_0_ROW_TERM for an IQ4_NL weight block: its codes
// looked up in the table (Y10) to the signed weights first. |w| ≤ 127,
// so VPMADDUBSW's pair sums cannot saturate.
#define IQ4_NL_ROW4(row, acc) \
	Q45_CODES(row, 2); \
	VPSHUFB Y5, Y10, Y5; \
	VPABSB Y5, Y6; \
	VPSIGNB Y5, Y2, Y5; \
	VPMADDUBSW Y5, Y6, Y5; \
	VPMADDWD Y15, Y5, Y5; \
	Q45_SCALED(row, acc)

// ROWS4_X loads the activation block at DI and its scale; Q45_SHARED_OFF
// and Q45_SHARED_MIN also the term the rows share.
#define ROWS4_X \
	VMOVDQU 2(DI), Y2; \
	VPBROADCASTW (DI), X4; \
	VCVTPH2PS X4, Y4

#define Q45_SHARED_OFF \
	ROWS4_X; \
	VPMADDUBSW Y2, Y9, Y3

#define Q45_SHARED_MIN \
	ROWS4_X; \
	VPMADDUBSW Y2, Y14, Y3; \
	VPMADDWD Y15, Y3, Y3; \
	VCVTDQ2PS Y3, Y3

// Q45_CONSTS are SETUP_Q5_CONSTS with bytes 0x01 in Y14; IQ4_NL_CONSTS
// SETUP_CONSTS with the IQ4_NL table (signed bytes, iq4_amd64.s's
// iq4tab) in both lanes of Y10.
#define Q45_CONSTS \
	SETUP_Q5_CONSTS; \
	MOVL $0x01010101, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14

DATA iq4stab<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4stab<>+8(SB)/8, $0x7159453526190d01
GLOBL iq4stab<>(SB), RODATA|NOPTR, $16

#define IQ4_NL_CONSTS \
	SETUP_CONSTS; \
	VBROADCASTI128 iq4stab<>(SB), Y10

// MATVEC4_AVX2 is the TEXT body of the four-row kernels, after it has
// loaded w to SI, x to R10, nblocks to R11, out to R8 and rows to R9
// (rows a multiple of 4): wstride the block's bytes; a step prefetches two
// lines, at least the 4·wstride bytes it consumes.
#define MATVEC4_AVX2(wstride, CONSTS, SHARED, ROW, rows4, blocks4, end) \
	CONSTS; \
	MOVQ R11, R12; \
	IMULQ $wstride, R12; \
rows4: \
	CMPQ R9, $4; \
	JL end; \
	MATVEC4_START; \
	LEAQ (SI)(R12*1), BX; \
	LEAQ (SI)(R12*2), DX; \
blocks4: \
	PREFETCHT0 (R14); \
	PREFETCHT0 64(R14); \
	ADDQ $(4*wstride), R14; \
	SHARED; \
	ROW(SI, Y0); \
	ROW(BX, Y1); \
	ROW(DX, Y7); \
	ROW(R13, Y8); \
	ADDQ $wstride, SI; \
	ADDQ $wstride, BX; \
	ADDQ $wstride, DX; \
	ADDQ $wstride, R13; \
	ADDQ $34, DI; \
	DECQ CX; \
	JNZ blocks4; \
	MATVEC4_STORE; \
	JMP rows4; \
end: \
	VZEROUPPER; \
	RET

// func matVecQ4_1Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ4_1Q8_0Rows4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	MATVEC4_AVX2(20, Q45_CONSTS, Q45_SHARED_MIN, Q4_1_ROW4, q41rows4, q41blocks4, q41end)

// func matVecQ5_0Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ5_0Q8_0Rows4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	MATVEC4_AVX2(22, Q45_CONSTS, Q45_SHARED_OFF, Q5_0_ROW4, q50rows4, q50blocks4, q50end)

// func matVecQ5_1Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecQ5_1Q8_0Rows4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	MATVEC4_AVX2(24, Q45_CONSTS, Q45_SHARED_MIN, Q5_1_ROW4, q51rows4, q51blocks4, q51end)

// func matVecIQ4_NLQ8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)
TEXT ·matVecIQ4_NLQ8_0Rows4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblocks+16(FP), R11
	MOVQ out+24(FP), R8
	MOVQ rows+32(FP), R9
	MATVEC4_AVX2(18, IQ4_NL_CONSTS, ROWS4_X, IQ4_NL_ROW4, nl2rows4, nl2blocks4, nl2end)
