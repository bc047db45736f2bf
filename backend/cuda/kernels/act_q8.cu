// act_q8: the int8 activations of a wide model's QKV or FFN kernel, once a
// layer. The kernels of the int8 layouts (decode.cuh, xq8) otherwise stage
// the whole residual stream and the norm's weights in every block and
// quantize them there: at d 4096 that is 48 KiB read and 128 blocks
// quantized before a block's first product, in each of the hundreds of
// blocks of the QKV and gate/up kernels, more bytes than their weights'
// and most of their time. Here it is done once, and the kernels read
// their lanes' blocks (52 bytes each) from L2.
//
// x8 gets x·g as int8 blocks (x the fixed-point residual stream res, k
// elements, whole 32-element blocks; g the norm's weights, or ones when
// norm_w is null): block b's 12 words of xblk8 at x8[12b], and Σ x² of its
// unweighted elements (RMSNorm's statistic) at x8[12·nb + b]. The codes
// and sums are q8_stage's to the bit (the same arithmetic in the same
// order), so the kernels' results do not depend on which one ran.
//
// A warp a block, a lane an element; the norm's weights are read before
// the PDL wait.
#include "decode.cuh"

extern "C" __global__ void __launch_bounds__(256) act_q8(const long long *res, const float *norm_w, int k, unsigned *x8) {
	const int lane = threadIdx.x & 31, nb = k >> 5, b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const float g = norm_w && b < nb ? norm_w[32 * b + lane] : 1.f;
	pdl_wait_and_release();
	if (b >= nb) return; // whole warps
	const float x = res_f32(res[32 * b + lane]);
	const float ss = warp_sum(x * x);
	q8_block(norm_w ? x * g : x, x8 + 12 * b);
	if (lane == 0) x8[12 * nb + b] = __float_as_uint(ss);
}

// act_q8_post is act_q8 after a post-normed branch joins the stream
// (Gemma 2/3, OLMo 2): postnorm.cu's res = base + rs·rmsnorm(branch)·w,
// then act_q8 of res, in one kernel where they were two (Llama-1B-shaped
// Gemma 3, Q4_K_M: 798 → 700 µs a token, H200). Blocks of 1024 threads
// sum the branch's squares as postnorm's one block does, so res is
// postnorm's to the bit and x8 act_q8's on it. Each block reads the whole
// branch for the norm, and every element has one writer. The branch
// cannot be zeroed here, with other blocks still reading it: the engine
// alternates two, and this kernel zeroes clear, the other one, whose
// readers are done.
//
// base is read before the PDL wait: the engine's base was written two or
// more launches earlier (the stream before the branch's own kernels), and
// a kernel's pre-wait part runs only after the launch before it has
// waited, so after the one before that has finished. It is read through
// L2 (__ldcg): an earlier launch of this kernel may have left the
// buffer's old contents in this SM's L1.
extern "C" __global__ void __launch_bounds__(1024)
    act_q8_post(const long long *branch, const long long *base, long long *res, const float *post_w, float eps,
                float rs, long long *clear, const float *norm_w, int k, unsigned *x8, unsigned *poison) {
	__shared__ float scratch[32];
	const int lane = threadIdx.x & 31, nb = k >> 5, b = blockIdx.x * 32 + (threadIdx.x >> 5), e = 32 * b + lane;
	const bool in = b < nb;
	const float g = norm_w && in ? norm_w[e] : 1.f, pw = post_w && in ? post_w[e] : 1.f;
	const long long bv = in ? __ldcg(base + e) : 0;
	pdl_wait_and_release();
	float ss = 0.f;
	for (int i = threadIdx.x; i < k; i += blockDim.x) {
		float v = res_f32(branch[i]);
		ss += v * v;
	}
	const float f = post_w ? rms_factor(block_sum(ss, scratch), k, eps) * rs : rs;
	if (!in) return; // whole warps
	float v = res_f32(branch[e]) * f * pw;
	if (*poison) v = __int_as_float(0x7fc00000);
	long long q;
	if (!res_fixed(v, q)) atomicOr(poison, 1u);
	const long long r = bv + q;
	res[e] = r;
	if (clear) clear[e] = 0;
	const float x = res_f32(r);
	const float sx = warp_sum(x * x);
	q8_block(norm_w ? x * g : x, x8 + 12 * b);
	if (lane == 0) x8[12 * nb + b] = __float_as_uint(sx);
}

// q8_row writes a float row x (k elements, whole 32-element blocks: the
// attention heads' outputs) to x8 as int8 blocks, xblk8's 12 words each
// (q8_block, as act_q8 rounds), for W_o's matvec_add8 (tuning.attnHeads8):
// a third of the float row's bytes for each of W_o's thousands of row
// pairs to read, and dp4a in place of the float path's conversions. A warp
// a block, a lane an element; x is the previous kernel's.
extern "C" __global__ void __launch_bounds__(256) q8_row(const float *x, int k, unsigned *x8) {
	const int lane = threadIdx.x & 31, nb = k >> 5, b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	pdl_wait_and_release();
	if (b >= nb) return; // whole warps
	q8_block(x[32 * b + lane], x8 + 12 * b);
}
