// qkv_rope: the attention block's input step for one token. RMSNorm of the
// residual stream (fixed point, common.cuh; staged as float32 in shared
// memory), the Q, K and V projections as
// one matrix (rows: Q heads, then K heads, then V heads), optional biases,
// RoPE on Q and K, and the K/V rows appended to the cache at the current
// position. Q, K and V come as three matrices of one kernel family (views
// of one stacked upload, or three mixed-type matrices); a row's head says
// which it reads. It also zeroes n_zero elements at res_next, the buffers
// later kernels of the layer sum into (the FFN's output; with post-norms,
// both branches'): nothing reads them between their last reader and that.
//
// The rotation's cos and sin come from a table computed on the host in
// float64 (rope_cs[pos][i] = cos, sin of pos·θ_i), exactly as the CPU engine
// rounds them.
//
// A warp's R rows (decode.cuh) are R/2 pairs of rows that RoPE rotates
// together, so the rotation happens in registers: adjacent rows (2i, 2i+1)
// for llama's "normal" RoPE, rows (i, i+rope_dim/2) for NeoX. Rows past
// rope_dim are paired adjacently and left unrotated.
//
// The ext kernels add the block's variations (model.Block):
//   - no pre-norm (norm_w null) and the attention temperature (temp);
//   - a post-normed branch joining the stream as it is staged (pend,
//     decode.cuh), the sum then written to the layer's other buffer;
//   - Q/K RMS norms (qk_qw set), before RoPE: per head (Qwen3, Gemma 3) or
//     over the whole projection (qk_full: OLMo 2). A norm needs its whole
//     head, which warps of many blocks compute, so the block that finishes
//     last (qk_ticket) normalizes, rotates and scales every head in place
//     (qk_norm_tail): a tail of one L2 round trip, where a kernel of its
//     own cost a launch, ~2.5 µs a layer.
#include "decode.cuh"
#include "rope.cuh"

// QK_MAX_PAIRS is the rotation pairs a lane holds in qk_norm_tail's
// per-head norms: heads of up to 256 elements (ops.go checks it).
#define QK_MAX_PAIRS 4

// qk_head is where head g of the Q/K norms' groups lies: the query heads
// in q ([n_head][head_dim]), then the key heads in the cache rows at pos
// ([n_kv][ctx_max][head_dim]).
__device__ __forceinline__ float *qk_head(float *q, float *k_cache, int g, int n_head, int head_dim, int ctx_max,
                                          int pos) {
	return g < n_head ? q + (long)g * head_dim : k_cache + ((long)(g - n_head) * ctx_max + pos) * head_dim;
}

// qk_norm_tail normalizes (gains qw, kw), rotates and scales (tq, queries
// only) the token's query and key heads in place, with the whole block,
// after every block of the grid has written them. Per head a warp takes a
// head, each lane QK_MAX_PAIRS rotation pairs in registers; whole
// projections (full) take the block, two passes over each. Loads go
// through L2 (ld.cg): other SMs wrote these elements.
__device__ __noinline__ void qk_norm_tail(float *q, float *k_cache, int pos, int ctx_max, int n_head, int n_kv,
                                          int head_dim, bool full, const float *qw, const float *kw, float eps,
                                          const float *rope_cs, int rope_dim, int neox, float tq) {
	const int half = head_dim >> 1, rhalf = rope_dim >> 1, lane = threadIdx.x & 31;
	if (!full) {
		for (int g = threadIdx.x >> 5; g < n_head + n_kv; g += blockDim.x >> 5) {
			float *hp = qk_head(q, k_cache, g, n_head, head_dim, ctx_max, pos);
			const float *w = g < n_head ? qw : kw;
			const float t = g < n_head ? tq : 1.f;
			float va[QK_MAX_PAIRS], vb[QK_MAX_PAIRS], ss = 0.f;
#pragma unroll
			for (int j = 0; j < QK_MAX_PAIRS; j++) {
				int i = lane + 32 * j, a, b;
				va[j] = vb[j] = 0.f;
				if (i < half) {
					pair_rows(i, rhalf, rope_dim, neox, a, b);
					va[j] = __ldcg(hp + a);
					vb[j] = __ldcg(hp + b);
					ss += va[j] * va[j] + vb[j] * vb[j];
				}
			}
			const float f = rms_factor(warp_sum(ss), head_dim, eps);
#pragma unroll
			for (int j = 0; j < QK_MAX_PAIRS; j++) {
				int i = lane + 32 * j, a, b;
				if (i >= half) break;
				pair_rows(i, rhalf, rope_dim, neox, a, b);
				float v0 = va[j] * f * w[a], v1 = vb[j] * f * w[b];
				if (i < rhalf) {
					const float *cs = rope_cs + 2 * ((long)pos * rhalf + i);
					float c = cs[0], s = cs[1], r0 = v0 * c - v1 * s, r1 = v0 * s + v1 * c;
					v0 = r0;
					v1 = r1;
				}
				hp[a] = v0 * t;
				hp[b] = v1 * t;
			}
		}
		return;
	}
	__shared__ float scratch[32];
	for (int g = 0; g < 2; g++) { // the queries, then the keys
		const int heads = g == 0 ? n_head : n_kv, n = heads * head_dim;
		const float *w = g == 0 ? qw : kw;
		const float t = g == 0 ? tq : 1.f;
		float ss = 0.f;
		for (int e = threadIdx.x; e < n; e += blockDim.x) {
			float v = __ldcg(qk_head(q, k_cache, g * n_head + e / head_dim, n_head, head_dim, ctx_max, pos) + e % head_dim);
			ss += v * v;
		}
		const float f = rms_factor(block_sum(ss, scratch), n, eps);
		for (int p = threadIdx.x; p < heads * half; p += blockDim.x) {
			int h = p / half, i = p % half, a, b;
			pair_rows(i, rhalf, rope_dim, neox, a, b);
			float *hp = qk_head(q, k_cache, g * n_head + h, n_head, head_dim, ctx_max, pos);
			float v0 = __ldcg(hp + a) * f * w[h * head_dim + a], v1 = __ldcg(hp + b) * f * w[h * head_dim + b];
			if (i < rhalf) {
				const float *cs = rope_cs + 2 * ((long)pos * rhalf + i);
				float c = cs[0], s = cs[1], r0 = v0 * c - v1 * s, r1 = v0 * s + v1 * c;
				v0 = r0;
				v1 = r1;
			}
			hp[a] = v0 * t;
			hp[b] = v1 * t;
		}
	}
}

// qkv_w is the three projections' weights.
struct qkv_w {
	const u8 *q, *kq, *vq;
	const f16 *d, *kd, *vd;
	int n_head, n_kv_head;
};

template <int T, int R>
__device__ __forceinline__ void qkv_rows(mv<T, R, 1> &m, const qkv_w &w, int grp, int pairs, int half, int head_dim,
                                         int rhalf, int rope_dim, int neox) {
#pragma unroll
	for (int i = 0; i < R / 2; i++) {
		int p = grp * (R / 2) + i;
		m.row[2 * i] = m.row[2 * i + 1] = -1;
		m.q[2 * i] = m.q[2 * i + 1] = w.q;
		m.d[2 * i] = m.d[2 * i + 1] = w.d;
		if (p < pairs) {
			int h = p / half, a, b;
			pair_rows(p % half, rhalf, rope_dim, neox, a, b);
			if (h >= w.n_head + w.n_kv_head) {
				h -= w.n_head + w.n_kv_head;
				m.q[2 * i] = m.q[2 * i + 1] = w.vq;
				m.d[2 * i] = m.d[2 * i + 1] = w.vd;
			} else if (h >= w.n_head) {
				h -= w.n_head;
				m.q[2 * i] = m.q[2 * i + 1] = w.kq;
				m.d[2 * i] = m.d[2 * i + 1] = w.kd;
			}
			m.row[2 * i] = (long)h * head_dim + a;
			m.row[2 * i + 1] = (long)h * head_dim + b;
		}
	}
}

// qk_args are the Q/K norms' operands (ext kernels; qw null: none).
struct qk_args {
	const float *qw, *kw;
	int full;
	int *ticket; // blocks done, back to 0 after the tail
};

// EXT: the block's variations (the header's list). The plain kernels (EXT
// false, llama's block) have none of their code: these kernels run on
// cold instruction caches, where it cost 3% of a SmolLM-135M token (H200)
// unused.
template <int T, int R, bool EXT>
__device__ __forceinline__ void qkv_rope(const long long *res, long long *res_next, int n_zero, unsigned *poison,
                                         const float *norm_w, float eps, int k, const qkv_w &w,
                                         const float *bias, int n_head, int n_kv_head, int head_dim,
                                         const float *rope_cs, int rope_dim, int neox, const float *temp,
                                         const int *pos_ptr, float *q_out, float *k_cache, float *v_cache,
                                         int ctx_max, const pend &pn, const qk_args &qk) {
	int nb = (k + 31) >> 5, lane = threadIdx.x & 31;
	int half = head_dim >> 1, rhalf = rope_dim >> 1;
	int pairs = (n_head + 2 * n_kv_head) * half;
	mv<T, R, 1> m;
	int grp = grid_warp();
	qkv_rows<T, R>(m, w, grp, pairs, half, head_dim, rhalf, rope_dim, neox);
	m.preload(nb);
	extern __shared__ float4 xs4[]; // the staged residual, then the norm weights (norm_offset)
	float *gs = (float *)xs4 + norm_offset(k);
	if (!EXT || norm_w)
		norm_stage(norm_w, k, gs);
	else
		norm_ones(k, gs);
	pdl_wait_and_release();
	int pos = *pos_ptr;
	const float tq = EXT && temp ? temp[pos] : 1.f;
	// With Q/K norms the rotation and the temperature come after them, in
	// the tail.
	const bool qkn = EXT && qk.qw;
	const float tq_main = qkn ? 1.f : tq;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_zero; i += gridDim.x * blockDim.x) res_next[i] = 0;
	const bool bad = *poison;
	norm_ready();
	const float *x = EXT ? res_stage_post(res, pn, eps, k, (float *)xs4, poison) : res_stage(res, k, (float *)xs4);
	for (bool first = true; grp * (R / 2) < pairs; grp += grid_warps(), first = false) {
		if (!first) {
			qkv_rows<T, R>(m, w, grp, pairs, half, head_dim, rhalf, rope_dim, neox);
			m.preload(nb);
		}
		// Lane i < R/2 owns pair i. Its rotation and biases are loaded
		// before the dot products, so their latency hides behind them.
		int p = grp * (R / 2) + lane, h = 0, a = 0, b = 0;
		float c = 0.f, s = 0.f, b0 = 0.f, b1 = 0.f;
		bool mine = lane < R / 2 && p < pairs, rot = false;
		if (mine) {
			h = p / half;
			pair_rows(p % half, rhalf, rope_dim, neox, a, b);
			if (!qkn && h < n_head + n_kv_head && p % half < rhalf) {
				const float *cs = rope_cs + 2 * ((long)pos * rhalf + p % half);
				c = cs[0];
				s = cs[1];
				rot = true;
			}
			if (bias) {
				b0 = bias[(long)h * head_dim + a];
				b1 = bias[(long)h * head_dim + b];
			}
		}
		float acc[R], ss;
		m.template dot<36, true>(nb, k, x, gs, acc, ss);
		float scale = bad ? __int_as_float(0x7fc00000) : !EXT || norm_w ? rms_factor(ss, k, eps) : 1.f;
		float v0 = 0.f, v1 = 0.f;
#pragma unroll
		for (int i = 0; i < R / 2; i++) {
			if (lane == i) {
				v0 = acc[2 * i] * scale + b0;
				v1 = acc[2 * i + 1] * scale + b1;
			}
		}
		if (!mine) continue;
		float t0 = v0, t1 = v1;
		if (rot) {
			t0 = v0 * c - v1 * s;
			t1 = v0 * s + v1 * c;
		}
		if (h < n_head) {
			q_out[(long)h * head_dim + a] = EXT ? t0 * tq_main : t0;
			q_out[(long)h * head_dim + b] = EXT ? t1 * tq_main : t1;
		} else {
			bool is_v = h >= n_head + n_kv_head;
			int kh = is_v ? h - n_head - n_kv_head : h - n_head;
			float *dst = (is_v ? v_cache : k_cache) + ((long)kh * ctx_max + pos) * head_dim;
			dst[a] = t0;
			dst[b] = t1;
		}
	}
	if (!qkn) return;
	// The last block to finish runs the Q/K norms (threadfence reduction:
	// each block's writes are visible before its ticket is counted).
	__shared__ int last;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) last = atomicAdd(qk.ticket, 1) == (int)gridDim.x - 1;
	__syncthreads();
	if (!last) return;
	__threadfence();
	qk_norm_tail(q_out, k_cache, pos, ctx_max, n_head, n_kv_head, head_dim, qk.full, qk.qw, qk.kw, eps, rope_cs, rope_dim,
	             neox, tq);
	if (threadIdx.x == 0) *qk.ticket = 0;
}

#define QKV_ROPE_R(name, T, R, EXT)                                                                                \
	extern "C" __global__ void __launch_bounds__(256)                                                              \
	    qkv_rope_##name(const long long *res, long long *res_next, int n_zero, unsigned *poison,                  \
	                    const float *norm_w, float eps, int k, const u8 *wq, const f16 *wd, const u8 *wkq,         \
	                    const f16 *wkd, const u8 *wvq, const f16 *wvd, const float *bias, int n_head,             \
	                    int n_kv_head, int head_dim, const float *rope_cs, int rope_dim, int neox,                \
	                    const float *temp, const int *pos_ptr, float *q_out, float *k_cache, float *v_cache,       \
	                    int ctx_max, const long long *pend_branch, const float *pend_w, float pend_rs,            \
	                    long long *pend_out, const float *qk_qw, const float *qk_kw, int qk_full,                 \
	                    int *qk_ticket) {                                                                          \
		const qkv_w w = {wq, wkq, wvq, wd, wkd, wvd, n_head, n_kv_head};                                           \
		const pend pn = {pend_branch, pend_w, pend_rs, pend_out};                                                  \
		const qk_args qk = {qk_qw, qk_kw, qk_full, qk_ticket};                                                     \
		qkv_rope<T, R, EXT>(res, res_next, n_zero, poison, norm_w, eps, k, w, bias, n_head, n_kv_head, head_dim,    \
		                    rope_cs, rope_dim, neox, temp, pos_ptr, q_out, k_cache, v_cache, ctx_max, pn, qk);     \
	}
// qkv_rope_<type> with decode.cuh's rows per warp, qkv_rope_<type>_r2 with
// two; qkv_rope_ext_<type>(_r2) with the block's variations.
#define QKV_ROPE(name, T)                                                                                          \
	QKV_ROPE_R(name, T, mv_shape<T>::R, false) QKV_ROPE_R(name##_r2, T, 2, false)                                  \
	QKV_ROPE_R(ext_##name, T, mv_shape<T>::R, true) QKV_ROPE_R(ext_##name##_r2, T, 2, true)
FOR_EACH_WEIGHT_TYPE(QKV_ROPE)
// The typed mixed families: two rows a warp only (the launcher's default).
QKV_ROPE_R(mixq4k_r2, WT_MIX_Q4K, 2, false) QKV_ROPE_R(ext_mixq4k_r2, WT_MIX_Q4K, 2, true)
QKV_ROPE_R(mixq6k_r2, WT_MIX_Q6K, 2, false) QKV_ROPE_R(ext_mixq6k_r2, WT_MIX_Q6K, 2, true)
