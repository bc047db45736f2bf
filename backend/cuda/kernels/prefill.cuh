// prefill.cuh: device code shared by the batched-prefill kernels (gemm.cu,
// prefill_*.cu): f16 packing, shared-memory addresses, ldmatrix, the
// m16n8k16 tensor-core product (mma.sync, sm_80+: both PTX targets have it)
// and cp.async. Activations between the prefill kernels are f16 (raw bits,
// the f16 type of common.cuh) except the residual stream, which stays f32.
//
// Fragment layouts of mma.m16n8k16 (g = lane/4, t = lane%4):
//   A (16×16, row-major) a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)
//   B (16×8, k by n)     b0: (k 2t..2t+1, n g)  b1: (k 2t+8.., n g)
//   C (16×8, f32)        c0,c1: (g, 2t..2t+1)  c2,c3: (g+8, 2t..2t+1)
#pragma once
#include "common.cuh"

#ifdef __clang__
extern "C" __device__ float exp2f(float);
#endif

typedef unsigned u32;

__device__ __forceinline__ uint4 make_uint4v(u32 x, u32 y, u32 z, u32 w) {
	uint4 v;
	v.x = x;
	v.y = y;
	v.z = z;
	v.w = w;
	return v;
}

__device__ __forceinline__ uint4 make_zero4() { return make_uint4v(0, 0, 0, 0); }

__device__ __forceinline__ float4 make_float4v(float x, float y, float z, float w) {
	float4 v;
	v.x = x;
	v.y = y;
	v.z = z;
	v.w = w;
	return v;
}

// pack_half2 rounds two floats to f16 (to nearest even): lo in the low 16
// bits, which is the lower address in memory.
__device__ __forceinline__ u32 pack_half2(float lo, float hi) {
	u32 r;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

__device__ __forceinline__ f16 to_half(float v) {
	f16 h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
	return h;
}

__device__ __forceinline__ u32 smem_addr(const void *p) {
	u32 a;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
	return a;
}

// ldsm_x4 loads four 8×8 f16 matrices; lane l gives the address of row l%8
// of matrix l/8, and register i receives matrix i in mma fragment order.
__device__ __forceinline__ void ldsm_x4(u32 r[4], u32 addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr)
	             : "memory");
}

// ldsm_x4_trans is ldsm_x4 with each matrix transposed.
__device__ __forceinline__ void ldsm_x4_trans(u32 r[4], u32 addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr)
	             : "memory");
}

// mma_16816 accumulates c += a·b for one 16×8 tile over 16 of k.
__device__ __forceinline__ void mma_16816(float c[4], const u32 a[4], u32 b0, u32 b1) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	             "{%0, %1, %2, %3};"
	             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cp_async16 copies 16 bytes from global to shared memory without passing
// through registers; when valid is false it writes 16 zero bytes and reads
// nothing.
__device__ __forceinline__ void cp_async16(u32 saddr, const void *g, bool valid) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr), "l"(g), "r"(valid ? 16 : 0)
	             : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// cp_async_wait waits until at most n of this thread's groups are pending.
template <int N> __device__ __forceinline__ void cp_async_wait() {
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
