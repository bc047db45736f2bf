// logits: the output head and greedy sampling in one kernel. The final
// RMSNorm (once per block), logits[r] = W[r]·x for every row, and the argmax:
// each block writes its best (value, index); the last block to finish (a
// ticket counter, left at zero again for the next step) reduces them and
// writes the token id to out, pinned host memory mapped into the device, so
// only those 4 bytes cross to the host.
#include "common.cuh"

template <int T>
__device__ __forceinline__ void logits(const float *in, const float *norm_w, float eps, int k, const u8 *wq,
                                       const f16 *wd, int rows, float *y, float *part_v, int *part_i,
                                       unsigned *ticket, int *out) {
	extern __shared__ float xs[];
	__shared__ float scratch[32], bv[32];
	__shared__ int bi[32];
	__shared__ bool last;
	int nb = (k + 31) >> 5;
	if (2 * grid_warp() < rows) prefetch_row<T>(wq, wd, 2 * grid_warp(), nb);
	if (2 * grid_warp() + 1 < rows) prefetch_row<T>(wq, wd, 2 * grid_warp() + 1, nb);
	pdl_wait_and_release();
	float scale = rms_factor(xs_load(xs, in, norm_w, k, nb, scratch), k, eps);
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	float best = -INFINITY;
	int besti = 0x7fffffff;
	for (int p = grid_warp(); 2 * p < rows; p += grid_warps()) {
		long r0 = 2 * p, r1 = r0 + 1;
		bool two = r1 < rows;
		float v0, v1;
		dot_rows2<T>(wq, wd, r0, wq, wd, r1, two, nb, xs, v0, v1);
		v0 *= scale;
		v1 *= scale;
		if (lane == 0) {
			y[r0] = v0;
			better(best, besti, v0, (int)r0);
			if (two) {
				y[r1] = v1;
				better(best, besti, v1, (int)r1);
			}
		}
	}
	if (lane == 0) {
		bv[w] = best;
		bi[w] = besti;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int j = 1; j < nw; j++) better(best, besti, bv[j], bi[j]);
		part_v[blockIdx.x] = best;
		part_i[blockIdx.x] = besti;
		__threadfence();
		last = atomicAdd(ticket, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last) return;
	__threadfence();
	best = -INFINITY;
	besti = 0x7fffffff;
	const volatile float *pv = part_v;
	const volatile int *pi = part_i;
	for (int j = threadIdx.x; j < gridDim.x; j += blockDim.x) better(best, besti, pv[j], pi[j]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		better(best, besti, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, besti, o));
	__syncthreads();
	if (lane == 0) {
		bv[w] = best;
		bi[w] = besti;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int j = 1; j < nw; j++) better(best, besti, bv[j], bi[j]);
		*(volatile int *)out = besti == 0x7fffffff ? 0 : besti;
		*ticket = 0;
	}
}

#define LOGITS(name, T)                                                                                            \
	extern "C" __global__ void logits_##name(const float *in, const float *norm_w, float eps, int k, const u8 *wq,  \
	                                         const f16 *wd, int rows, float *y, float *part_v, int *part_i,          \
	                                         unsigned *ticket, int *out) {                                         \
		logits<T>(in, norm_w, eps, k, wq, wd, rows, y, part_v, part_i, ticket, out);                               \
	}
FOR_EACH_WEIGHT_TYPE(LOGITS)
