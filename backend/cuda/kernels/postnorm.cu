// postnorm: a branch's output joins the residual stream through its own
// RMS norm (Gemma 2/3 after attention and after the FFN; OLMo 2 instead of
// the pre-norms): out = base + rs·rmsnorm(branch)·w, all fixed point
// (common.cuh), with w null meaning no norm (a branch only scaled by rs).
// The attention or FFN kernel has summed the branch into its own buffer
// with the fixed-point atomics; this kernel reads it whole, which the
// norm needs, and zeroes it for the next branch. base and out may be the
// same buffer (the attention's branch joins the stream in place).
//
// One block: the norm's sum is one block reduction, and every element has
// a single writer, so out needs no atomics. clear, when set, is zeroed too:
// the other branch buffer, when act_q8_post (act_q8.cu) took the branch
// before this one and could not zero it.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(1024)
    postnorm(long long *branch, const long long *base, long long *out, const float *w, float eps, float rs, int k,
             unsigned *poison, long long *clear) {
	__shared__ float scratch[32];
	pdl_wait_and_release();
	float ss = 0.f;
	for (int e = threadIdx.x; e < k; e += blockDim.x) {
		float v = res_f32(branch[e]);
		ss += v * v;
	}
	const float f = w ? rms_factor(block_sum(ss, scratch), k, eps) * rs : rs;
	const bool bad = *poison;
	for (int e = threadIdx.x; e < k; e += blockDim.x) {
		float v = res_f32(branch[e]) * f * (w ? w[e] : 1.f);
		if (bad) v = __int_as_float(0x7fc00000);
		long long q;
		if (!res_fixed(v, q)) atomicOr(poison, 1u);
		out[e] = base[e] + q;
		branch[e] = 0;
		if (clear) clear[e] = 0;
	}
}
