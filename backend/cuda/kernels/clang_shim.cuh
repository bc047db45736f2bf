// clang_shim.cuh declares the few CUDA built-ins the kernels use, so that
// scripts/check-cu.sh can type-check them with clang -nocudainc on a machine
// without the CUDA SDK. nvcc never sees this file.
#pragma once
#include <__clang_cuda_builtin_vars.h>

#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define INFINITY __builtin_inff()

struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) float2 { float x, y; };

__device__ float __shfl_xor_sync(unsigned mask, float v, int lane);
__device__ int __shfl_xor_sync(unsigned mask, int v, int lane);
extern "C" __device__ float expf(float);
__device__ unsigned atomicAdd(unsigned *, unsigned);
__device__ void __threadfence();
extern "C" __device__ float rsqrtf(float);
extern "C" __device__ float fmaxf(float, float);
extern "C" __device__ int min(int, int);
extern "C" __device__ int max(int, int);
