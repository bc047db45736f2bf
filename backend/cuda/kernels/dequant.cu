// dequant: rows of a weight matrix as f16 rows, [rows][k] (k whole
// 32-element blocks), with the values gemm.cuh's load_wblock and
// store_wblock give the prefill gemm's tiles. On long prompts the prefill
// multiplies the quantized types through F16's wgmma gemm on this copy
// (prefill_ops.go, launcher.dequantized): F16's weights go to shared
// memory by cp.async four stages ahead, where the others wait on their
// registers' loads and dequantize in the k loop, once for each row tile of
// the prompt.
//
// A thread takes one block, first + blockIdx.x·256 + threadIdx.x of the
// matrix: its raw words are loaded before the PDL wait (weights are never
// written), its halves stored after it (the previous product may still
// read the buffer). The 256 blocks of a CTA are 16 KB in a row of the
// output, so they go through shared memory and out in 16-byte chunks that
// consecutive lanes write side by side (a thread's own 64 bytes, stored
// directly, were 4 stores a warp each touching 32 lines: 1.9 TB/s for
// Q4_0 at Llama-8B's shapes). In shared memory block b's chunk c sits at
// c ^ ((b/2) mod 4) of its four, so neither side's 8-lane phases meet in a
// bank.
#include "gemm.cuh"

#define DEQUANT_THREADS 256

template <int T> __device__ __forceinline__ void dequant(const u8 *wq, const f16 *wd, long first, int blocks, f16 *out) {
	__shared__ uint4 buf[DEQUANT_THREADS * 4];
	const int tid = threadIdx.x, b0 = blockIdx.x * DEQUANT_THREADS;
	const wblock<T> b = load_wblock<T>(wq, wd, first + b0 + tid, b0 + tid < blocks);
	pdl_wait_and_release();
	store_wblock<T>(wdst{(f16 *)(buf + 4 * tid), 0, (tid >> 1) & 3}, b);
	__syncthreads();
	uint4 *o = (uint4 *)out + 4l * b0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const int c = i * DEQUANT_THREADS + tid, blk = c >> 2;
		if (b0 + blk < blocks) o[c] = buf[4 * blk + ((c & 3) ^ ((blk >> 1) & 3))];
	}
}

#define DEQUANT(name, T)                                                                                    \
	extern "C" __global__ void __launch_bounds__(DEQUANT_THREADS)                                           \
	    dequant_##name(const u8 *wq, const f16 *wd, long first, int blocks, f16 *out) {                     \
		dequant<T>(wq, wd, first, blocks, out);                                                             \
	}
DEQUANT(q4_0, WT_Q4_0)
DEQUANT(q8_0, WT_Q8_0)
DEQUANT(mix, WT_MIX)
