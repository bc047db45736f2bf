// logits: the output head and greedy sampling in one kernel. The final
// RMSNorm of x (the decode step's fixed-point residual stream, or a float32
// row of the prefill's), logits[r] = W[r]·x for every row, the sampler's penalties when
// counts is set (counts[r]: how often token r is in the penalty history),
// and the argmax: each block writes its best (value, index); the last block
// to finish (a ticket counter, left at zero again for the next step) reduces
// them and writes the token id to best and to out, each when set (out is pinned
// host memory mapped into the device, so only those 4 bytes cross to the
// host). The id is -1 when every logit is NaN. With the step's position
// (pos, device memory) out is a pair of slots, the id going to slot pos&1,
// so the host can read one step's token while the next step is running;
// and when next is set, the id and pos+1 go there: the input of a step
// chained to this one (embed.cu). A set poison word (common.cuh)
// makes every logit NaN; the last block clears it for the next step. The
// logits are multiplied by scale and soft-capped (cap; 0: not) before the
// penalties, as the model's logit multiplier and final soft-cap say.
//
// Warps walk groups of R rows across the grid with the next group's weights
// loaded before the current group's arithmetic: this kernel moves the most
// bytes of the step (the vocabulary × the model width), so it keeps as many
// loads in flight as it can.
#include "decode.cuh"
#include "sampling.cuh"

__device__ __forceinline__ float in_elem(const long long *in, int e) { return res_f32(in[e]); }
__device__ __forceinline__ float in_elem(const float *in, int e) { return in[e]; }

// stage_normed writes rmsnorm(in)·g (g may be null), k elements, to xs in
// res_stage's padded layout, with the whole block: rows wider than 1024
// elements (the lanes' blocks do not fit in registers) then read their
// activations normalized, where each row group took the squares and the
// gains again. scratch holds 32 floats.
template <typename X>
__device__ __forceinline__ const float *stage_normed(const X *in, int k, const float *g, float eps, float *xs,
                                                     float *scratch) {
	float ss = 0.f;
	for (int e = threadIdx.x; e < k; e += blockDim.x) {
		float v = in_elem(in, e);
		xs[XS_AT(e)] = v;
		ss += v * v;
	}
	const float s = rms_factor(block_sum(ss, scratch), k, eps);
	for (int e = threadIdx.x; e < k; e += blockDim.x) xs[XS_AT(e)] *= g ? g[e] * s : s; // the thread's own elements
	__syncthreads();
	return xs;
}

template <int T, int R, int PRE> __device__ __forceinline__ void logits_rows(mv<T, R, PRE> &m, int grp, int rows) {
#pragma unroll
	for (int i = 0; i < R; i++) {
		long r = (long)grp * R + i;
		m.row[i] = r < rows ? r : -1;
	}
}

// PRE > 1 (the int8 layouts on wide rows, logits_wide_*): each lane
// loads PRE blocks of each of its rows at once, R·PRE loads in flight,
// instead of one block of the row group ahead (two groups in registers
// would take twice the registers).
template <int T, int R, typename X, int PRE = 1>
__device__ __forceinline__ void logits(const X *in, unsigned *poison, const float *norm_w, float eps, int k, const u8 *wq,
                                       const f16 *wd, int rows, float lscale, float cap, float *y, const int *counts,
                                       const samp_params *params, float *part_v, int *part_i, unsigned *ticket,
                                       int *best_out, int *out, const int *pos, int *next) {
	__shared__ float bv[32];
	__shared__ int bi[32];
	__shared__ bool last;
	int nb = (k + 31) >> 5, lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	constexpr bool ahead = PRE == 1; // the next group's first blocks loaded before this group's arithmetic
	mv<T, R, PRE> cur, nxt;
#pragma unroll
	for (int i = 0; i < R; i++) {
		cur.q[i] = nxt.q[i] = wq;
		cur.d[i] = nxt.d[i] = wd;
	}
	int grp = grid_warp(), step = grid_warps();
	logits_rows(cur, grp, rows);
	cur.preload(nb);
	// The history counts change only between steps: safe before the wait.
	int cnt[R];
#pragma unroll
	for (int i = 0; i < R; i++) cnt[i] = counts && cur.row[i] >= 0 ? counts[cur.row[i]] : 0;
	// Rows of up to 1024 elements: the lane's activations are loaded once,
	// the norm weights of its block before the wait.
	const bool whole = PRE == 1 && nb <= 32;
	// Int8 activations (decode.cuh, xq8) where the residual stream is
	// staged: the decode step's head.
	constexpr bool Q8 = xq8<T>::on && sizeof(X) == 8;
	static_assert(PRE == 1 || Q8, "PRE > 1 for int8 activations only");
	normw<1> gw;
	if (whole && !Q8) gw.load(norm_w, nb, k);
	pdl_wait_and_release();
	samp_params sp;
	sp.flags = 0;
	if (counts) sp = *params;
	bool pen = counts && (sp.flags & SP_PENALTY);
	const bool bad = poison && *poison;
	extern __shared__ float4 xs4[]; // XS_AT(k) floats
	constexpr int BS = xstride<X>::BS;
	const float *x;
	xblk xs[1];
	xblk8 x8;
	float ssx = 0.f;
	if constexpr (Q8) {
		x = res_stage(in, k, (float *)xs4);
		q8_stage<false>((float *)xs4, norm_w, k);
		if (whole) ssx = warp_sum(lane < nb ? x8load(x8, x, lane) : 0.f);
	} else {
		x = whole ? res_stage(in, k, (float *)xs4) : stage_normed(in, k, norm_w, eps, (float *)xs4, bv);
		ssx = whole ? xpre<1, BS>(xs, nb, k, x, norm_w, &gw) : 0.f;
	}
	float best = -INFINITY;
	int besti = 0x7fffffff;
	while ((long)grp * R < rows) {
		int ncnt[R];
		if constexpr (ahead) {
			logits_rows(nxt, grp + step, rows);
			nxt.preload(nb);
#pragma unroll
			for (int i = 0; i < R; i++) ncnt[i] = counts && nxt.row[i] >= 0 ? counts[nxt.row[i]] : 0;
		}
		float acc[R], ss;
		if constexpr (Q8) {
			if (whole)
				cur.dotx8(nb, x8, acc);
			else
				cur.dot8(nb, x, acc, ssx);
		} else if (whole) {
			cur.dotx(nb, xs, acc);
		} else {
			cur.template dot<36>(nb, k, x, nullptr, acc, ss);
		}
		float scale = bad ? __int_as_float(0x7fc00000) : whole || Q8 ? rms_factor(ssx, k, eps) : 1.f;
#pragma unroll
		for (int i = 0; i < R; i++) {
			if (cur.row[i] < 0) continue;
			float v = softcap(acc[i] * scale * lscale, cap);
			if (pen && cnt[i] > 0) v = penalize(v, cnt[i], sp);
			if (lane == i) y[cur.row[i]] = v;
			better(best, besti, v, (int)cur.row[i]); // every lane alike: no reduction
		}
		grp += step;
		if constexpr (ahead) {
			cur = nxt;
#pragma unroll
			for (int i = 0; i < R; i++) cnt[i] = ncnt[i];
		} else {
			logits_rows(cur, grp, rows);
			cur.preload(nb);
#pragma unroll
			for (int i = 0; i < R; i++) cnt[i] = counts && cur.row[i] >= 0 ? counts[cur.row[i]] : 0;
		}
	}
	if (lane == 0) {
		bv[w] = best;
		bi[w] = besti;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int j = 1; j < nw; j++) better(best, besti, bv[j], bi[j]);
		part_v[blockIdx.x] = best;
		part_i[blockIdx.x] = besti;
		__threadfence();
		last = atomicAdd(ticket, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last) return;
	__threadfence();
	best = -INFINITY;
	besti = 0x7fffffff;
	const volatile float *pv = part_v;
	const volatile int *pi = part_i;
	for (int j = threadIdx.x; j < gridDim.x; j += blockDim.x) better(best, besti, pv[j], pi[j]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		better(best, besti, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, besti, o));
	__syncthreads();
	if (lane == 0) {
		bv[w] = best;
		bi[w] = besti;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int j = 1; j < nw; j++) better(best, besti, bv[j], bi[j]);
		int tok = besti == 0x7fffffff ? -1 : besti;
		if (best_out) *best_out = tok;
		const int p = pos ? *pos : 0;
		if (out) *(volatile int *)(out + (p & 1)) = tok;
		if (next) {
			next[0] = tok;
			next[1] = p + 1;
		}
		if (poison) *poison = 0;
		*ticket = 0;
	}
}

#define LOGITS_R(name, T, R, X)                                                                                    \
	extern "C" __global__ void __launch_bounds__(128)                                                              \
	    logits_##name(const X *in, unsigned *poison, const float *norm_w, float eps, int k, const u8 *wq,          \
	                  const f16 *wd, int rows, float lscale, float cap, float *y, const int *counts,               \
	                  const samp_params *params, float *part_v, int *part_i, unsigned *ticket, int *best, int *out, \
	                  const int *pos, int *next) {                                                                 \
		logits<T, R>(in, poison, norm_w, eps, k, wq, wd, rows, lscale, cap, y, counts, params, part_v, part_i,      \
		             ticket, best, out, pos, next);                                                                \
	}
// logits_<type> with decode.cuh's rows per warp and logits_<type>_r2 with two
// read the fixed-point residual stream; logits_float_<type> a float32 row.
#define LOGITS(name, T)                                                                                            \
	LOGITS_R(name, T, mv_shape<T>::R, long long)                                                                   \
	LOGITS_R(name##_r2, T, 2, long long) LOGITS_R(float_##name, T, mv_shape<T>::R, float)
FOR_EACH_WEIGHT_TYPE(LOGITS)
// The typed mixed families: the decode step's head only.
#define LOGITS_TYPED(name, T, MX) LOGITS_R(name, T, mv_shape<T>::R, long long)
FOR_EACH_TYPED_MIX(LOGITS_TYPED)
// logits_wide_<type>: the decode step's head for the int8 layouts on rows
// wider than 1,024 elements, two rows a warp with four blocks of each a
// lane loaded at once (PRE).
#define LOGITS_WIDE(name, T)                                                                                       \
	extern "C" __global__ void __launch_bounds__(128)                                                              \
	    logits_wide_##name(const long long *in, unsigned *poison, const float *norm_w, float eps, int k,           \
	                       const u8 *wq, const f16 *wd, int rows, float lscale, float cap, float *y,               \
	                       const int *counts, const samp_params *params, float *part_v, int *part_i,               \
	                       unsigned *ticket, int *best, int *out, const int *pos, int *next) {                     \
		logits<T, 2, long long, 4>(in, poison, norm_w, eps, k, wq, wd, rows, lscale, cap, y, counts, params,        \
		                           part_v, part_i, ticket, best, out, pos, next);                                  \
	}
// Q8_0 and Q4_K only: Q6_K's was slower than one group ahead (Llama-8B
// shape's head: 484 against 256 µs, H200).
LOGITS_WIDE(q8_0, WT_Q8_0)
LOGITS_WIDE(mixq4k, WT_MIX_Q4K)

// logits_x8_<type>: the decode step's head on act_q8's int8 activations
// (x8: the final norm's, wide models), shaped as matvec_add: a warp takes
// R rows whole, every lane loading its C blocks of each (all of a row up
// to 32·C blocks) before the PDL wait, and the grid has a warp for every
// row group, so that each warp has one round of loads and nothing is
// staged. The persistent kernel above, a few blocks an SM walking the rows
// with one group ahead, read the heads at 0.3-1 TB/s (Llama-8B shape,
// H200: Q6_K 256 µs, Q4_0 310 µs). Each warp's best (value, index) goes
// to a key with a 64-bit atomicMax that nothing waits for (the value's
// bits made orderable, above the complement of the index so that the
// lower index wins a tie, as better does; 0 is no candidate), and no warp
// waits for another: logits_pick, the kernel after, reads and clears the
// keys. The keys are HEAD_SLOTS words a cache line apart, a block's warps
// taking one, and a warp skips the atomic when its slot already holds a
// better key: with one key for all, the tens of thousands of atomics on
// one address took the head's time (Llama-8B shape, F16: 330 µs for 403
// MB; every head's time went with its warps' count, 3-7 ns a warp).
#define HEAD_SLOTS 64
#define HEAD_SLOT_STRIDE 16 // 64-bit words: 128 bytes

__device__ __forceinline__ unsigned long long best_key(float v, int i) {
	const unsigned u = __float_as_uint(v);
	const unsigned o = u & 0x80000000u ? ~u : u | 0x80000000u;
	return (unsigned long long)o << 32 | (unsigned)~i;
}

// head_rows ends a warp's R rows of the head: their sums acc (every lane
// alike) times the norm's scale, the logit multiplier and soft-cap, the
// penalties, each logit to y, and the warp's best to key.
template <int R>
__device__ __forceinline__ void head_rows(const float acc[R], long r0, int rows, float scale, float lscale, float cap,
                                          const int cnt[R], bool pen, const samp_params &sp, float *y,
                                          unsigned long long *key) {
	const int lane = threadIdx.x & 31;
	float best = -INFINITY;
	int besti = 0x7fffffff;
#pragma unroll
	for (int i = 0; i < R; i++) {
		if (r0 + i >= rows) continue;
		float v = softcap(acc[i] * scale * lscale, cap);
		if (pen && cnt[i] > 0) v = penalize(v, cnt[i], sp);
		if (lane == i) y[r0 + i] = v;
		better(best, besti, v, (int)(r0 + i)); // every lane alike
	}
	if (lane == 0 && besti != 0x7fffffff) {
		const unsigned long long kv = best_key(best, besti);
		unsigned long long *slot = key + HEAD_SLOT_STRIDE * (blockIdx.x % HEAD_SLOTS);
		if (kv > *(volatile unsigned long long *)slot) atomicMax(slot, kv);
	}
}

template <int T, int R, int C>
__device__ __forceinline__ void logits_x8(const unsigned *x8, const unsigned *poison, float eps, int k, const u8 *wq,
                                          const f16 *wd, int rows, float lscale, float cap, float *y, const int *counts,
                                          const samp_params *params, unsigned long long *key) {
	const int nb = k >> 5, lane = threadIdx.x & 31;
	const long r0 = (long)grid_warp() * R;
	if (r0 >= rows) return; // whole warps
	wblk<T> wb[R][C];
	int cnt[R];
#pragma unroll
	for (int i = 0; i < R; i++) {
#pragma unroll
		for (int c = 0; c < C; c++) {
			const int b = lane + 32 * c;
			if (r0 + i < rows && b < nb) wload<T>(wb[i][c], wq, wd, (r0 + i) * nb + b);
		}
		// The history counts change only between steps: safe before the wait.
		cnt[i] = counts && r0 + i < rows ? counts[r0 + i] : 0;
	}
	pdl_wait_and_release();
	samp_params sp;
	sp.flags = 0;
	if (counts) sp = *params;
	const bool pen = counts && (sp.flags & SP_PENALTY);
	const bool bad = poison && *poison;
	const x8row xr{x8, nb};
	float acc[R], ss = 0.f;
#pragma unroll
	for (int i = 0; i < R; i++) acc[i] = 0.f;
#pragma unroll
	for (int c = 0; c < C; c++) {
		const int b = lane + 32 * c;
		if (b < nb) {
			xblk8 xb;
			ss += xr.load(xb, b);
#pragma unroll
			for (int i = 0; i < R; i++)
				if (r0 + i < rows) acc[i] += wdot8<T>(wb[i][c], xb);
		}
	}
	for (int b = lane + 32 * C; b < nb; b += 32) { // rows wider than 32·C blocks
		xblk8 xb;
		ss += xr.load(xb, b);
#pragma unroll
		for (int i = 0; i < R; i++) {
			if (r0 + i < rows) {
				wblk<T> v;
				wload<T>(v, wq, wd, (r0 + i) * nb + b);
				acc[i] += wdot8<T>(v, xb);
			}
		}
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
		ss += __shfl_xor_sync(0xffffffffu, ss, o);
	}
	const float scale = bad ? __int_as_float(0x7fc00000) : rms_factor(ss, k, eps);
	head_rows<R>(acc, r0, rows, scale, lscale, cap, cnt, pen, sp, y, key);
}

#define LOGITS_X8(name, T, R, C)                                                                                   \
	extern "C" __global__ void __launch_bounds__(128)                                                              \
	    logits_x8_##name(const unsigned *x8, const unsigned *poison, float eps, int k, const u8 *wq,                \
	                     const f16 *wd, int rows, float lscale, float cap, float *y, const int *counts,            \
	                     const samp_params *params, unsigned long long *key) {                                     \
		logits_x8<T, R, C>(x8, poison, eps, k, wq, wd, rows, lscale, cap, y, counts, params, key);                   \
	}
// Rows a warp and blocks a lane (about 40-60 registers of weights; the
// launcher's logitsX8Kernel mirrors them): all of a 4,096-wide row, and
// (_c2) twice the rows of up to 2,048.
#define LOGITS_X8_BOTH(name, T, R) LOGITS_X8(name, T, R, 4) LOGITS_X8(name##_c2, T, 2 * R, 2)
LOGITS_X8_BOTH(q4_0, WT_Q4_0, 2)
LOGITS_X8_BOTH(q8_0, WT_Q8_0, 1)
#define LOGITS_X8_TYPED(name, T, MX) LOGITS_X8_BOTH(name, T, 1)
FOR_EACH_TYPED_MIX(LOGITS_X8_TYPED)

// logits_xf_<type>: logits_x8 for F16 and BF16 rows, on act_f32's float
// row (xf): a warp takes R rows whole, each lane S steps of 8 elements of
// each (weights.cuh's hrow) loaded before the PDL wait. The persistent
// kernel read the Llama-8B shape's F16 head at 1.2 TB/s (334 µs, 194
// registers a thread).
template <int T, int R, int S>
__device__ __forceinline__ void logits_xf(const float *xf, const unsigned *poison, float eps, int k, const u8 *wq,
                                          int rows, float lscale, float cap, float *y, const int *counts,
                                          const samp_params *params, unsigned long long *key) {
	const int nb = (k + 31) >> 5, n = 32 * nb, lane = threadIdx.x & 31;
	const long r0 = (long)grid_warp() * R;
	if (r0 >= rows) return; // whole warps
	uint4 wb[R][S];
	int cnt[R];
#pragma unroll
	for (int i = 0; i < R; i++) {
#pragma unroll
		for (int s = 0; s < S; s++) {
			const int e = 256 * s + 8 * lane;
			if (r0 + i < rows && e < n) wb[i][s] = hrow<T>::load(wq, (r0 + i) * n + e);
		}
		cnt[i] = counts && r0 + i < rows ? counts[r0 + i] : 0;
	}
	pdl_wait_and_release();
	samp_params sp;
	sp.flags = 0;
	if (counts) sp = *params;
	const bool pen = counts && (sp.flags & SP_PENALTY);
	const bool bad = poison && *poison;
	const xfrow xr{xf, nb};
	float acc[R];
#pragma unroll
	for (int i = 0; i < R; i++) acc[i] = 0.f;
#pragma unroll
	for (int s = 0; s < S; s++) {
		const int e = 256 * s + 8 * lane;
		if (e < n) {
			float4 a, b;
			xr.at(e, a, b);
#pragma unroll
			for (int i = 0; i < R; i++)
				if (r0 + i < rows) acc[i] += hrow<T>::dot(wb[i][s], a, b);
		}
	}
	for (int e = 256 * S + 8 * lane; e < n; e += 256) { // rows wider than 256·S
		float4 a, b;
		xr.at(e, a, b);
#pragma unroll
		for (int i = 0; i < R; i++)
			if (r0 + i < rows) acc[i] += hrow<T>::dot(hrow<T>::load(wq, (r0 + i) * n + e), a, b);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
	}
	const float ss = xr.ss();
	const float scale = bad ? __int_as_float(0x7fc00000) : rms_factor(ss, k, eps);
	head_rows<R>(acc, r0, rows, scale, lscale, cap, cnt, pen, sp, y, key);
}

// The same arguments as logits_x8's (wd unused), so that one launch
// serves both.
#define LOGITS_XF(name, T, R, S)                                                                                   \
	extern "C" __global__ void __launch_bounds__(128)                                                              \
	    logits_xf_##name(const float *xf, const unsigned *poison, float eps, int k, const u8 *wq, const f16 *,     \
	                     int rows, float lscale, float cap, float *y, const int *counts, const samp_params *params, \
	                     unsigned long long *key) {                                                                \
		logits_xf<T, R, S>(xf, poison, eps, k, wq, rows, lscale, cap, y, counts, params, key);                      \
	}
// All of a 4,096-wide row a lane's 16 steps, and (_c2) two rows of up to
// 2,048 (the launcher's logitsX8Kernel mirrors them).
LOGITS_XF(f16, WT_F16, 1, 16)
LOGITS_XF(f16_c2, WT_F16, 2, 8)
LOGITS_XF(bf16, WT_BF16, 1, 16)
LOGITS_XF(bf16_c2, WT_BF16, 2, 8)

// logits_pick ends logits_x8's step, one warp: the argmax from the keys
// (-1 when no logit was a candidate: all NaN) to best, to out's slot
// pos&1 and to the chained step's input next, each when set; the keys
// and the poison word cleared for the next step.
extern "C" __global__ void __launch_bounds__(32) logits_pick(unsigned long long *key, unsigned *poison, int *best_out,
                                                            int *out, const int *pos, int *next) {
	pdl_wait_and_release();
	unsigned long long kv = 0;
	for (int s = threadIdx.x; s < HEAD_SLOTS; s += 32) {
		unsigned long long *slot = key + HEAD_SLOT_STRIDE * s;
		const unsigned long long v = *slot;
		*slot = 0;
		if (v > kv) kv = v;
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		const unsigned long long v = __shfl_xor_sync(0xffffffffu, kv, o);
		if (v > kv) kv = v;
	}
	if (threadIdx.x != 0) return;
	const int tok = kv == 0 ? -1 : (int)~(unsigned)kv;
	if (best_out) *best_out = tok;
	const int p = pos ? *pos : 0;
	if (out) *(volatile int *)(out + (p & 1)) = tok;
	if (next) {
		next[0] = tok;
		next[1] = p + 1;
	}
	if (poison) *poison = 0;
}
