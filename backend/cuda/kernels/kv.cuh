// kv.cuh: the KV cache's element, f16 (llama.cpp's default): half the bytes
// a position of a float cache, for the decode attention's reads at long
// contexts and the cache's size. Every write rounds once (to nearest
// even), clamped to the largest finite half as the CPU engine's cache is:
// an infinity there would turn the zero weights of masked positions into
// NaN (0·∞) for every query that reads the row. NaN stays NaN. Every read
// widens to float.
#pragma once
#include "common.cuh"

typedef f16 kv_t;
typedef uint2 kv4_t; // four elements, raw

// KV_LINE is the elements of a 128-byte line of the cache.
#define KV_LINE (128 / (int)sizeof(kv_t))

__device__ __forceinline__ float kv_get(const kv_t *p) { return f16_to_f32(*p); }

__device__ __forceinline__ void kv_put(kv_t *p, float v) {
	f16 h;
	if (fabsf(v) > 65504.f) v = v > 0.f ? 65504.f : -65504.f;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
	*p = h;
}

// kv_raw4 is elements 4i … 4i+3 of row p as stored: loads kept raw until
// they are used take half the registers of widened ones.
__device__ __forceinline__ kv4_t kv_raw4(const kv_t *p, long i) { return ((const kv4_t *)p)[i]; }

// kv_widen4 widens kv_raw4's four elements.
__device__ __forceinline__ float4 kv_widen4(kv4_t u) {
	float4 f;
	f.x = f16_to_f32((f16)(u.x & 0xffff));
	f.y = f16_to_f32((f16)(u.x >> 16));
	f.z = f16_to_f32((f16)(u.y & 0xffff));
	f.w = f16_to_f32((f16)(u.y >> 16));
	return f;
}

// kv_get4 is elements 4i … 4i+3 of row p, widened.
__device__ __forceinline__ float4 kv_get4(const kv_t *p, long i) { return kv_widen4(kv_raw4(p, i)); }
