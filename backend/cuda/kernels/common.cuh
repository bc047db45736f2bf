// common.cuh: device code shared by the kernels. Every kernel is extern "C"
// so the Go side finds it by a plain name; templates are instantiated per
// weight type by the .cu files.
#pragma once
#ifdef __clang__
#include "clang_shim.cuh"
#endif

typedef unsigned char u8;
typedef unsigned short f16; // raw IEEE binary16 bits: no cuda_fp16.h needed

// Weight types, numbered like the Go side's gpuType.
#define WT_F32 0
#define WT_F16 1
#define WT_Q4_0 2
#define WT_Q8_0 3

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

// rms_factor turns a sum of squares over k elements into RMSNorm's scale.
__device__ __forceinline__ float rms_factor(float ss, int k, float eps) { return rsqrtf(ss / (float)k + eps); }

// Instantiate a kernel template once per weight type under extern "C" names
// name_f32, name_f16, name_q4_0, name_q8_0.
#define FOR_EACH_WEIGHT_TYPE(M) M(f32, WT_F32) M(f16, WT_F16) M(q4_0, WT_Q4_0) M(q8_0, WT_Q8_0)
