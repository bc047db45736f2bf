// attention: one query token against the KV cache, flash-decoding style,
// then the output projection of the heads into the residual stream.
//
// Block (g, y) takes the G query heads g*G … g*G+G-1, which share one KV
// head (grouped-query attention). Contexts up to `single` positions are one
// split: each of the first o_blocks blocks of the group (y < o_blocks)
// takes all of them, and then its o_blocks-th of the output projection's
// rows, so that the projection is spread over o_blocks SMs while no block
// waits for another. Longer contexts take ATT_SPLITS splits of c =
// max(min_chunk, ⌈n/ATT_SPLITS⌉) positions (split y); each writes its
// partial (max, sum, weighted V); then, when the engine says the grid fits
// the GPU at once (spin), the splits and enough other blocks of the group
// to make o_blocks wait for the splits at a counter, merge the partials and
// project their share of the rows; otherwise the last split to finish (a
// ticket counter, left at zero again) merges them and projects all the
// rows. Blocks past the work exit at once.
//
// Each head has W warps of the block; in a warp, L lanes share a position
// (L a power of two, each lane NQ float4s of the head dimension:
// D = 4·L·NQ), so a warp takes 32/L positions at a time and a K or V row is
// one coalesced load, which the head group's other warps then find in L1.
// A lane keeps an online softmax (running max, sum and exp-weighted sum of
// V rows) over its positions, so scores never go to shared memory; the
// lanes of a warp and then the warps of a head combine theirs. The code per
// thread is one head's: these kernels run once per layer on cold
// instruction caches, where code size costs as much as the arithmetic.
//
// The output projection W_o (rows: the model width; columns: the heads'
// outputs) multiplies the group's G·D columns by the heads' outputs, which
// wait in shared memory: LB lanes take a row (one 32-element weight block
// each, LB the power of two at or above the blocks the columns touch), and
// the row's sum is added to the residual stream with common.cuh's
// fixed-point atomic add, so the groups' parts sum in any order to the same
// bits.
//
// With o_out set (wide models, where a few blocks projecting all of W_o's
// rows bound the step), the kernel stops before the projection: one block
// of each head group writes the heads' outputs to o_out (n_head·head_dim
// floats) and the engine adds W_o·o_out to the stream with matvec_add.cu's
// row-parallel kernel. The launch then has one block a group (one cluster)
// and no spin.
//
// Per layer, the attention may see only the last `window` positions (a
// sliding window; 0: all) and scale its output by rs (the model's residual
// multiplier) before adding it. Soft-capped scores (Gemma 2) take kernels
// of their own (attention_cap_*, attention_cl_cap_*: the CAP
// instantiations): the cap's code in the score loop cost the plain
// kernels 2.3% of a SmolLM-135M token (H100) even when off.
//
// The grid is fixed, so one captured graph serves every position: the
// length comes from pos_ptr in device memory, which the embedding kernel
// wrote two launches earlier and is safe to read before the PDL wait, as
// are the cache rows before pos (earlier steps wrote them) and the weights.
// Those rows are asked of L2 before the wait, and each thread's first
// projection weights are loaded; only q and the row at pos come from the
// previous kernel.
#include "decode.cuh"
#include "kv.cuh"

#define ATT_SPLITS 32 // splits of the context per head group (the grid's y)
// ATT_UNROLL is the positions per lane whose rows are loaded at once, kept
// raw (f16) until used: 8 where a lane holds at most two float4s of the
// head dimension (64 registers of loads, as 4 widened took), else 4.
#define ATT_UNROLL(NQ) ((NQ) <= 2 ? 8 : 4)

__device__ __forceinline__ float4 ldcg4(const float *p) { return __ldcg((const float4 *)p); }

__device__ __forceinline__ void fma4(float4 &a, float p, float4 v) {
	a.x += p * v.x;
	a.y += p * v.y;
	a.z += p * v.z;
	a.w += p * v.w;
}

__device__ __forceinline__ float4 scale4(float4 a, float s) { return make_float4(a.x * s, a.y * s, a.z * s, a.w * s); }

__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

__device__ __forceinline__ float4 shfl4(float4 v, int o) {
	return make_float4(__shfl_xor_sync(0xffffffffu, v.x, o), __shfl_xor_sync(0xffffffffu, v.y, o),
	                   __shfl_xor_sync(0xffffffffu, v.z, o), __shfl_xor_sync(0xffffffffu, v.w, o));
}

// softmax_state is an online softmax over some positions: the max score m,
// the sum l of exp(score-m) and the exp-weighted sum of their V rows.
template <int NQ> struct softmax_state {
	float m, l;
	float4 acc[NQ];

	__device__ __forceinline__ void init() {
		m = -INFINITY;
		l = 0.f;
#pragma unroll
		for (int j = 0; j < NQ; j++) acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
	}

	// merge folds in another state; either may be empty (m = -inf).
	__device__ __forceinline__ void merge(float m2, float l2, const float4 acc2[NQ]) {
		float M = fmaxf(m, m2);
		float a = m == -INFINITY ? 0.f : expf(m - M), b = m2 == -INFINITY ? 0.f : expf(m2 - M);
		m = M;
		l = l * a + l2 * b;
#pragma unroll
		for (int j = 0; j < NQ; j++) {
			acc[j] = scale4(acc[j], a);
			fma4(acc[j], b, acc2[j]);
		}
	}
};

// The output projection's shape for a head group: the columns [c0, c0+nc)
// of W_o touch its 32-element blocks bf … bf+nbl-1 (nbo a row); LB lanes
// take a row, RPW = 32/LB rows a warp.
struct oshape {
	int c0, nc, nbo, bf, nbl, LB, RPW;
	__device__ __forceinline__ oshape(int c0_, int nc_, int qdim) : c0(c0_), nc(nc_) {
		nbo = (qdim + 31) >> 5;
		bf = c0 >> 5;
		nbl = ((c0 + nc - 1) >> 5) - bf + 1;
		LB = 1;
		while (LB < nbl && LB < 32) LB <<= 1;
		RPW = 32 / LB;
	}
};

// oxload fills x with the heads' outputs (os, nc floats from column c0,
// element e at XS_AT(e): lane l reads W_o's block l, and unpadded the
// lanes of a quarter warp would all hit the same four banks) under W_o's
// block b, zero where the block reaches past them.
__device__ __forceinline__ void oxload(xblk &x, const float *os, const oshape &o, int b) {
	int e0 = 32 * b - o.c0;
	if (e0 >= 0 && e0 + 32 <= o.nc && (e0 & 31) == 0) {
		const float4 *p = (const float4 *)(os + XS_AT(e0));
#pragma unroll
		for (int j = 0; j < 8; j++) x.v[j] = p[j];
		x.sum();
		return;
	}
	float *f = (float *)x.v;
#pragma unroll
	for (int j = 0; j < 32; j++) f[j] = e0 + j >= 0 && e0 + j < o.nc ? os[XS_AT(e0 + j)] : 0.f;
	x.sum();
}

// os4 is the float4 of the heads' outputs at element e (a multiple of 4),
// in oxload's padded layout.
__device__ __forceinline__ float4 &os4(float *os, int e) { return *(float4 *)(os + XS_AT(e)); }

// heads_out copies the group's n heads' outputs from os (padded) to dst,
// with the whole block, after a barrier that made os whole.
__device__ __forceinline__ void heads_out(const float *os, int n, float *dst) {
	for (int e = threadIdx.x; e < n; e += blockDim.x) dst[e] = os[XS_AT(e)];
}

// oproj adds rows [r0, r1) of W_o times the heads' outputs os to the
// residual stream res, every warp of the block taking RPW rows a pass. The
// first pass's weights are in first (loaded before the PDL wait). One copy
// of the row code: these kernels run on cold instruction caches.
template <int T>
__device__ __forceinline__ void oproj(const float *os, const oshape &o, const u8 *wq, const f16 *wd, int r0, int r1,
                                      const wblk<T> &first, float rs, long long *res, unsigned *poison) {
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, sub = lane % o.LB;
	const int rpp = (blockDim.x >> 5) * o.RPW, mine = w * o.RPW + lane / o.LB;
	const bool col = sub < o.nbl;
	xblk x;
	if (col) oxload(x, os, o, o.bf + sub);
	wblk<T> wb = first;
#pragma unroll 1
	for (int base = r0; base < r1; base += rpp) { // block-uniform
		const int r = base + mine;
		if (base != r0 && col && r < r1) wload<T>(wb, wq, wd, (long)r * o.nbo + o.bf + sub);
		float v = col && r < r1 ? wdot<T>(wb, x) : 0.f;
#pragma unroll 1
		for (int b = sub + o.LB; b < o.nbl; b += o.LB) { // more blocks than 32 lanes
			if (r < r1) {
				wblk<T> w2;
				xblk x2;
				wload<T>(w2, wq, wd, (long)r * o.nbo + o.bf + b);
				oxload(x2, os, o, o.bf + b);
				v += wdot<T>(w2, x2);
			}
		}
		for (int s = o.LB / 2; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
		if (sub == 0 && r < r1) res_add(res + r, v * rs, 0, poison);
	}
}

template <int T, int NQ, bool CAP>
__device__ __forceinline__ void attention(const float *q, const kv_t *k_cache, const kv_t *v_cache, int ctx_max,
                                          int head_dim, int n_head, int n_kv_head, int G, int W, int L,
                                          const int *pos_ptr, float scale, int window, float cap, int single,
                                          int min_chunk, int splits, int o_blocks, int spin, float *part_acc, float *part_ml,
                                          unsigned *tickets, const u8 *wq, const f16 *wd, int dim, float rs,
                                          long long *res, unsigned *poison, float *o_out) {
	extern __shared__ float4 sm4[];
	__shared__ bool last;
	float *sm = (float *)sm4;
	const int D = head_dim, D4 = D / 4, tid = threadIdx.x, lane = tid & 31, w = tid >> 5, nthreads = blockDim.x;
	const int P = 32 / L, sub = lane % L, slot = lane / L;
	const int h = w / W, wi = w % W; // this warp's head in the group, and its place among the head's warps
	const int hb = blockIdx.x, y = blockIdx.y, h0 = hb * G;
	const int kvh = h0 / (n_head / n_kv_head);
	// The positions lo … pos, n of them.
	const int lo = window > 0 ? max(0, *pos_ptr + 1 - window) : 0, n = *pos_ptr + 1 - lo;
	// Contexts up to `single` positions take one split, which each of the
	// first o_blocks blocks computes whole; longer ones `splits` (at most
	// ATT_SPLITS) of at least min_chunk.
	const bool one = n <= single;
	const int c = one ? n : max(min_chunk, (n + splits - 1) / splits);
	const int nvalid = one ? 1 : (n + c - 1) / c;
	// The blocks that take part: o_blocks with one split; the splits, and
	// when spinning at least o_blocks blocks to share the merge and the
	// projection.
	const int parts = one ? o_blocks : spin ? max(o_blocks, nvalid) : nvalid;
	if (y >= parts) return; // past the work
	const bool computes = one || y < nvalid; // runs the softmax over positions
	// direct: the block's softmax covers the whole context, so it writes
	// the heads' outputs itself.
	const bool direct = one || parts == 1;
	const int s = one ? 0 : y;
	const int t0 = s * c, cnt = computes ? min(n, t0 + c) - t0 : 0;
	const kv_t *kc = k_cache + ((long)kvh * ctx_max + lo + t0) * D;
	const kv_t *vc = v_cache + ((long)kvh * ctx_max + lo + t0) * D;
	// The heads' outputs wait in shared memory past the region the
	// softmax's combining steps use (host: attnShared).
	float *os = sm + max(G * W * (D + 4), G * ATT_SPLITS + 4 * max(nthreads, G * D4));
	// The projection rows this block adds: its share of the sharing blocks
	// (one split, or every split when they spin), all of them when it
	// merges alone.
	const oshape op(h0 * D, G * D, n_head * D);
	const int sharing = one || spin ? parts : 1;
	const int rows = (dim + sharing - 1) / sharing;
	const int r0 = sharing > 1 ? y * rows : 0, r1 = min(dim, r0 + rows);
	// Ask L2 for this split's K and V rows, 128-byte lines, before the wait,
	// and load the first projection pass's weights.
	for (int i = tid; i * KV_LINE < cnt * D; i += nthreads) {
		asm volatile("prefetch.global.L2 [%0];" ::"l"(kc + i * KV_LINE));
		asm volatile("prefetch.global.L2 [%0];" ::"l"(vc + i * KV_LINE));
	}
	wblk<T> first;
	{
		int r = r0 + w * op.RPW + lane / op.LB, b = lane % op.LB;
		if (!o_out && b < op.nbl && r < r1) wload<T>(first, wq, wd, (long)r * op.nbo + op.bf + b);
	}
	pdl_wait_and_release();

	float4 qv[NQ];
#pragma unroll
	for (int j = 0; j < NQ; j++) qv[j] = scale4(((const float4 *)(q + (h0 + h) * D))[sub + L * j], scale);
	softmax_state<NQ> st;
	st.init();
	// U positions per lane per round, their K and V rows loaded together:
	// one memory round trip for them all.
	constexpr int U = ATT_UNROLL(NQ);
	const int step = W * P;
	for (int base = wi * P + slot; base - slot < cnt; base += U * step) { // warp-uniform
		kv4_t k[U][NQ], v[U][NQ];
#pragma unroll
		for (int u = 0; u < U; u++) {
			int t = base + u * step;
#pragma unroll
			for (int j = 0; j < NQ; j++) {
				bool ok = t < cnt;
				k[u][j] = ok ? kv_raw4(kc + (long)t * D, sub + L * j) : kv4_t{0u, 0u};
				v[u][j] = ok ? kv_raw4(vc + (long)t * D, sub + L * j) : kv4_t{0u, 0u};
			}
		}
		// The round's scores (their lane sums interleaved: U shuffles in
		// flight a step), then their softmax, merged into the state once:
		// one rescale of the state a round, where a position at a time
		// took U dependent ones and two exponentials a position.
		float sc[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			float d = 0.f;
#pragma unroll
			for (int j = 0; j < NQ; j++) d += dot4(kv_widen4(k[u][j]), qv[j]);
			sc[u] = d;
		}
		for (int o = L / 2; o > 0; o >>= 1) {
#pragma unroll
			for (int u = 0; u < U; u++) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], o);
		}
		float mr = -INFINITY;
#pragma unroll
		for (int u = 0; u < U; u++) {
			sc[u] = base + u * step < cnt ? (CAP ? softcap(sc[u], cap) : sc[u]) : -INFINITY;
			mr = fmaxf(mr, sc[u]);
		}
		float lr = 0.f;
		float4 ar[NQ];
#pragma unroll
		for (int j = 0; j < NQ; j++) ar[j] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
		for (int u = 0; u < U; u++) {
			float e = sc[u] == -INFINITY ? 0.f : expf(sc[u] - mr);
			lr += e;
#pragma unroll
			for (int j = 0; j < NQ; j++) fma4(ar[j], e, kv_widen4(v[u][j]));
		}
		st.merge(mr, lr, ar);
	}
	// The lanes of a warp that share sub hold other positions: combine.
	for (int o = L; o < 32; o <<= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, st.m, o), l2 = __shfl_xor_sync(0xffffffffu, st.l, o);
		float4 a2[NQ];
#pragma unroll
		for (int j = 0; j < NQ; j++) a2[j] = shfl4(st.acc[j], o);
		st.merge(m2, l2, a2);
	}
	// Then the head's warps, through shared memory: [G][W] of (m, l, acc[D]).
	float *mine = sm + (h * W + wi) * (D + 4);
	if (slot == 0) {
#pragma unroll
		for (int j = 0; j < NQ; j++) ((float4 *)(mine + 4))[sub + L * j] = st.acc[j];
		if (sub == 0) mine[0] = st.m, mine[1] = st.l;
	}
	__syncthreads();
	if (wi == 0) {
		for (int x = 1; x < W; x++) {
			const float *ow = sm + (h * W + x) * (D + 4);
			float4 a2[NQ];
#pragma unroll
			for (int j = 0; j < NQ; j++) a2[j] = ((const float4 *)(ow + 4))[sub + L * j];
			st.merge(ow[0], ow[1], a2);
		}
		if (slot == 0) {
			if (direct) {
#pragma unroll
				for (int j = 0; j < NQ; j++) os4(os, h * D + 4 * (sub + L * j)) = scale4(st.acc[j], 1.f / st.l);
			} else if (computes) {
				long at = (long)(hb * ATT_SPLITS + s) * G + h;
#pragma unroll
				for (int j = 0; j < NQ; j++) ((float4 *)(part_acc + at * D))[sub + L * j] = st.acc[j];
				if (sub == 0) part_ml[2 * at] = st.m, part_ml[2 * at + 1] = st.l;
			}
		}
	}
	if (direct) {
		__syncthreads();
		if (o_out) {
			if (y == 0) heads_out(os, G * D, o_out + h0 * D);
			return;
		}
		oproj<T>(os, op, wq, wd, r0, r1, first, rs, res, poison);
		return;
	}

	// Spinning, every block taking part waits for the head group's splits
	// (the engine spins only when the grid fits the GPU at once, so they are
	// all resident), merges them all and projects its share of the rows;
	// the splits' arrivals count in tickets[hb], the blocks' departures in
	// tickets[gridDim.x+hb], and the last to leave zeroes both. Otherwise
	// the last split to finish merges alone and projects every row.
	__syncthreads(); // every thread's partial writes are issued
	if (tid == 0) {
		__threadfence();
		if (computes) last = atomicAdd(&tickets[hb], 1u) == (unsigned)nvalid - 1;
		if (spin) {
			// Bounded: a wrong residency assumption fails the step instead
			// of hanging the GPU.
			for (int i = 0; *(volatile unsigned *)&tickets[hb] < (unsigned)nvalid && i < (1 << 22); i++) {
			}
			if (atomicAdd(&tickets[gridDim.x + hb], 1u) == (unsigned)parts - 1) {
				tickets[hb] = 0;
				tickets[gridDim.x + hb] = 0;
			}
		}
	}
	__syncthreads();
	if (!spin && !last) return;
	__threadfence();
	// Weights: warp x (one lane per split) takes head x's maxima and sums.
	float *wts = sm; // [G][ATT_SPLITS]: exp(m_s - M) / L
	for (int x = w; x < G; x += nthreads / 32) {
		int i = 2 * ((hb * ATT_SPLITS + lane) * G + x);
		float m = -INFINITY, ls = 0.f;
		if (lane < nvalid) {
			m = __ldcg(part_ml + i);
			ls = __ldcg(part_ml + i + 1);
		}
		float M = warp_max(m);
		float e = lane < nvalid ? expf(m - M) : 0.f;
		float Ls = warp_sum(ls * e);
		wts[x * ATT_SPLITS + lane] = e / Ls;
	}
	__syncthreads();
	// Sums: a thread per float4 column of the group's output and every
	// groups-th split, eight loads in flight; then across groups.
	float4 *red4 = (float4 *)(sm + G * ATT_SPLITS);
	const int cols = G * D4, groups = max(1, nthreads / cols);
	for (int idx = tid; idx < cols * groups; idx += nthreads) {
		int col = idx % cols, g = idx / cols, x = col / D4;
		const float *base = part_acc + (long)hb * ATT_SPLITS * G * D + 4 * col;
		float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
		int sp = g;
		for (; sp + 7 * groups < nvalid; sp += 8 * groups) {
			float4 v[8];
#pragma unroll
			for (int u = 0; u < 8; u++) v[u] = ldcg4(base + (long)(sp + u * groups) * G * D);
#pragma unroll
			for (int u = 0; u < 8; u++) fma4(a, wts[x * ATT_SPLITS + sp + u * groups], v[u]);
		}
		for (; sp < nvalid; sp += groups) fma4(a, wts[x * ATT_SPLITS + sp], ldcg4(base + (long)sp * G * D));
		red4[g * cols + col] = a;
	}
	__syncthreads();
	for (int col = tid; col < cols; col += nthreads) {
		float4 a = red4[col];
		for (int g = 1; g < groups; g++) {
			float4 b = red4[g * cols + col];
			a.x += b.x;
			a.y += b.y;
			a.z += b.z;
			a.w += b.w;
		}
		os4(os, 4 * col) = a;
	}
	if (!spin && tid == 0) tickets[hb] = 0;
	__syncthreads();
	if (o_out) {
		heads_out(os, G * D, o_out + h0 * D);
		return;
	}
	oproj<T>(os, op, wq, wd, r0, r1, first, rs, res, poison);
}

// attention_cl: the contexts the engine runs whole (up to `single`
// positions), on thread-block clusters. The o_blocks blocks of a head group
// (the grid's y) form clusters of C (the launch's cluster shape, at most 8)
// whose blocks split the positions into C chunks. A lane group keeps its
// chunk's K and V rows in registers, loaded before the PDL wait, so only q
// and the row at pos (the previous kernel's) are read after it: one round
// trip where the split kernel above walks the whole context in each block.
// A block merges its warps' softmax states in shared memory and stores the
// result in every block of its cluster (distributed shared memory); after
// one cluster barrier each block merges the C states and adds its
// o_blocks-th of W_o's rows to the residual stream, as above. Each of the
// o_blocks/C clusters of a group computes the whole softmax: in parallel,
// off the critical path.
#define ATT_CL_UNROLL 2 // positions a lane group loads at once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ int cluster_rank() {
	unsigned r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	return (int)r;
}

__device__ __forceinline__ int cluster_blocks() {
	unsigned r;
	asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
	return (int)r;
}

// The cluster barrier in two halves: arrive (release: this thread's
// earlier writes, to any block's shared memory, become visible) and wait
// (acquire) for every thread of the cluster to have arrived.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

// cluster_addr is p (this block's shared memory) in block rank's.
__device__ __forceinline__ unsigned cluster_addr(const float *p, int rank) {
	unsigned long long s;
	unsigned r;
	asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"(p));
	asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"((unsigned)s), "r"(rank));
	return r;
}

__device__ __forceinline__ void st_cluster4(const float *p, int rank, float4 v) {
	asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(cluster_addr(p, rank)), "f"(v.x), "f"(v.y),
	             "f"(v.z), "f"(v.w)
	             : "memory");
}

__device__ __forceinline__ void st_cluster2(const float *p, int rank, float a, float b) {
	asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(cluster_addr(p, rank)), "f"(a), "f"(b) : "memory");
}

// merge_states merges n ≤ MAXN softmax states (m, l, acc[D]) stride floats
// apart from src, at float4 d4 of acc: the sum l and the exp-weighted acc
// relative to the returned max.
template <int MAXN>
__device__ __forceinline__ float merge_states(const float *src, int n, int stride, int d4, float &l, float4 &a) {
	float m[MAXN];
	float M = -INFINITY;
#pragma unroll
	for (int j = 0; j < MAXN; j++) {
		m[j] = j < n ? src[j * stride] : -INFINITY;
		M = fmaxf(M, m[j]);
	}
	l = 0.f;
	a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
	for (int j = 0; j < MAXN; j++) {
		if (j < n) {
			float e = m[j] == -INFINITY ? 0.f : expf(m[j] - M); // an empty state (no positions) weighs nothing
			l += e * src[j * stride + 1];
			fma4(a, e, ((const float4 *)(src + j * stride + 4))[d4]);
		}
	}
	return M;
}
#endif

template <int T, int NQ, bool CAP>
__device__ __forceinline__ void attention_cl(const float *q, const kv_t *k_cache, const kv_t *v_cache, int ctx_max,
                                             int head_dim, int n_head, int n_kv_head, int G, int W, int L,
                                             const int *pos_ptr, float scale, int window, float cap, const u8 *wq,
                                             const f16 *wd, int dim, float rs, long long *res, unsigned *poison,
                                             float *o_out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	extern __shared__ float4 sm4[];
	float *sm = (float *)sm4;
	const int D = head_dim, D4 = D / 4, DS = D + 4, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
	const int nthreads = blockDim.x, P = 32 / L, sub = lane % L, slot = lane / L;
	const int h = w / W, wi = w % W; // this warp's head in the group, and its place among the head's warps
	const int h0 = blockIdx.x * G, kvh = h0 / (n_head / n_kv_head);
	const int C = cluster_blocks(), rank = cluster_rank();
	// No block may write to another's shared memory before that one has
	// started: arrive now, wait before the first such write.
	cluster_arrive_relaxed();
	// The positions lo … pos, n of them.
	const int lo = window > 0 ? max(0, *pos_ptr + 1 - window) : 0, n = *pos_ptr + 1 - lo;
	const int chunk = (n + C - 1) / C;
	const int t0 = min(n, rank * chunk), cnt = min(n, t0 + chunk) - t0;
	const int fresh = n - 1 - t0; // the row the previous kernel wrote, when it is in the chunk
	const kv_t *kc = k_cache + ((long)kvh * ctx_max + lo + t0) * D;
	const kv_t *vc = v_cache + ((long)kvh * ctx_max + lo + t0) * D;
	// This block's projection rows, and the first pass's weights.
	const oshape op(h0 * D, G * D, n_head * D);
	const int rows = (dim + gridDim.y - 1) / gridDim.y;
	const int r0 = blockIdx.y * rows, r1 = min(dim, r0 + rows);
	wblk<T> first;
	{
		int r = r0 + w * op.RPW + lane / op.LB, b = lane % op.LB;
		if (!o_out && b < op.nbl && r < r1) wload<T>(first, wq, wd, (long)r * op.nbo + op.bf + b);
	}
	// The lane group's positions tb, tb+step, …: the first ATT_CL_UNROLL
	// before the wait, all but the fresh row.
	const int step = W * P, tb = wi * P + slot;
	float4 k[ATT_CL_UNROLL][NQ], v[ATT_CL_UNROLL][NQ];
#pragma unroll
	for (int u = 0; u < ATT_CL_UNROLL; u++) {
		int t = tb + u * step;
		bool ok = t < cnt && t != fresh;
#pragma unroll
		for (int j = 0; j < NQ; j++) {
			k[u][j] = ok ? kv_get4(kc + (long)t * D, sub + L * j) : make_float4(0.f, 0.f, 0.f, 0.f);
			v[u][j] = ok ? kv_get4(vc + (long)t * D, sub + L * j) : make_float4(0.f, 0.f, 0.f, 0.f);
		}
	}
	pdl_wait_and_release();

	float4 qv[NQ];
#pragma unroll
	for (int j = 0; j < NQ; j++) qv[j] = scale4(((const float4 *)(q + (h0 + h) * D))[sub + L * j], scale);
	softmax_state<NQ> st;
	st.init();
	for (int base = 0; wi * P + base < cnt; base += ATT_CL_UNROLL * step) { // warp-uniform
#pragma unroll
		for (int u = 0; u < ATT_CL_UNROLL; u++) {
			int t = tb + base + u * step;
			if (t < cnt && (base > 0 || t == fresh)) {
#pragma unroll
				for (int j = 0; j < NQ; j++) {
					k[u][j] = kv_get4(kc + (long)t * D, sub + L * j);
					v[u][j] = kv_get4(vc + (long)t * D, sub + L * j);
				}
			}
		}
		// The round's scores, then their softmax, merged into the state.
		float sc[ATT_CL_UNROLL], mr = -INFINITY;
#pragma unroll
		for (int u = 0; u < ATT_CL_UNROLL; u++) {
			float d = 0.f;
#pragma unroll
			for (int j = 0; j < NQ; j++) d += dot4(k[u][j], qv[j]);
			for (int o = L / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
			sc[u] = tb + base + u * step < cnt ? (CAP ? softcap(d, cap) : d) : -INFINITY;
			mr = fmaxf(mr, sc[u]);
		}
		float lr = 0.f;
		float4 ar[NQ];
#pragma unroll
		for (int j = 0; j < NQ; j++) ar[j] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
		for (int u = 0; u < ATT_CL_UNROLL; u++) {
			float e = sc[u] == -INFINITY ? 0.f : expf(sc[u] - mr);
			lr += e;
#pragma unroll
			for (int j = 0; j < NQ; j++) fma4(ar[j], e, v[u][j]);
		}
		st.merge(mr, lr, ar);
	}
	// The lanes of a warp that share sub hold other positions: combine.
	for (int o = L; o < 32; o <<= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, st.m, o), l2 = __shfl_xor_sync(0xffffffffu, st.l, o);
		float4 a2[NQ];
#pragma unroll
		for (int j = 0; j < NQ; j++) a2[j] = shfl4(st.acc[j], o);
		st.merge(m2, l2, a2);
	}
	// Shared memory: the warps' states [G][W], the cluster's blocks' states
	// [G][C] (written by those blocks), then the heads' outputs (padded).
	float *ws = sm, *cs = sm + G * W * DS, *os = cs + G * C * DS;
	float *mine = ws + (h * W + wi) * DS;
	if (slot == 0) {
#pragma unroll
		for (int j = 0; j < NQ; j++) ((float4 *)(mine + 4))[sub + L * j] = st.acc[j];
		if (sub == 0) mine[0] = st.m, mine[1] = st.l;
	}
	__syncthreads();
	cluster_wait(); // every block of the cluster has started
	// Thread (c, x, d4) merges head x's W warp states at float4 d4 and
	// stores the block's state in block c's cs[x][rank].
	for (int i = tid; i < C * G * D4; i += nthreads) {
		int c = i / (G * D4), x = i % (G * D4) / D4, d4 = i % D4;
		float l;
		float4 a;
		float M = merge_states<4>(ws + x * W * DS, W, DS, d4, l, a);
		for (int j = 4; j < W; j += 4) { // more than 4 warps a head
			float l2;
			float4 a2;
			float M2 = merge_states<4>(ws + (x * W + j) * DS, min(4, W - j), DS, d4, l2, a2);
			float MM = fmaxf(M, M2), e1 = M == -INFINITY ? 0.f : expf(M - MM), e2 = M2 == -INFINITY ? 0.f : expf(M2 - MM);
			l = l * e1 + l2 * e2;
			a = scale4(a, e1);
			fma4(a, e2, a2);
			M = MM;
		}
		float *dst = cs + (x * C + rank) * DS;
		st_cluster4(dst + 4 + 4 * d4, c, a);
		if (d4 == 0) st_cluster2(dst, c, M, l);
	}
	cluster_arrive();
	cluster_wait();
	for (int i = tid; i < G * D4; i += nthreads) {
		int x = i / D4, d4 = i % D4;
		float l;
		float4 a;
		merge_states<8>(cs + x * C * DS, C, DS, d4, l, a);
		os4(os, x * D + 4 * d4) = scale4(a, 1.f / l);
	}
	__syncthreads();
	if (o_out) {
		if (blockIdx.y == 0) heads_out(os, G * D, o_out + h0 * D);
		return;
	}
	oproj<T>(os, op, wq, wd, r0, r1, first, rs, res, poison);
#else
	asm volatile("trap;"); // clusters need sm_90: the engine launches this kernel only there
#endif
}

// attention_<type>_<NQ>: W_o in layout <type>, NQ float4s of the head
// dimension per lane; blocks of G·W warps, at most 16.
#define ATTENTION(name, T, NQ, CAP)                                                                                \
	extern "C" __global__ void __launch_bounds__(512)                                                              \
	    name##_##NQ(const float *q, const kv_t *k_cache, const kv_t *v_cache, int ctx_max,           \
	                            int head_dim, int n_head, int n_kv_head, int G, int W, int L, const int *pos_ptr,  \
	                            float scale, int window, float cap, int single, int min_chunk, int splits,        \
	                            int o_blocks, int spin, float *part_acc, float *part_ml, unsigned *tickets, const u8 *wq,        \
	                            const f16 *wd, int dim, float rs, long long *res, unsigned *poison,               \
	                            float *o_out) {                                                                    \
		attention<T, NQ, CAP>(q, k_cache, v_cache, ctx_max, head_dim, n_head, n_kv_head, G, W, L, pos_ptr, scale,  \
		                 window, cap, single, min_chunk, splits, o_blocks, spin, part_acc, part_ml, tickets, wq, wd, dim,  \
		                 rs, res, poison, o_out);                                                                  \
	}
// attention_cap_<type>_<NQ>: the same with soft-capped scores.
#define ATTENTION_NQ(name, T)                                                                                      \
	ATTENTION(attention_##name, T, 1, false) ATTENTION(attention_##name, T, 2, false)                              \
	ATTENTION(attention_##name, T, 3, false) ATTENTION(attention_##name, T, 4, false)                              \
	ATTENTION(attention_cap_##name, T, 1, true) ATTENTION(attention_cap_##name, T, 2, true)                        \
	ATTENTION(attention_cap_##name, T, 3, true) ATTENTION(attention_cap_##name, T, 4, true)
FOR_EACH_WEIGHT_TYPE(ATTENTION_NQ)

// attention_cl_<type>_<NQ>: as attention_<type>_<NQ>, for contexts run
// whole, launched in clusters of at most 8 blocks along y;
// attention_cl_cap_<type>_<NQ> with soft-capped scores.
#define ATTENTION_CL(name, T, NQ, CAP)                                                                             \
	extern "C" __global__ void __launch_bounds__(512)                                                              \
	    name##_##NQ(const float *q, const kv_t *k_cache, const kv_t *v_cache, int ctx_max, int head_dim,          \
	                int n_head, int n_kv_head, int G, int W, int L, const int *pos_ptr, float scale, int window,   \
	                float cap, const u8 *wq, const f16 *wd, int dim, float rs, long long *res, unsigned *poison,   \
	                float *o_out) {                                                                                \
		attention_cl<T, NQ, CAP>(q, k_cache, v_cache, ctx_max, head_dim, n_head, n_kv_head, G, W, L, pos_ptr,      \
		                         scale, window, cap, wq, wd, dim, rs, res, poison, o_out);                         \
	}
#define ATTENTION_CL_NQ(name, T)                                                                                   \
	ATTENTION_CL(attention_cl_##name, T, 1, false) ATTENTION_CL(attention_cl_##name, T, 2, false)                  \
	ATTENTION_CL(attention_cl_##name, T, 3, false) ATTENTION_CL(attention_cl_##name, T, 4, false)                  \
	ATTENTION_CL(attention_cl_cap_##name, T, 1, true) ATTENTION_CL(attention_cl_cap_##name, T, 2, true)            \
	ATTENTION_CL(attention_cl_cap_##name, T, 3, true) ATTENTION_CL(attention_cl_cap_##name, T, 4, true)
FOR_EACH_WEIGHT_TYPE(ATTENTION_CL_NQ)
