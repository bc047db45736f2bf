// act_f32: act_q8's twin for the float layouts (F16, BF16) on wide models:
// the normed input of the split FFN's gate/up kernel (glu.cu) and of the
// head (logits_xf_*), once a layer, where their staged kernels took the
// whole residual stream and the norm's weights into every block.
//
// xf gets x·g (x the fixed-point residual stream res, k elements; g the
// norm's weights, or ones when norm_w is null), zero to the end of the
// last 32-element block, and the Σ x² of block b's unweighted elements at
// xf[32·nb + b] (RMSNorm's statistic: the readers sum the blocks' and
// scale their products). A warp a block, a lane an element; the norm's
// weights are read before the PDL wait.
#include "decode.cuh"

extern "C" __global__ void __launch_bounds__(256) act_f32(const long long *res, const float *norm_w, int k, float *xf) {
	const int lane = threadIdx.x & 31, nb = (k + 31) >> 5, b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int e = 32 * b + lane;
	const float g = norm_w && e < k ? norm_w[e] : 1.f;
	pdl_wait_and_release();
	if (b >= nb) return; // whole warps
	const float x = e < k ? res_f32(res[e]) : 0.f;
	const float ss = warp_sum(x * x);
	xf[e] = x * g;
	if (lane == 0) xf[32 * nb + b] = ss;
}
