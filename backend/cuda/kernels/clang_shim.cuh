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
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) longlong2 { long long x, y; };
__device__ float4 make_float4(float, float, float, float);

__device__ float __shfl_xor_sync(unsigned mask, float v, int lane);
__device__ int __shfl_xor_sync(unsigned mask, int v, int lane);
__device__ double __shfl_xor_sync(unsigned mask, double v, int lane);
__device__ unsigned long long __shfl_xor_sync(unsigned mask, unsigned long long v, int lane);
__device__ int __shfl_sync(unsigned mask, int v, int lane);
__device__ int __shfl_up_sync(unsigned mask, int v, unsigned delta);
__device__ unsigned __ballot_sync(unsigned mask, int pred);
__device__ int __popc(unsigned);
extern "C" __device__ float expf(float);
extern "C" __device__ float logf(float);
__device__ float __expf(float);
extern "C" __device__ double exp(double);
__device__ unsigned atomicAdd(unsigned *, unsigned);
__device__ int atomicAdd(int *, int);
__device__ double atomicAdd(double *, double);
__device__ float atomicAdd(float *, float);
__device__ void __threadfence();
__device__ unsigned long long atomicAdd(unsigned long long *, unsigned long long);
__device__ unsigned long long atomicMax(unsigned long long *, unsigned long long);
__device__ unsigned long long atomicExch(unsigned long long *, unsigned long long);
__device__ unsigned atomicOr(unsigned *, unsigned);
__device__ long long __float2ll_rn(float);
extern "C" __device__ float fabsf(float);
extern "C" __device__ float rsqrtf(float);
extern "C" __device__ float fmaxf(float, float);
extern "C" __device__ int min(int, int);
extern "C" __device__ int max(int, int);
__device__ float __int_as_float(int);
__device__ float __uint_as_float(unsigned);
__device__ unsigned __float_as_uint(float);
__device__ int __float2int_rn(float);
__device__ void __syncwarp();
__device__ int __any_sync(unsigned, int);
extern "C" __device__ float roundf(float);
__device__ unsigned __byte_perm(unsigned, unsigned, unsigned);
__device__ float __ldcg(const float *);
__device__ float4 __ldcg(const float4 *);
__device__ long long __ldcg(const long long *);
__device__ float __fmul_rn(float, float);
__device__ float __fdiv_rn(float, float);
__device__ float __fadd_rn(float, float);
__device__ float __fsub_rn(float, float);
