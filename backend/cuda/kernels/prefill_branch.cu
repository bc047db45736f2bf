// prefill_branch: a branch's output joins the prefill's residual stream
// through its post-norm and the residual multiplier (postnorm.cu's twin):
// x += rs·rmsnorm(branch)·w for m rows of k, or x += rs·branch when w is
// null (a model that scales its branches without post-norms). One warp a
// row.
#include "prefill.cuh"

extern "C" __global__ void __launch_bounds__(128)
    prefill_branch(const float *branch, const float *w, float eps, float rs, int m, int k, float *x) {
	pdl_wait_and_release();
	const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (row >= m) return;
	const float *b = branch + (long)row * k;
	float *xr = x + (long)row * k;
	float f = rs;
	if (w) {
		float ss = 0.f;
		for (int e = lane; e < k; e += 32) ss += b[e] * b[e];
		f *= rsqrtf(warp_sum(ss) / (float)k + eps);
	}
	for (int e = lane; e < k; e += 32) xr[e] += b[e] * f * (w ? w[e] : 1.f);
}
