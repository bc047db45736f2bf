// target: sm_90a
// gemm_wg: gemm.cu's product on Hopper's warpgroup MMA (wgmma, sm_90a only:
// scripts/build-ptx.sh builds this file for that target alone, and the
// backend loads it on 9.0 devices). The same operands, epilogues
// (gemm.cuh) and kernel names with the suffix _w; one tile: 128×128 of C
// on two warpgroups, each the product of 64 activation rows and the
// tile's 128 weight rows (wgmma.m64n128k16, 64 f32 accumulators a
// thread).
//
// Both operands are read by the tensor cores from shared memory, K-major
// (a row's 64 halves of a stage in 128 bytes) in the 128-byte swizzle: the
// 16-byte chunk c of row r sits at chunk c ^ (r mod 8), so the eight rows
// of an 8×128-byte core block spread over the banks. The activations
// arrive by cp.async into that layout, and so do F16 and BF16 weights (a
// BF16 product's activations are bf16: to_bf16.cu); the other
// types are dequantized by the threads into it (gemm.cuh's wdst). One
// fence.proxy.async makes both visible to the tensor cores.
//
// The products are asynchronous: a stage's wgmma (k 16 each) are one
// group, and a thread waits for its group of stage s-1 only after issuing
// stage s, so the loads of later stages and the dequantization of stage
// s+1 overlap the tensor cores' work (wg_cfg says how far ahead).
//
// Tried: a 128×256 tile (two m64n128k16 a k step, twice the products an
// activation byte): slower for every type (F16 gate/up 322 against 283
// µs, Q4_K 562 against 510 at Llama-8B's shape, 2026-11-27).
#include "gemm.cuh"

#define WG_BM 128
#define WG_BN 128
#define WG_STAGE (WG_BM * GEMM_BK * 2) // bytes of one activation buffer: 128 rows of 64 halves

// wg_desc is a wgmma matrix descriptor for K-major operand rows of 128
// bytes in the 128-byte swizzle, the core blocks of 8 rows 1024 bytes
// apart, starting at shared address addr (a 1024-byte aligned buffer plus
// the k offset within its rows).
__device__ __forceinline__ unsigned long long wg_desc(u32 addr) {
	unsigned long long d = (addr & 0x3FFFF) >> 4; // start address, 16-byte units
	d |= 1ull << 16;                            // leading byte offset: unused for swizzled K-major
	d |= (unsigned long long)(1024 >> 4) << 32; // stride byte offset: 8 rows
	d |= 1ull << 62;                            // 128-byte swizzle
	return d;
}

// wg_mma: d (+)= A·Bᵀ for 64 rows of A, 128 rows of B and 16 of k, both
// f16 (BF16: both bf16).
#define WG_MMA_ASM(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
		             "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " \
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
		             "%64, %65, p, 1, 1, 0, 0;\n}\n" \
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
		             : "l"(da), "l"(db), "r"(accumulate))

template <bool BF16>
__device__ __forceinline__ void wg_mma(float d[64], unsigned long long da, unsigned long long db, int accumulate) {
	if constexpr (BF16) {
		WG_MMA_ASM("bf16");
	} else {
		WG_MMA_ASM("f16");
	}
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// wg_wait waits until at most N of this warpgroup's MMA groups are pending.
template <int N> __device__ __forceinline__ void wg_wait() {
	asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// wg_hold keeps the compiler from moving reads or writes of the
// accumulators across the asynchronous products' issue and wait.
__device__ __forceinline__ void wg_hold(float d[64]) {
#pragma unroll
	for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[i])::"memory");
}
// fence_async_smem orders this thread's shared-memory writes (stores and
// completed cp.async copies) before the tensor cores' reads.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// wg_cfg is the kernels' pipeline. The products of a stage take ~0.3 µs;
// a load from L2 or DRAM under this traffic takes several times that, so
// each operand is loaded several stages ahead of its products. The
// activations (and F16 weights, which need no conversion) arrive by
// cp.async into swizzled buffers PF stages ahead; the other types are
// loaded into registers LB stages ahead (a ring of LB blocks) and
// dequantized into one of three buffers the stage before their products.
// A buffer is reused when the products that read it are done: stage s's
// copies go to the buffer of stage s+PF-NA = s-2, and s+1's weights to
// that of s-2, which every warpgroup has waited for before the barrier of
// stage s.
//
// Measured at Llama-8B's shape, 512 rows (H200, 2026-11-27): with PF 2 and
// the F16 weights in registers like the others, F16 gate/up took 615 µs;
// copied, PF 4: 283 (PF 5: the same). The ring of LB 2 took Q4_K's
// gate/up from 512 to 457 µs and Q4_0's from 560 to 475; LB 4: 487 and 463.
//
// BF16 weights are copied like F16's and multiplied by bf16 activations
// (to_bf16.cu rounds them): wgmma takes no f16 by bf16. Widening them to
// f16 in shared memory instead, in place after the copy, took Llama-8B's
// gate/up (512 rows, H200, 2026-11-28) from F16's 283 µs to 360: those
// reads and writes of each stage compete with the products' own reads of
// shared memory. Through dequant.cu's f16 copies, pp512 was 21.1k tok/s
// against F16's 27.3k.
template <int T> struct wg_cfg {
	static constexpr bool direct = T == WT_F16 || T == WT_BF16;
	static constexpr int PF = 4;                // stages copied ahead
	static constexpr int LB = 2;                // stages of weights in registers ahead (not direct)
	static constexpr int NA = PF + 2;           // activation buffers
	static constexpr int NB = direct ? NA : 3;  // weight buffers
};

// gemm_wg computes the block's 128×128 tile of C.
template <int T, int EPI>
__device__ __forceinline__ void gemm_wg(const f16 *a, int m, int k, const u8 *wq, const f16 *wd, const u8 *wq2,
                                        const f16 *wd2, int n, void *out, int ldo, int act) {
	using C = wg_cfg<T>;
	extern __shared__ __attribute__((aligned(1024))) unsigned char wg_smem[];
	// The swizzle is of address bits: buffers start 1024-byte aligned
	// (the launch asks for 1 KB more than the buffers).
	const u32 raw = smem_addr(wg_smem);
	const u32 base = (raw + 1023) & ~1023u;
	unsigned char *const gbase = wg_smem + (base - raw);
	const u32 bbase = base + C::NA * WG_STAGE;
	pdl_wait_and_release();
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;
	const int m0 = blockIdx.x * WG_BM;
	const int nkb = k >> 5;
	const int all = (nkb + 1) >> 1;
	const int s0 = (int)((long)blockIdx.z * all / gridDim.z);
	const int stages = (int)((long)(blockIdx.z + 1) * all / gridDim.z) - s0;
	const bool split = gridDim.z > 1;

	// The weight row of the tile's row r: for the GLU epilogue the tile's
	// rows alternate between gate (even) and up (odd) rows of 64 units.
	auto weight_row = [&](int r, bool &second) -> long {
		if (EPI == EPI_GLU) {
			second = r & 1;
			return (long)blockIdx.y * (WG_BN / 2) + (r >> 1);
		}
		second = false;
		return (long)blockIdx.y * WG_BN + r;
	};

	// load_stage issues the cp.async copies of stage s's activation tile
	// (and for direct weights the weight tile) as one group (an empty group
	// past the last stage keeps the count uniform).
	auto load_stage = [&](int s) {
		if (s < stages) {
			const int gk0 = (s0 + s) * GEMM_BK;
			const u32 dst = base + (s % C::NA) * WG_STAGE;
#pragma unroll
			for (int i = 0; i < WG_BM * 8 / 256; i++) {
				int c = tid + i * 256;
				int r = c >> 3, ch = c & 7;
				int gk = gk0 + ch * 8;
				bool ok = m0 + r < m && gk < k;
				const f16 *src = ok ? a + (long)(m0 + r) * k + gk : a;
				cp_async16(dst + r * 128 + ((ch ^ (r & 7)) << 4), src, ok);
			}
			if constexpr (C::direct) {
				const u32 bdst = bbase + (s % C::NB) * WG_STAGE;
#pragma unroll
				for (int i = 0; i < WG_BN * 8 / 256; i++) {
					int c = tid + i * 256;
					int r = c >> 3, ch = c & 7;
					int gk = gk0 + ch * 8;
					bool second;
					long wrow = weight_row(r, second);
					bool ok = wrow < n && gk < k;
					const f16 *w = (const f16 *)(second ? wq2 : wq);
					const f16 *src = ok ? w + wrow * k + gk : w;
					cp_async16(bdst + r * 128 + ((ch ^ (r & 7)) << 4), src, ok);
				}
			}
		}
		cp_async_commit();
	};

	// The register path: this thread dequantizes the stage's first or
	// second quant block of tile row tid/2.
	const int brow = tid >> 1, bsub = tid & 1;
	bool second;
	const long wrow = weight_row(brow, second);
	const u8 *bq = second ? wq2 : wq;
	const f16 *bd = second ? wd2 : wd;
	const bool brow_ok = wrow < n;
	auto load_b = [&](int s) {
		int kb = 2 * (s0 + s) + bsub;
		return load_wblock<T>(bq, bd, wrow * nkb + kb, s < stages && brow_ok && kb < nkb);
	};
	auto store_b = [&](int s, const wblock<T> &b) {
		wdst d = {(f16 *)(gbase + C::NA * WG_STAGE + (s % C::NB) * WG_STAGE + brow * 128), 4 * bsub, brow & 7};
		store_wblock<T>(d, b);
	};

	float acc[64];
#pragma unroll
	for (int i = 0; i < 64; i++) acc[i] = 0.f;

#pragma unroll
	for (int s = 0; s < C::PF; s++) load_stage(s);
	wblock<T> ring[C::direct ? 1 : C::LB]; // ring[i]: stage s+1+i's block at stage s
	if constexpr (!C::direct) {
		store_b(0, load_b(0));
#pragma unroll
		for (int i = 0; i < C::LB; i++) ring[i] = load_b(1 + i);
	}
	for (int s = 0; s < stages; s++) {
		cp_async_wait<C::PF - 1>(); // this thread's copies of stage s are done
		fence_async_smem();
		__syncthreads(); // everyone's, and stage s's weights are written
		const u32 ta = base + (s % C::NA) * WG_STAGE + wgi * 64 * 128;
		const u32 tb = bbase + (s % C::NB) * WG_STAGE;
		wg_hold(acc);
		wg_fence();
#pragma unroll
		for (int kk = 0; kk < GEMM_BK / 16; kk++) wg_mma<T == WT_BF16>(acc, wg_desc(ta + kk * 32), wg_desc(tb + kk * 32), 1);
		wg_commit();
		wg_hold(acc);
		load_stage(s + C::PF);
		if constexpr (!C::direct) {
			// The newest load is issued before the oldest block is used.
			wblock<T> next = load_b(s + 1 + C::LB);
			if (s + 1 < stages) store_b(s + 1, ring[0]);
#pragma unroll
			for (int i = 0; i + 1 < C::LB; i++) ring[i] = ring[i + 1];
			ring[C::LB - 1] = next;
		}
		wg_wait<1>();
		wg_hold(acc);
	}
	wg_wait<0>();
	wg_hold(acc);

	// The accumulators of m64nNk16: register i of warp w (of the
	// warpgroup) holds row 16w + g + 8·((i/2) mod 2), column 8·(i/4) + 2t +
	// i mod 2 (g = lane/4, t = lane mod 4).
	const int row = m0 + wgi * 64 + (warp & 3) * 16 + (lane >> 2), tq = lane & 3;
#pragma unroll
	for (int j = 0; j < 16; j++)
#pragma unroll
		for (int hr = 0; hr < 2; hr++)
			gemm_put<EPI, WG_BN>(out, ldo, m, n, row + 8 * hr, 8 * j + 2 * tq, acc[4 * j + 2 * hr], acc[4 * j + 2 * hr + 1],
			                     act, split);
}

#define GEMM_WG_KERNEL(name, T, epi, EPI)                                                                             \
	extern "C" __global__ void __launch_bounds__(256, 1)                                                              \
	    gemm_##name##_##epi##_w(const f16 *a, int m, int k, const u8 *wq, const f16 *wd, const u8 *wq2, const f16 *wd2, \
	                            int n, void *out, int ldo, int act) {                                                   \
		gemm_wg<T, EPI>(a, m, k, wq, wd, wq2, wd2, n, out, ldo, act);                                                 \
	}
#define GEMM_WG_EPILOGUES(name, T)                                                                                     \
	GEMM_WG_KERNEL(name, T, store, EPI_STORE) GEMM_WG_KERNEL(name, T, add, EPI_ADD) GEMM_WG_KERNEL(name, T, glu, EPI_GLU)
GEMM_WG_EPILOGUES(q4_0, WT_Q4_0)
GEMM_WG_EPILOGUES(q8_0, WT_Q8_0)
GEMM_WG_EPILOGUES(f16, WT_F16)
GEMM_WG_EPILOGUES(bf16, WT_BF16)
GEMM_WG_EPILOGUES(mix, WT_MIX)
GEMM_WG_EPILOGUES(mixq4k, WT_MIX_Q4K)
GEMM_WG_EPILOGUES(mixq6k, WT_MIX_Q6K)
GEMM_WG_EPILOGUES(mixq5k, WT_MIX_Q5K)
