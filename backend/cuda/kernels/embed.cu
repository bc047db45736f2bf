// embed: the token's embedding row, dequantized, as the residual stream's
// start (fixed point, common.cuh; a value it cannot hold poisons the step).
// The step's input (token, position, sampler parameters) is read from io:
// pinned host memory mapped into the device's address space, which the host
// writes before each replay of the graph, or, for a step chained to the one
// before it, device memory where that step's output head left its token and
// the next position (logits.cu). The position and the nparams words of
// parameters at io[IO_PARAMS] are published to device memory (pos, params)
// for the later kernels, which would otherwise each cross the bus. A token
// outside the rows (a chained step after one whose logits were all NaN)
// poisons the step.
// The row is multiplied by scale (the model's embedding multiplier, 1 for
// most). The row layout is the uploaded one (the output head shares it when
// embeddings are tied).
#include "weights.cuh"

#define IO_PARAMS 4
#define EMBED_MAX_PARAMS 32

// One block walks the row: io may be host memory across PCIe, where the
// reads of many warps to one word queue behind each other (24 warps each
// reading the token cost ~20 µs a step on an H200); here one warp reads
// the input words once, in one transaction, and shares them.
#define EMBED(name, T)                                                                                             \
	extern "C" __global__ void __launch_bounds__(1024)                                                             \
	    embed_##name(const int *io, int *pos, int *params, int nparams, const u8 *q, const f16 *d, int rows, int k, \
	                 float scale, long long *res, unsigned *poison) {                                              \
		__shared__ int in[IO_PARAMS + EMBED_MAX_PARAMS];                                                           \
		pdl_wait_and_release();                                                                                    \
		if (threadIdx.x < IO_PARAMS + nparams) in[threadIdx.x] = ((const volatile int *)io)[threadIdx.x];          \
		__syncthreads();                                                                                           \
		int tok = in[0];                                                                                           \
		if (threadIdx.x == 0) *pos = in[1];                                                                        \
		if (threadIdx.x < nparams) params[threadIdx.x] = in[IO_PARAMS + threadIdx.x];                              \
		if ((unsigned)tok >= (unsigned)rows) {                                                                     \
			if (threadIdx.x == 0) atomicOr(poison, 1u);                                                            \
			tok = 0;                                                                                               \
		}                                                                                                          \
		for (int e = threadIdx.x; e < k; e += blockDim.x) {                                                        \
			long long v;                                                                                           \
			if (!res_fixed(weight_elem<T>(q, d, tok, (k + 31) >> 5, e) * scale, v)) atomicOr(poison, 1u);                   \
			res[e] = v;                                                                                            \
		}                                                                                                          \
	}
FOR_EACH_WEIGHT_TYPE(EMBED)
