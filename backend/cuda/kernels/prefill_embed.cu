// prefill_embed: the embedding rows of m prompt tokens (device memory),
// dequantized to f32, as the residual stream of a prefill chunk. Rows are
// in the upload layout (weights.go); the values are those embed.cu writes.
#include "prefill.cuh"

template <int T> __device__ __forceinline__ float embed_value(const u8 *q, const f16 *d, long row, int nb, int e);

template <> __device__ __forceinline__ float embed_value<WT_F32>(const u8 *q, const f16 *, long row, int nb, int e) {
	return ((const float *)q)[row * nb * 32 + e];
}
template <> __device__ __forceinline__ float embed_value<WT_F16>(const u8 *q, const f16 *, long row, int nb, int e) {
	return f16_to_f32(((const f16 *)q)[row * nb * 32 + e]);
}
template <> __device__ __forceinline__ float embed_value<WT_Q4_0>(const u8 *q, const f16 *d, long row, int nb, int e) {
	long blk = row * nb + (e >> 5);
	int j = e & 31;
	int nib = j < 16 ? q[blk * 16 + j] & 15 : q[blk * 16 + j - 16] >> 4;
	return f16_to_f32(d[blk]) * (float)(nib - 8);
}
template <> __device__ __forceinline__ float embed_value<WT_Q8_0>(const u8 *q, const f16 *d, long row, int nb, int e) {
	long blk = row * nb + (e >> 5);
	return f16_to_f32(d[blk]) * (float)(signed char)q[blk * 32 + (e & 31)];
}

#define PREFILL_EMBED(name, T)                                                                                     \
	extern "C" __global__ void prefill_embed_##name(const int *tokens, int m, const u8 *q, const f16 *d, int k,     \
	                                                float *x) {                                                    \
		pdl_wait_and_release();                                                                                    \
		int t = blockIdx.y, e = blockIdx.x * blockDim.x + threadIdx.x;                                             \
		if (t < m && e < k) x[(long)t * k + e] = embed_value<T>(q, d, tokens[t], (k + 31) >> 5, e);                \
	}
FOR_EACH_WEIGHT_TYPE(PREFILL_EMBED)
