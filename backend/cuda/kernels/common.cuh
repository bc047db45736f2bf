// common.cuh: device code shared by the kernels. Every kernel is extern "C"
// so the Go side finds it by a plain name; templates are instantiated per
// weight type by the .cu files.
#pragma once
#ifdef __clang__
#include "clang_shim.cuh"
#endif

typedef unsigned char u8;
typedef unsigned short f16; // raw IEEE binary16 bits: no cuda_fp16.h needed

// Weight types, numbered like the Go side's gpuType. WT_MIX kernels read
// every quantized layout of weights.cuh, chosen per matrix at run time.
#define WT_F32 0
#define WT_F16 1
#define WT_Q4_0 2
#define WT_Q8_0 3
#define WT_BF16 4
#define WT_MIX 5
// The mixed family with its type fixed at compile time, for matrices of
// one common type (llama.cpp's Q4_K_M is Q4_K and Q6_K, its Q5_0 file
// Q5_0 and a Q6_K head): the same bytes and code as WT_MIX without its
// switch over the layouts, which cost its kernels registers (168–255 a
// thread) and so occupancy. Only the decode kernels that read one matrix
// type at a time have them (the Go side's kernelSet.typed); the K-quants'
// also have gemms (gemm.cu, gemm_wg.cu).
#define WT_MIX_Q4K 6
#define WT_MIX_Q6K 7
#define WT_MIX_Q5K 8
#define WT_MIX_Q4_1 9
#define WT_MIX_Q5_0 10
#define WT_MIX_Q5_1 11
#define WT_MIX_Q2K 12
#define WT_MIX_Q3K 13
#define WT_MIX_IQ4NL 14
#define WT_MIX_IQ4XS 15
// FOR_EACH_TYPED_MIX(X) expands X(name, WT_ type, MX_ layout code) for
// every typed family; name is the kernels' suffix (kernelset.go's
// typedQuants).
#define FOR_EACH_TYPED_MIX(X)                                                                                     \
	X(mixq4k, WT_MIX_Q4K, MX_Q4_K)                                                                                 \
	X(mixq6k, WT_MIX_Q6K, MX_Q6_K)                                                                                 \
	X(mixq5k, WT_MIX_Q5K, MX_Q5_K)                                                                                 \
	X(mixq4_1, WT_MIX_Q4_1, MX_Q4_1)                                                                               \
	X(mixq5_0, WT_MIX_Q5_0, MX_Q5_0)                                                                               \
	X(mixq5_1, WT_MIX_Q5_1, MX_Q5_1)                                                                               \
	X(mixq2k, WT_MIX_Q2K, MX_Q2_K)                                                                                 \
	X(mixq3k, WT_MIX_Q3K, MX_Q3_K)                                                                                 \
	X(mixiq4nl, WT_MIX_IQ4NL, MX_IQ4_NL)                                                                           \
	X(mixiq4xs, WT_MIX_IQ4XS, MX_IQ4_XS)

__device__ __forceinline__ float f16_to_f32(f16 h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}

// Programmatic dependent launch (sm_90+): wait for the previous kernel's
// writes, then let the next kernel start its launch. Both are no-ops when the
// kernel was launched without the PDL attribute, and on older targets. Only
// work that reads nothing the previous kernels write may come before it.
__device__ __forceinline__ void pdl_wait_and_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// block_sum returns the sum over the block to every thread. scratch holds 32
// floats; the leading barrier lets callers reuse it back to back.
__device__ __forceinline__ float block_sum(float v, float *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_sum(v);
	__syncthreads();
	if (lane == 0) scratch[w] = v;
	__syncthreads();
	v = lane < nw ? scratch[lane] : 0.f;
	return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) scratch[w] = v;
	__syncthreads();
	v = lane < nw ? scratch[lane] : -INFINITY;
	return warp_max(v);
}

// better keeps the larger of two (value, index) candidates, the lower index
// among equals (sample.Argmax's rule); NaN never wins.
__device__ __forceinline__ void better(float &v, int &i, float v2, int i2) {
	if (v2 > v || (v2 == v && i2 < i)) {
		v = v2;
		i = i2;
	}
}

// The decode step's residual stream is fixed point: value·2^RES_FRAC in an
// int64. The kernels that add to it (attention's output projection, the
// FFN's down projection) are split over many blocks, and each block adds its
// part with an atomic: integer addition gives the same sum in any order, so
// the step stays bitwise reproducible, where float atomics would not.
// RES_FRAC = 30 keeps ~1e-9 absolute precision; an addend must stay under
// RES_LIMIT (2^16) and the engine bounds the addends per element and step
// (2^16), so no sum can pass 2^62. An addend that is NaN, ±Inf or too large
// sets the step's poison word instead, and every reader then computes NaN,
// as float arithmetic would have.
#define RES_FRAC 30
#define RES_ONE 1073741824.f // 2^RES_FRAC
#define RES_LIMIT 65536.f

__device__ __forceinline__ float res_f32(long long v) { return (float)v * (1.f / RES_ONE); }

// res_fixed converts v to fixed point; false when it does not fit (NaN too).
__device__ __forceinline__ bool res_fixed(float v, long long &q) {
	bool ok = fabsf(v) < RES_LIMIT;
	q = ok ? __float2ll_rn(v * RES_ONE) : 0;
	return ok;
}

// res_add adds v and carry (already fixed point) to the residual element r.
__device__ __forceinline__ void res_add(long long *r, float v, long long carry, unsigned *poison) {
	long long q;
	if (!res_fixed(v, q)) atomicOr(poison, 1u);
	atomicAdd((unsigned long long *)r, (unsigned long long)(q + carry));
}

// softcap squashes x to cap·tanh(x/cap) (Gemma's soft-capping); a cap of 0
// leaves it. tanh(y) = 1 - 2/(1 + e^2y) on the fast exponential: a few
// instructions where tanhf's are dozens (these run in the score and logit
// loops); the error is absolute, ~1e-7·cap, ±cap at the extremes.
__device__ __forceinline__ float softcap(float x, float cap) {
	return cap > 0.f ? cap - 2.f * cap / (1.f + __expf(2.f * x / cap)) : x;
}

// glu is the gated FFN's unit: act(g)·u, act SiLU (0) or GELU with its
// tanh approximation (1), as model.Activation numbers them. Both are
// g·sigmoid(h)·u: h = g for SiLU, h = 2z for GELU (0.5·(1 + tanh(z)) is
// sigmoid(2z), z = √(2/π)·(g + 0.044715·g³)), so the two share one
// exponential and the choice is a select, not a second code path.
#define ACT_SILU 0
#define ACT_GELU_TANH 1
__device__ __forceinline__ float glu(float g, float u, int act) {
	float h = act == ACT_GELU_TANH ? 1.5957691216057308f * g * (1.f + 0.044715f * g * g) : g;
	return g / (1.f + expf(-h)) * u;
}

// rms_factor turns a sum of squares over k elements into RMSNorm's scale.
__device__ __forceinline__ float rms_factor(float ss, int k, float eps) { return rsqrtf(ss / (float)k + eps); }

// Instantiate a kernel template once per weight type under extern "C" names
// name_f32, name_f16, name_q4_0, name_q8_0, name_bf16, name_mix.
#define FOR_EACH_WEIGHT_TYPE(M)                                                                                    \
	M(f32, WT_F32) M(f16, WT_F16) M(q4_0, WT_Q4_0) M(q8_0, WT_Q8_0) M(bf16, WT_BF16) M(mix, WT_MIX)
