// to_bf16: f16 activations rounded to bf16 (to nearest, ties to even, as
// quant.F32ToBF16 rounds), for gemm_wg's BF16 products: wgmma multiplies
// bf16 by bf16 only, and widening the weights to f16 in the k loop cost
// more shared-memory traffic than the product had to spare (gemm_wg.cu).
// Eight elements a thread; n is a multiple of 8 (rows of whole 32-element
// blocks).
#include "prefill.cuh"

// bf16x2 packs lo and hi as bf16, lo in the low half.
__device__ __forceinline__ u32 bf16x2(float lo, float hi) {
	u32 r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

__device__ __forceinline__ u32 pair_to_bf16(u32 h2) {
	return bf16x2(f16_to_f32((f16)(h2 & 0xffff)), f16_to_f32((f16)(h2 >> 16)));
}

extern "C" __global__ void to_bf16(const uint4 *in, uint4 *out, long n8) {
	pdl_wait_and_release();
	long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n8) return;
	const uint4 v = in[i];
	out[i] = make_uint4v(pair_to_bf16(v.x), pair_to_bf16(v.y), pair_to_bf16(v.z), pair_to_bf16(v.w));
}
