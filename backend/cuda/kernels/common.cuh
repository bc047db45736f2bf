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

// Activations sit in shared memory in 32-element blocks padded to 36 floats:
// lanes reading the same offset of consecutive blocks hit different banks,
// float4 reads stay 16-byte aligned, and slot 32 holds the block's sum
// (Q4_0 folds its -8 offset into it).
#define XS_STRIDE 36

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

// xs_store puts element e of the activation vector into the padded layout.
__device__ __forceinline__ void xs_store(float *xs, int e, float v) {
	xs[(e >> 5) * XS_STRIDE + (e & 31)] = v;
}

// xs_load fills the padded layout with in[e]*g[e] (g may be null), zero past
// k up to nb*32, and each block's sum, in one pass; it returns Σ in[e]² to
// every thread. RMSNorm's scale is applied to the dot products afterwards
// (they are linear in it), so the input is read once. The loop is
// warp-uniform: each warp fills whole 32-element blocks (blockDim is a
// multiple of 32), so a warp sum gives the block's sum.
__device__ __forceinline__ float xs_load(float *xs, const float *in, const float *g, int k, int nb, float *scratch) {
	float ss = 0.f;
	int lane = threadIdx.x & 31;
	// Four elements per thread per round, loaded before any is used, so a
	// long row costs a quarter of the memory round trips.
	for (int base = threadIdx.x & ~31; base < nb * 32; base += 4 * blockDim.x) {
		float x[4], w[4];
#pragma unroll
		for (int u = 0; u < 4; u++) {
			int e = base + u * blockDim.x + lane;
			x[u] = e < k ? in[e] : 0.f;
			w[u] = g && e < k ? g[e] : 1.f;
		}
#pragma unroll
		for (int u = 0; u < 4; u++) {
			int b = (base + u * blockDim.x) >> 5;
			if (b < nb) { // warp-uniform
				float v = x[u] * w[u];
				ss += x[u] * x[u];
				xs[b * XS_STRIDE + lane] = v;
				float s = warp_sum(v);
				if (lane == 0) xs[b * XS_STRIDE + 32] = s;
			}
		}
	}
	return block_sum(ss, scratch); // its barriers also publish xs
}

// better keeps the larger of two (value, index) candidates, the lower index
// among equals (sample.Argmax's rule); NaN never wins.
__device__ __forceinline__ void better(float &v, int &i, float v2, int i2) {
	if (v2 > v || (v2 == v && i2 < i)) {
		v = v2;
		i = i2;
	}
}

// rms_factor turns xs_load's sum of squares into RMSNorm's scale.
__device__ __forceinline__ float rms_factor(float ss, int k, float eps) { return rsqrtf(ss / (float)k + eps); }

// Weights as laid out at upload (see backend/cuda/weights.go): for row r and
// 32-element block b, blk = r*nb + b.
//   F32:  q = floats, rows padded to nb*32 elements
//   F16:  q = halves, rows padded likewise
//   Q4_0: q = 16 nibble bytes per block (ggml order), d = one f16 scale per block
//   Q8_0: q = 32 int8 per block, d = one f16 scale per block
template <int T> __device__ __forceinline__ float dot_block(const u8 *q, const f16 *d, long blk, const float *xb);

template <> __device__ __forceinline__ float dot_block<WT_Q4_0>(const u8 *q, const f16 *d, long blk, const float *xb) {
	uint4 v = ((const uint4 *)q)[blk];
	unsigned w[4] = {v.x, v.y, v.z, v.w};
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		float4 lo = *(const float4 *)(xb + 4 * j);
		float4 hi = *(const float4 *)(xb + 16 + 4 * j);
		unsigned u = w[j];
		s += (float)(u & 15) * lo.x + (float)((u >> 8) & 15) * lo.y + (float)((u >> 16) & 15) * lo.z + (float)((u >> 24) & 15) * lo.w;
		s += (float)((u >> 4) & 15) * hi.x + (float)((u >> 12) & 15) * hi.y + (float)((u >> 20) & 15) * hi.z + (float)(u >> 28) * hi.w;
	}
	return f16_to_f32(d[blk]) * (s - 8.f * xb[32]);
}

template <> __device__ __forceinline__ float dot_block<WT_Q8_0>(const u8 *q, const f16 *d, long blk, const float *xb) {
	const uint4 *p = (const uint4 *)q + 2 * blk;
	uint4 a = p[0], b = p[1];
	unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		float4 x = *(const float4 *)(xb + 4 * j);
		unsigned u = w[j];
		s += (float)(signed char)(u & 255) * x.x + (float)(signed char)((u >> 8) & 255) * x.y +
		     (float)(signed char)((u >> 16) & 255) * x.z + (float)(signed char)(u >> 24) * x.w;
	}
	return f16_to_f32(d[blk]) * s;
}

template <> __device__ __forceinline__ float dot_block<WT_F32>(const u8 *q, const f16 *, long blk, const float *xb) {
	const float4 *p = (const float4 *)q + 8 * blk;
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		float4 w = p[j];
		float4 x = *(const float4 *)(xb + 4 * j);
		s += w.x * x.x + w.y * x.y + w.z * x.z + w.w * x.w;
	}
	return s;
}

template <> __device__ __forceinline__ float dot_block<WT_F16>(const u8 *q, const f16 *, long blk, const float *xb) {
	const uint4 *p = (const uint4 *)q + 4 * blk;
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		uint4 v = p[j];
		unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float2 x = *(const float2 *)(xb + 8 * j + 2 * k);
			s += f16_to_f32((f16)(w[k] & 0xffff)) * x.x + f16_to_f32((f16)(w[k] >> 16)) * x.y;
		}
	}
	return s;
}

// dot_rows2 has one warp compute two rows' dot products with the activations
// in xs (row r0 of matrix 0 and row r1 of matrix 1). Every lane gets both sums.
template <int T>
__device__ __forceinline__ void dot_rows2(const u8 *q0, const f16 *d0, long r0, const u8 *q1, const f16 *d1, long r1,
                                          bool two, int nb, const float *xs, float &o0, float &o1) {
	float s0 = 0.f, s1 = 0.f;
	int b = threadIdx.x & 31;
	// Two blocks per lane per round keep twice the loads in flight.
	for (; b + 32 < nb; b += 64) {
		const float *xa = xs + b * XS_STRIDE, *xb = xa + 32 * XS_STRIDE;
		s0 += dot_block<T>(q0, d0, r0 * nb + b, xa) + dot_block<T>(q0, d0, r0 * nb + b + 32, xb);
		if (two) s1 += dot_block<T>(q1, d1, r1 * nb + b, xa) + dot_block<T>(q1, d1, r1 * nb + b + 32, xb);
	}
	if (b < nb) {
		const float *xa = xs + b * XS_STRIDE;
		s0 += dot_block<T>(q0, d0, r0 * nb + b, xa);
		if (two) s1 += dot_block<T>(q1, d1, r1 * nb + b, xa);
	}
	o0 = warp_sum(s0);
	o1 = warp_sum(s1);
}

// prefetch_row asks L2 for this lane's blocks of row r. Kernels call it for
// their first rows before waiting on the previous kernel (PDL): weights do
// not depend on it, so their fetch overlaps its tail.
template <int T> __device__ __forceinline__ void prefetch_row(const u8 *q, const f16 *d, long r, int nb) {
	const int bytes = T == WT_Q4_0 ? 16 : T == WT_Q8_0 ? 32 : T == WT_F16 ? 64 : 128;
	for (int b = threadIdx.x & 31; b < nb; b += 32) {
		const u8 *p = q + (r * nb + b) * bytes;
		asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
		if (T == WT_F32) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + 64));
		if (d) asm volatile("prefetch.global.L2 [%0];" ::"l"(d + r * nb + b));
	}
}

// Warps of the whole grid walk the row pairs.
__device__ __forceinline__ int grid_warp() { return blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); }
__device__ __forceinline__ int grid_warps() { return gridDim.x * (blockDim.x >> 5); }

// Instantiate a kernel template once per weight type under extern "C" names
// name_f32, name_f16, name_q4_0, name_q8_0.
#define FOR_EACH_WEIGHT_TYPE(M) M(f32, WT_F32) M(f16, WT_F16) M(q4_0, WT_Q4_0) M(q8_0, WT_Q8_0)
