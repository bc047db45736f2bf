// prefill_qk_norm: the query and key RMS norms of m prompt tokens (qk_norm.cu's
// twin for the batched prefill), in place in the stacked Q, K, V projection
// (gemm store, f32 [m][(n_head+2·n_kv)·head_dim]), after adding Q's and K's
// biases when there are any (the order of the CPU engine: biases, norms,
// RoPE); prefill_rope then rotates them and adds V's biases.
//
// A warp takes one norm group of one token: a head (per-head norms, one
// head_dim weight shared by the heads), or all its query heads or all its
// key heads (full: a weight per element).
#include "prefill.cuh"

extern "C" __global__ void __launch_bounds__(128)
    prefill_qk_norm(float *qkv, int m, const float *bias, int n_head, int n_kv, int head_dim, int full,
                    const float *qw, const float *kw, float eps) {
	pdl_wait_and_release();
	const int groups = full ? 2 : n_head + n_kv;
	const long gi = (long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (gi >= (long)m * groups) return;
	const int t = (int)(gi / groups), g = (int)(gi % groups);
	const bool is_q = full ? g == 0 : g < n_head;
	const int n = full ? (is_q ? n_head : n_kv) * head_dim : head_dim;
	// The group's first element in the row (Q's heads, then K's).
	const int e0 = full ? (is_q ? 0 : n_head * head_dim) : g * head_dim;
	float *x = qkv + (long)t * (n_head + 2 * n_kv) * head_dim + e0;
	const float *w = is_q ? qw : kw;
	float ss = 0.f;
	for (int e = lane; e < n; e += 32) {
		float v = x[e] + (bias ? bias[e0 + e] : 0.f);
		x[e] = v;
		ss += v * v;
	}
	const float f = rsqrtf(warp_sum(ss) / (float)n + eps);
	for (int e = lane; e < n; e += 32) x[e] = x[e] * f * w[full ? e : e % head_dim];
}
