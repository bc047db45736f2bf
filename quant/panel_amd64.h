// panel_amd64.h: the steps the panel kernels share (matMulFloatPanelAVX512
// in f32_amd64.s, matMulBF16PanelAVX512 in bf16_amd64.s): the panel's
// column in Z24-Z26, a token's accumulators, the pointers' walk and the
// masked stores. Each kernel has its own token step (its product).

// FP_LOADW loads the panel's 48 weights of the column at R14.
#define FP_LOADW \
	VMOVUPS (R14), Z24; \
	VMOVUPS 64(R14), Z25; \
	VMOVUPS 128(R14), Z26

#define FP_ZERO(c0, c1, c2) \
	VPXORD c0, c0, c0; \
	VPXORD c1, c1, c1; \
	VPXORD c2, c2, c2

// FP_START points AX and BX at column 0 of tokens 0 and 4 of the group at
// SI, R14 at the panel and R13 at the count of columns.
#define FP_START \
	MOVQ SI, AX; \
	LEAQ (SI)(R8*4), BX; \
	MOVQ DI, R14; \
	MOVQ R10, R13

#define FP_NEXT \
	ADDQ $4, AX; \
	ADDQ $4, BX; \
	ADDQ $192, R14

// FP_STORE stores a token's 48 results c0-c2 at DX, each register's 16
// under its mask of rows, K1-K3, and moves DX to the next token.
#define FP_STORE(c0, c1, c2) \
	VMOVUPS c0, K1, (DX); \
	VMOVUPS c1, K2, 64(DX); \
	VMOVUPS c2, K3, 128(DX); \
	ADDQ R11, DX
