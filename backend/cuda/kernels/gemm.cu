// gemm: the prompt's projections as one matrix product on the tensor cores.
// C[m][n] = A[m][k] · W[n][k]ᵀ, A the f16 activations of m prompt tokens
// (row-major), W a quantized weight matrix in the upload layout (weights.go:
// the quants of all blocks, then one f16 scale per block). Each block
// computes one tile of C (gemm_tile below: 64×64 or 128×128): the weight
// tile is dequantized to f16 in shared memory (exactly: (q-8)·d and q·d
// need at most 19 bits), the activation tile arrives by cp.async, and the
// warps run mma.sync m16n8k16 with f32 accumulators. The k loop takes 64
// (two quant blocks) a stage, and the loads run two stages ahead of the
// products: the activations by cp.async into three shared buffers, the
// weights' raw bytes in registers (dequantized into one of two f16 buffers
// a stage before use). Kernels of the large tile end in _l.
//
// Epilogues (one kernel each, gemm_<type>_<epilogue>):
//   store  out f32 [m][n] = C                      (Q, K and V stacked)
//   add    out f32 [m][n] += C                     (O and down projections + residual)
//   glu    out f16 [m][n] = act(A·Gᵀ) ∘ (A·Uᵀ)     (gate and up, n hidden units; act SiLU or GELU-tanh, common.cuh)
// For glu the tile's BN weight rows interleave gate and up rows of BN/2 hidden
// units (row 2j = gate j, row 2j+1 = up j), so each thread's accumulator
// pair (c0, c1) is one unit's gate and up value: act(gate)·up in registers.
//
// Rows of A past m and weight rows past n are zero-filled and never stored;
// k must be a multiple of 32 (whole quant blocks), m and n are free. Rows of
// out are ldo elements apart (≥ n: Q, K and V of different types are
// multiplied apart into column ranges of one output).
//
// Split-K (gridDim.z > 1, the add epilogue only): block z multiplies its
// share of the k stages and adds its partial tile to out with float
// atomics. A batched decode step has a few rows (one M tile), so the
// projections with few output rows (O and down: one block per 64 of them)
// would otherwise leave most SMs idle while each block walks all of k.
// The sum's order then varies from run to run, within rounding.
//
// F16, BF16 and the mixed layouts (weights.cuh) load a block as the decode
// kernels do and round its values to f16 (BF16 and the K-quants' products
// of scales are not exact in f16: rounded to nearest).
#include "gemm.cuh"

// Shared-memory row stride in halves: 8 more than a row so that the eight
// 16-byte rows one ldmatrix reads fall in distinct banks.
#define GEMM_LD 72

// gemm_tile is a block tile: BM×BN of C, WM×WN warps each of a
// (BM/WM)×(BN/WN) warp tile. Each thread loads one of a stage's 2·BN quant
// blocks. The buffers live in dynamic shared memory: three activation
// stages, two weight stages.
template <int BM_, int BN_, int WM_, int WN_, int BLOCKS_, int LOOK_> struct gemm_tile {
	static const int BM = BM_, BN = BN_, WM = WM_, WN = WN_;
	static const int threads = 32 * WM * WN;
	static const int blocks = BLOCKS_; // per SM, for __launch_bounds__
	// look is how many stages ahead a thread loads its weight block into
	// registers (1 or 2; each stage's block costs up to 16 registers).
	static const int look = LOOK_;
	static const int WTM = BM / WM, WTN = BN / WN; // a warp tile's rows and columns
	static const int MI = WTM / 16, NJ = WTN / 8;  // its m16 and n8 tiles
	static const int smem = (3 * BM + 2 * BN) * GEMM_LD * 2;
	static_assert(threads == 2 * BN, "a thread loads one of a stage's quant blocks");
	static_assert(BM * 8 % threads == 0, "threads share the activation tile's 16-byte chunks evenly");
};
// The tiles the launcher picks from (gemmTiles in prefill_ops.go, same
// order): 64×64 on 4 warps of 32×32 for products of few tiles, 128×128 on
// 8 warps of 64×32 where they are many. The larger warp tile loads 6
// fragments for 16 products against 4 for 8, the larger block dequantizes
// each weight tile for twice the rows: at 64×64 the shared memory's
// traffic, not the tensor cores, bounds the gemm.
// The large tile asks for two blocks an SM (at most 128 registers a
// thread): left to itself nvcc takes 164, and one block of 8 warps an SM
// leaves the schedulers without eligible warps two cycles in three. Its
// weights come one stage ahead: two stages in registers spill at 128
// (H200, Llama-8B shapes at 512 rows: F16 gate/up 581 → 534 µs). Copying
// F16 and BF16 weight tiles by cp.async beside the activations, three
// stages deep, was slower (547 and 650 µs against 535 and 599).
typedef gemm_tile<64, 64, 2, 2, 1, 2> gemm_small;
typedef gemm_tile<128, 128, 2, 4, 2, 1> gemm_large;

template <int T, int EPI, class G>
__device__ __forceinline__ void gemm(const f16 *a, int m, int k, const u8 *wq, const f16 *wd, const u8 *wq2,
                                     const f16 *wd2, int n, void *out, int ldo, int act) {
	const int THREADS = G::threads, WN = G::WN, BM = G::BM, BN = G::BN;
	const int WTM = G::WTM, WTN = G::WTN, MI = G::MI, NJ = G::NJ;
	const int ACH = BM * 8 / THREADS; // 16-byte activation chunks a thread copies a stage
	extern __shared__ __attribute__((aligned(16))) unsigned char gemm_smem[];
	f16 *sa0 = (f16 *)gemm_smem;       // [3][BM * GEMM_LD]
	f16 *sb0 = sa0 + 3 * BM * GEMM_LD; // [2][BN * GEMM_LD]
	pdl_wait_and_release();
	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	int wm = warp / WN, wn = warp % WN;
	int m0 = blockIdx.x * BM;
	int nkb = k >> 5; // quant blocks per row
	int all = (nkb + 1) >> 1;
	// This block's stages [s0, s0 + stages) of the k loop (split-K).
	int s0 = (int)((long)blockIdx.z * all / gridDim.z);
	int stages = (int)((long)(blockIdx.z + 1) * all / gridDim.z) - s0;
	const bool split = gridDim.z > 1;

	// This thread's weight row and which of the stage's two quant blocks.
	int brow = tid >> 1, bsub = tid & 1;
	long wrow;
	const u8 *bq = wq;
	const f16 *bd = wd;
	if (EPI == EPI_GLU) {
		wrow = (long)blockIdx.y * (BN / 2) + (brow >> 1);
		if (brow & 1) {
			bq = wq2;
			bd = wd2;
		}
	} else {
		wrow = (long)blockIdx.y * BN + brow;
	}
	bool brow_ok = wrow < n;
	const wdst bdst0 = {sb0 + brow * GEMM_LD, 4 * bsub, 0}, bdst1 = {bdst0.row + BN * GEMM_LD, 4 * bsub, 0};

	// load_a issues the cp.async copies of stage s's activation tile as one
	// group (an empty group past the last stage keeps the count uniform).
	auto load_a = [&](int s) {
		if (s < stages) {
			f16 *dst = sa0 + (s % 3) * BM * GEMM_LD;
#pragma unroll
			for (int i = 0; i < ACH; i++) {
				int c = tid + i * THREADS;
				int r = c >> 3, col = (c & 7) * 8;
				int gk = (s0 + s) * GEMM_BK + col;
				bool ok = m0 + r < m && gk < k;
				const f16 *src = ok ? a + (long)(m0 + r) * k + gk : a;
				cp_async16(smem_addr(dst + r * GEMM_LD + col), src, ok);
			}
		}
		cp_async_commit();
	};
	auto load_b = [&](int s) {
		int kb = 2 * (s0 + s) + bsub;
		return load_wblock<T>(bq, bd, wrow * nkb + kb, s < stages && brow_ok && kb < nkb);
	};

	float acc[MI][NJ][4];
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

	load_a(0);
	load_a(1);
	wblock<T> wb = load_b(0);
	store_wblock<T>(bdst0, wb);
	if (G::look == 2) wb = load_b(1); // stage s+1's weights while stage s is multiplied
	for (int s = 0; s < stages; s++) {
		load_a(s + 2);
		wblock<T> wb2 = load_b(s + G::look);
		cp_async_wait<2>(); // this thread's copies of stage s are done
		__syncthreads();    // everyone's are, and stage s's weight buffer is written
		const f16 *ta = sa0 + (s % 3) * BM * GEMM_LD, *tb = sb0 + (s & 1) * BN * GEMM_LD;
#pragma unroll
		for (int ks = 0; ks < GEMM_BK; ks += 16) {
			u32 af[MI][4], bf[NJ][2];
#pragma unroll
			for (int i = 0; i < MI; i++)
				ldsm_x4(af[i], smem_addr(ta + (wm * WTM + i * 16 + (lane & 15)) * GEMM_LD + ks + (lane >> 4) * 8));
#pragma unroll
			for (int jp = 0; jp < NJ / 2; jp++) {
				u32 r[4];
				ldsm_x4(r, smem_addr(tb + (wn * WTN + jp * 16 + (lane & 7) + ((lane >> 4) << 3)) * GEMM_LD + ks +
				                     ((lane >> 3) & 1) * 8));
				bf[2 * jp][0] = r[0];
				bf[2 * jp][1] = r[1];
				bf[2 * jp + 1][0] = r[2];
				bf[2 * jp + 1][1] = r[3];
			}
#pragma unroll
			for (int i = 0; i < MI; i++)
#pragma unroll
				for (int j = 0; j < NJ; j++) mma_16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
		}
		// The other weight buffer was last read for stage s-1, before the
		// barrier above.
		if (s + 1 < stages) store_wblock<T>((s & 1) ? bdst0 : bdst1, G::look == 2 ? wb : wb2);
		wb = wb2;
		__syncthreads(); // stage s's buffers are free for the loads of s+3
	}

	int g = lane >> 2, tq = lane & 3;
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
#pragma unroll
			for (int hr = 0; hr < 2; hr++)
				gemm_put<EPI, BN>(out, ldo, m, n, m0 + wm * WTM + i * 16 + g + hr * 8, wn * WTN + j * 8 + 2 * tq,
				                  acc[i][j][2 * hr], acc[i][j][2 * hr + 1], act, split);
}

#define GEMM_KERNEL(name, T, epi, EPI, G, tile)                                                                \
	extern "C" __global__ void __launch_bounds__(G::threads, G::blocks)                                                      \
	    gemm_##name##_##epi##tile(const f16 *a, int m, int k, const u8 *wq, const f16 *wd, const u8 *wq2,          \
	                              const f16 *wd2, int n, void *out, int ldo, int act) {                             \
		gemm<T, EPI, G>(a, m, k, wq, wd, wq2, wd2, n, out, ldo, act);                                              \
	}
#define GEMM_TILES(name, T, epi, EPI) GEMM_KERNEL(name, T, epi, EPI, gemm_small, ) GEMM_KERNEL(name, T, epi, EPI, gemm_large, _l)
#define GEMM_EPILOGUES(name, T) GEMM_TILES(name, T, store, EPI_STORE) GEMM_TILES(name, T, add, EPI_ADD) GEMM_TILES(name, T, glu, EPI_GLU)
GEMM_EPILOGUES(q4_0, WT_Q4_0)
GEMM_EPILOGUES(q8_0, WT_Q8_0)
GEMM_EPILOGUES(f16, WT_F16)
GEMM_EPILOGUES(bf16, WT_BF16)
GEMM_EPILOGUES(mix, WT_MIX)
// The typed mixed families (kernelSet.typed).
GEMM_EPILOGUES(mixq4k, WT_MIX_Q4K)
GEMM_EPILOGUES(mixq6k, WT_MIX_Q6K)
GEMM_EPILOGUES(mixq5k, WT_MIX_Q5K)
