// MATVEC_ROWS is the row loop of the matVec kernels (kdot_amd64.s,
// iq4_amd64.s): a row kernel's BLOCK over the rows of w, one after the
// other in memory, against one activation row, each row's sum reduced by
// SUM from acc into xacc and stored. On entry SI holds w, R15 x, R13 out
// and R14 the rows (≥ 1); nblk (≥ 1) is read again for every row, since
// the blocks take every other register. The TEXT loads them itself (go vet
// checks the frame references line by line) and passes nblocks' operand.
#define MATVEC_ROWS(BLOCK, SUM, acc, xacc, nblk, rowl, loopl) \
rowl: \
	MOVQ R15, DI; \
	MOVQ nblk, CX; \
	VXORPS acc, acc, acc; \
loopl: \
	BLOCK; \
	DECQ CX; \
	JNZ loopl; \
	SUM; \
	MOVSS xacc, (R13); \
	ADDQ $4, R13; \
	DECQ R14; \
	JNZ rowl; \
	VZEROUPPER; \
	RET
