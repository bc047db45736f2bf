// prefill_attention: causal attention for m prompt tokens at positions
// pos0..pos0+m-1 against the KV cache (which already holds their K and V,
// written by prefill_rope, and every earlier position), flash-attention
// style on the tensor cores.
//
// Grouped-query aware: the G = n_head/n_kv query heads that share a KV head
// are packed into one block's rows, row r = token r/G, head kvh·G + r%G, so
// each K/V tile is read once per group. A block of 4 warps
// takes 64 such rows (16 a warp) for KV head blockIdx.y and walks the keys in
// tiles of 64 (32 for heads of 256): K and V (f16 in the cache, kv.cuh) are copied to shared
// memory, S = Q·Kᵀ by mma.sync, the causal mask, an online softmax in
// registers (exp2, running max and sum per row), and O += P·V by mma.sync
// with P straight from the score registers. Keys past the block's last
// position are zero-filled, never read, so stale cache rows cannot leak NaN.
// Blocks take row tiles last first: the longest run first.
//
// With a sliding window (window > 0) a row sees only its last window
// positions: the lower mask, and key tiles below every row's window are
// skipped. softcap > 0 squashes the scores (after scale) to
// softcap·tanh(s/softcap). Both are compiled only into the EXT kernels
// (prefill_attention_ext_hd*): in the score loop they cost the plain ones
// time even when off.
//
// q: f16 [m][n_head·HD]; out: f16 [m][n_head·HD]; caches [n_kv][ctx_max][HD].
//
// The PAGED kernels (prefill_attention_paged_*) run a batched step of many
// sequences: blockIdx.z is a segment, seg[4z..4z+3] = (first token t0,
// tokens m, position of t0, offset of the sequence's block table in
// tables), and key position k of the segment's sequence lives in cache row
// tables[off + k/bs]·bs + k%bs. The grid's x covers the longest segment;
// blocks past a shorter one's rows return at once. A segment of at most 16
// rows (a decode token's group of heads, or a few prompt tokens') fills one
// warp: there the four warps take the same rows and split the keys in
// 16-key tiles (split_keys), merging their softmax states at the end;
// walked a 64-key tile at a time by one warp, a decode token's attention
// took 12-31 µs a layer in a batched step (H200; 3 µs at one sequence).
#include "prefill.cuh"
#include "kv.cuh"

#define ATT_ROWS 64
#define ATT_THREADS 128

// attend_tile takes KEYS keys (sk, sv: their K and V rows in shared
// memory, LD halves apart, the first at position k0) into a warp's running
// attention for its 16 query rows: S = Q·Kᵀ by mma.sync, the mask (each
// row sees keys lo … lim), the online softmax in registers (exp2, running
// max mrow and per-thread partial sums lrow of rows g and g+8), and
// O += P·V with P straight from the score registers.
template <int HD, int KEYS, bool EXT>
__device__ __forceinline__ void attend_tile(const u32 qf[HD / 16][4], const f16 *sk, const f16 *sv, int LD, int k0,
                                            int lim_a, int lim_b, int lo_a, int lo_b, float scale, float cap,
                                            float mrow[2], float lrow[2], float o[HD / 8][4]) {
	const int lane = threadIdx.x & 31, tq = lane & 3;
	const float sl2 = scale * 1.4426950408889634f; // scores in log2 units
	float s[KEYS / 8][4];
#pragma unroll
	for (int j = 0; j < KEYS / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
	for (int ks = 0; ks < HD / 16; ks++)
#pragma unroll
		for (int jp = 0; jp < KEYS / 16; jp++) {
			u32 r[4];
			ldsm_x4(r, smem_addr(sk + (jp * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + ks * 16 + ((lane >> 3) & 1) * 8));
			mma_16816(s[2 * jp], qf[ks], r[0], r[1]);
			mma_16816(s[2 * jp + 1], qf[ks], r[2], r[3]);
		}

	float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
	for (int j = 0; j < KEYS / 8; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int key = k0 + j * 8 + 2 * tq + (e & 1);
			bool seen = key <= (e < 2 ? lim_a : lim_b) && (!EXT || key >= (e < 2 ? lo_a : lo_b));
			float v = !seen ? -INFINITY
			          : EXT && cap > 0.f ? softcap(s[j][e] * scale, cap) * 1.4426950408889634f
			                             : s[j][e] * sl2;
			s[j][e] = v;
			mx[e >> 1] = fmaxf(mx[e >> 1], v);
		}
	float alpha[2];
#pragma unroll
	for (int hr = 0; hr < 2; hr++) {
		mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
		mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
		// Without a window key 0 is in the first tile and visible to
		// every row, so the running max is finite from the first tile
		// on; with one a row may see no key of a tile it shares with
		// rows that do (its max stays -inf: nothing to rescale).
		float mn = fmaxf(mrow[hr], mx[hr]);
		alpha[hr] = EXT && mn == -INFINITY ? 1.f : exp2f(mrow[hr] - mn);
		mrow[hr] = mn;
	}
	float ls[2] = {0.f, 0.f};
#pragma unroll
	for (int j = 0; j < KEYS / 8; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float p = EXT && s[j][e] == -INFINITY ? 0.f : exp2f(s[j][e] - mrow[e >> 1]);
			s[j][e] = p;
			ls[e >> 1] += p;
		}
	lrow[0] = lrow[0] * alpha[0] + ls[0]; // per-thread partial sums: the quad is summed at the end
	lrow[1] = lrow[1] * alpha[1] + ls[1];
#pragma unroll
	for (int d = 0; d < HD / 8; d++) {
		o[d][0] *= alpha[0];
		o[d][1] *= alpha[0];
		o[d][2] *= alpha[1];
		o[d][3] *= alpha[1];
	}
#pragma unroll
	for (int kk = 0; kk < KEYS / 16; kk++) {
		// The score accumulators of key tiles 2kk and 2kk+1 are the A
		// fragment of P for these 16 keys.
		u32 pa[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
		             pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
		for (int dp = 0; dp < HD / 16; dp++) {
			u32 r[4];
			ldsm_x4_trans(r, smem_addr(sv + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8));
			mma_16816(o[2 * dp], pa, r[0], r[1]);
			mma_16816(o[2 * dp + 1], pa, r[2], r[3]);
		}
	}
}

// split_keys is a decode segment's walk over its keys (rows ≤ 16: every
// warp holds the same rows): each warp takes the 16-key tiles warp,
// warp+4, … into its own 16 rows of shared memory (wk, wv) and its own
// running softmax, and loads its next tile (its block of the table one
// tile further ahead) while this one is multiplied: a decode token's keys
// in a quarter of the dependent steps the block's one tile at a time
// took. A 16-key tile lies in one block of the table (bs a multiple of
// 16). Keys at or past key_end are zeros, never read. Heads past 64 load
// and store a tile in batches of four loads instead, none ahead: a whole
// tile in flight is 64 registers at 128, which took the kernel to 255 and
// spills (H200).
template <int HD, bool EXT>
__device__ __forceinline__ void split_keys(const u32 qf[HD / 16][4], f16 *wk, f16 *wv, int LD, const kv_t *kbase,
                                           const kv_t *vbase, const int *table, int bs, int key_lo, int key_end,
                                           int lim_a, int lim_b, int lo_a, int lo_b, float scale, float cap,
                                           float mrow[2], float lrow[2], float o[HD / 8][4]) {
	constexpr int L = HD / 8; // loads of four halves of K (and of V) a lane a tile
	constexpr bool AHEAD = HD <= 64;
	constexpr int B = AHEAD ? L : 4; // loads held at once
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	kv4_t kh[B], vh[B];
	const int nt = (key_end + 15) / 16;
	int t = key_lo / 16 + warp;
	// load takes loads b0 … b0+B-1 of tile tt (its block of the table:
	// page) into kh and vh; store puts them in the warp's rows.
	auto load = [&](int tt, int page, int b0) {
		const int k0 = tt * 16;
		const long row0 = (long)page * bs + k0 % bs;
#pragma unroll
		for (int i = 0; i < B; i++) {
			const int idx = lane + 32 * (b0 + i), r = idx / (HD / 4), c = idx % (HD / 4);
			kh[i].x = kh[i].y = vh[i].x = vh[i].y = 0;
			if (k0 + r < key_end) {
				kh[i] = ((const kv4_t *)(kbase + (row0 + r) * HD))[c];
				vh[i] = ((const kv4_t *)(vbase + (row0 + r) * HD))[c];
			}
		}
	};
	auto store = [&](int b0) {
#pragma unroll
		for (int i = 0; i < B; i++) {
			const int idx = lane + 32 * (b0 + i), r = idx / (HD / 4), c = idx % (HD / 4);
			*(kv4_t *)(wk + r * LD + 4 * c) = kh[i];
			*(kv4_t *)(wv + r * LD + 4 * c) = vh[i];
		}
	};
	// The table's blocks of this tile and the next are read a tile ahead
	// of their loads.
	int page = t < nt ? table[t * 16 / bs] : 0, next = t + 4 < nt ? table[(t + 4) * 16 / bs] : 0;
	if (AHEAD && t < nt) load(t, page, 0);
	for (; t < nt; t += 4) {
		const int after = t + 8 < nt ? table[(t + 8) * 16 / bs] : 0;
		__syncwarp(); // the last tile's ldmatrix reads are done
		if (AHEAD) {
			store(0);
		} else {
#pragma unroll
			for (int b0 = 0; b0 < L; b0 += B) {
				load(t, page, b0);
				store(b0);
			}
		}
		__syncwarp();
		if (AHEAD && t + 4 < nt) load(t + 4, next, 0);
		page = next, next = after;
		attend_tile<HD, 16, EXT>(qf, wk, wv, LD, t * 16, lim_a, lim_b, lo_a, lo_b, scale, cap, mrow, lrow, o);
	}
}

template <int HD, bool EXT, bool PAGED>
__device__ __forceinline__ void prefill_attention(const f16 *q, int m, int pos0, const kv_t *k_cache,
                                                  const kv_t *v_cache, int ctx_max, int n_head, int n_kv,
                                                  float scale, int window, float cap, f16 *out, const int *seg,
                                                  const int *tables, int bs) {
	// Keys a tile: 64, or 32 for heads of 256, whose K and V tiles of 64
	// would pass the 48 KiB of static shared memory.
	constexpr int KEYS = HD > 128 ? 32 : 64;
	const int LD = HD + 8; // ldmatrix rows in distinct banks
	// Loads of four halves of K (and of V) each thread issues a tile, and
	// how many at once.
	const int ATT_LOADS = KEYS * HD / 4 / ATT_THREADS;
	const int ATT_BATCH = ATT_LOADS < 4 ? ATT_LOADS : 4;
	__shared__ __attribute__((aligned(16))) f16 smem[2 * KEYS * LD];
	f16 *sk = smem, *sv = smem + KEYS * LD;
	pdl_wait_and_release();
	const int *table = nullptr;
	if (PAGED) {
		const int *sg = seg + 4 * blockIdx.z;
		q += (long)sg[0] * n_head * HD;
		out += (long)sg[0] * n_head * HD;
		m = sg[1];
		pos0 = sg[2];
		table = tables + sg[3];
	}
	int group = n_head / n_kv, kvh = blockIdx.y;
	int rows = m * group;
	int r0 = (gridDim.x - 1 - blockIdx.x) * ATT_ROWS;
	if (PAGED) {
		r0 = blockIdx.x * ATT_ROWS;
		if (r0 >= rows) return; // the whole block: no barrier is skipped
	}
	int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
	int qdim = n_head * HD;
	// A segment of at most 16 rows (a decode token's heads of the group)
	// is one warp's rows: the four warps take them all and split the keys
	// instead (split_keys below).
	const bool split = PAGED && HD <= 128 && rows <= 16 && bs % 16 == 0;
	const int wrow = split ? 0 : warp * 16;

	// This thread's two rows; rows past the end act as the last real row
	// (finite work, never stored).
	int ra = r0 + wrow + g, rb = ra + 8;
	int ca = min(ra, rows - 1), cb = min(rb, rows - 1);
	int ta = ca / group, tb = cb / group;
	int ha = kvh * group + ca % group, hb = kvh * group + cb % group;
	int lim_a = pos0 + ta, lim_b = pos0 + tb; // the last key each row sees
	int warp_lim = pos0 + (min(r0 + wrow + 15, rows - 1)) / group;
	int key_end = pos0 + (min(r0 + ATT_ROWS, rows) - 1) / group + 1;
	// The first key each row sees, and the first the block's rows see.
	if (!EXT) window = 0;
	int lo_a = window > 0 ? lim_a - window + 1 : 0, lo_b = window > 0 ? lim_b - window + 1 : 0;
	int key_lo = window > 0 ? max(0, pos0 + min(r0, rows - 1) / group - window + 1) : 0;

	u32 qf[HD / 16][4];
	{
		const f16 *qa = q + (long)ta * qdim + ha * HD + 2 * tq;
		const f16 *qb = q + (long)tb * qdim + hb * HD + 2 * tq;
#pragma unroll
		for (int ks = 0; ks < HD / 16; ks++) {
			qf[ks][0] = *(const u32 *)(qa + ks * 16);
			qf[ks][1] = *(const u32 *)(qb + ks * 16);
			qf[ks][2] = *(const u32 *)(qa + ks * 16 + 8);
			qf[ks][3] = *(const u32 *)(qb + ks * 16 + 8);
		}
	}
	float o[HD / 8][4];
#pragma unroll
	for (int d = 0; d < HD / 8; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
	float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
	const kv_t *kbase = k_cache + (long)kvh * ctx_max * HD;
	const kv_t *vbase = v_cache + (long)kvh * ctx_max * HD;
	int ntiles = (key_end + KEYS - 1) / KEYS;
	if (split) {
		split_keys<HD, EXT>(qf, sk + warp * 16 * LD, sv + warp * 16 * LD, LD, kbase, vbase, table, bs, key_lo,
		                    key_end, lim_a, lim_b, lo_a, lo_b, scale, cap, mrow, lrow, o);
		// Warps 1-3 hand their state to warp 0 through shared memory.
		constexpr int W = HD / 2 + 4; // floats a lane hands over: o, mrow, lrow
		float *st = (float *)smem;    // 3·32·W floats: fits the K and V tiles
		__syncthreads();              // every warp's tiles are read
		if (warp > 0) {
			float *p = st + ((warp - 1) * 32 + lane) * W;
#pragma unroll
			for (int d = 0; d < HD / 8; d++)
#pragma unroll
				for (int e = 0; e < 4; e++) p[4 * d + e] = o[d][e];
			p[HD / 2] = mrow[0], p[HD / 2 + 1] = mrow[1], p[HD / 2 + 2] = lrow[0], p[HD / 2 + 3] = lrow[1];
		}
		__syncthreads();
		if (warp > 0) return;
		for (int w = 0; w < 3; w++) {
			const float *p = st + (w * 32 + lane) * W;
#pragma unroll
			for (int hr = 0; hr < 2; hr++) {
				// A warp that saw no key of the row (-inf) adds nothing;
				// this warp's own -inf max takes weight 0.
				float mw = p[HD / 2 + hr];
				float mn = fmaxf(mrow[hr], mw);
				float a = mw == -INFINITY ? 1.f : exp2f(mrow[hr] - mn);
				float b = mw == -INFINITY ? 0.f : exp2f(mw - mn);
				lrow[hr] = lrow[hr] * a + p[HD / 2 + 2 + hr] * b;
#pragma unroll
				for (int d = 0; d < HD / 8; d++) {
					o[d][2 * hr] = o[d][2 * hr] * a + p[4 * d + 2 * hr] * b;
					o[d][2 * hr + 1] = o[d][2 * hr + 1] * a + p[4 * d + 2 * hr + 1] * b;
				}
				mrow[hr] = mn;
			}
		}
		ntiles = 0; // on to the output
	}
	for (int kt = key_lo / KEYS; kt < ntiles; kt++) {
		int k0 = kt * KEYS;
		__syncthreads(); // the previous tile's readers are done
		// The tile's rows, four halves a load, in batches whose loads are
		// all issued before the first is stored: a few memory round trips
		// a tile, not one per load.
#pragma unroll
		for (int b0 = 0; b0 < ATT_LOADS; b0 += ATT_BATCH) {
			kv4_t kh[ATT_BATCH], vh[ATT_BATCH];
#pragma unroll
			for (int i = 0; i < ATT_BATCH; i++) {
				int idx = tid + (b0 + i) * ATT_THREADS, r = idx / (HD / 4), c = idx % (HD / 4);
				kh[i].x = kh[i].y = vh[i].x = vh[i].y = 0;
				if (k0 + r < key_end) {
					int key = k0 + r;
					long row = PAGED ? (long)table[key / bs] * bs + key % bs : key;
					kh[i] = ((const kv4_t *)(kbase + row * HD))[c];
					vh[i] = ((const kv4_t *)(vbase + row * HD))[c];
				}
			}
#pragma unroll
			for (int i = 0; i < ATT_BATCH; i++) {
				int idx = tid + (b0 + i) * ATT_THREADS, r = idx / (HD / 4), c = idx % (HD / 4);
				*(kv4_t *)(sk + r * LD + 4 * c) = kh[i];
				*(kv4_t *)(sv + r * LD + 4 * c) = vh[i];
			}
		}
		__syncthreads();
		if (k0 > warp_lim) continue; // every key of the tile is masked for this warp

		attend_tile<HD, KEYS, EXT>(qf, sk, sv, LD, k0, lim_a, lim_b, lo_a, lo_b, scale, cap, mrow, lrow, o);
	}

	float la = lrow[0], lb = lrow[1];
	la += __shfl_xor_sync(0xffffffffu, la, 1);
	la += __shfl_xor_sync(0xffffffffu, la, 2);
	lb += __shfl_xor_sync(0xffffffffu, lb, 1);
	lb += __shfl_xor_sync(0xffffffffu, lb, 2);
	float ia = 1.f / la, ib = 1.f / lb;
	f16 *oa = out + (long)ta * qdim + ha * HD + 2 * tq;
	f16 *ob = out + (long)tb * qdim + hb * HD + 2 * tq;
#pragma unroll
	for (int d = 0; d < HD / 8; d++) {
		if (ra < rows) *(u32 *)(oa + d * 8) = pack_half2(o[d][0] * ia, o[d][1] * ia);
		if (rb < rows) *(u32 *)(ob + d * 8) = pack_half2(o[d][2] * ib, o[d][3] * ib);
	}
}

#define PREFILL_ATTENTION_V(name, HD, EXT)                                                                         \
	extern "C" __global__ void __launch_bounds__(ATT_THREADS)                                                      \
	    name##HD(const f16 *q, int m, int pos0, const kv_t *k_cache, const kv_t *v_cache, int ctx_max, int n_head, \
	             int n_kv, float scale, int window, float cap, f16 *out) {                                          \
		prefill_attention<HD, EXT, false>(q, m, pos0, k_cache, v_cache, ctx_max, n_head, n_kv, scale, window, cap, \
		                                  out, nullptr, nullptr, 0);                                                \
	}
#define PREFILL_ATTENTION_PAGED_V(name, HD, EXT)                                                                   \
	extern "C" __global__ void __launch_bounds__(ATT_THREADS)                                                      \
	    name##HD(const f16 *q, const int *seg, const int *tables, int bs, const kv_t *k_cache,                    \
	             const kv_t *v_cache, int ctx_max, int n_head, int n_kv, float scale, int window, float cap,       \
	             f16 *out) {                                                                                        \
		prefill_attention<HD, EXT, true>(q, 0, 0, k_cache, v_cache, ctx_max, n_head, n_kv, scale, window, cap,     \
		                                 out, seg, tables, bs);                                                     \
	}
// prefill_attention_hd<HD>, and prefill_attention_ext_hd<HD> with sliding
// windows and soft-caps; the same over a batch of sequences' paged caches.
#define PREFILL_ATTENTION(HD)                                                                                      \
	PREFILL_ATTENTION_V(prefill_attention_hd, HD, false)                                                           \
	PREFILL_ATTENTION_V(prefill_attention_ext_hd, HD, true)                                                        \
	PREFILL_ATTENTION_PAGED_V(prefill_attention_paged_hd, HD, false)                                               \
	PREFILL_ATTENTION_PAGED_V(prefill_attention_paged_ext_hd, HD, true)
PREFILL_ATTENTION(16)
PREFILL_ATTENTION(32)
PREFILL_ATTENTION(64)
PREFILL_ATTENTION(96)
PREFILL_ATTENTION(128)
PREFILL_ATTENTION(256)
