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
