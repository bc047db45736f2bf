// prefill_embed: the embedding rows of m prompt tokens (device memory),
// dequantized to f32 and times scale (the embedding multiplier), as the
// residual stream of a prefill chunk. Rows are
// in the upload layout (weights.go); the values are those embed.cu writes.
#include "prefill.cuh"
#include "weights.cuh"

#define PREFILL_EMBED(name, T)                                                                                     \
	extern "C" __global__ void prefill_embed_##name(const int *tokens, int m, const u8 *q, const f16 *d, int k,     \
	                                                float scale, float *x) {                                                    \
		pdl_wait_and_release();                                                                                    \
		int t = blockIdx.y, e = blockIdx.x * blockDim.x + threadIdx.x;                                             \
		if (t < m && e < k) x[(long)t * k + e] = weight_elem<T>(q, d, tokens[t], (k + 31) >> 5, e) * scale;                \
	}
FOR_EACH_WEIGHT_TYPE(PREFILL_EMBED)
