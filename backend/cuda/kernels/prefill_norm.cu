// prefill_norm: RMSNorm of m rows of the f32 residual stream, times the
// norm weight, rounded to f16: the activations a prefill gemm multiplies.
// Without weights (w null: a block with no pre-norm) the rows are only
// rounded.
// One warp per row. Each lane loads its elements eight at a time, all eight
// in flight together, so a row of 576 costs three memory round trips, not
// eighteen.
#include "prefill.cuh"

#define NORM_BATCH 8

extern "C" __global__ void prefill_norm(const float *x, const float *w, float eps, int m, int k, f16 *out) {
	pdl_wait_and_release();
	int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (row >= m) return;
	const float *xr = x + (long)row * k;
	float ss = 0.f;
	for (int base = lane; base < k; base += 32 * NORM_BATCH) {
		float v[NORM_BATCH];
#pragma unroll
		for (int u = 0; u < NORM_BATCH; u++) v[u] = base + 32 * u < k ? xr[base + 32 * u] : 0.f;
#pragma unroll
		for (int u = 0; u < NORM_BATCH; u++) ss += v[u] * v[u];
	}
	float scale = w ? rsqrtf(warp_sum(ss) / (float)k + eps) : 1.f;
	f16 *o = out + (long)row * k;
	for (int base = lane; base < k; base += 32 * NORM_BATCH) {
		float v[NORM_BATCH], g[NORM_BATCH];
#pragma unroll
		for (int u = 0; u < NORM_BATCH; u++) {
			int e = base + 32 * u;
			v[u] = e < k ? xr[e] : 0.f;
			g[u] = e < k ? (w ? w[e] : 1.f) : 0.f;
		}
#pragma unroll
		for (int u = 0; u < NORM_BATCH; u++)
			if (base + 32 * u < k) o[base + 32 * u] = to_half(v[u] * scale * g[u]);
	}
}
