// qkv_rope: the attention block's input step for one token. RMSNorm of the
// residual stream (fixed point, common.cuh; staged as float32 in shared
// memory), the Q, K and V projections as
// one matrix (rows: Q heads, then K heads, then V heads), optional biases,
// RoPE on Q and K, and the K/V rows appended to the cache at the current
// position. Q, K and V come as three matrices of one kernel family (views
// of one stacked upload, or three mixed-type matrices); a row's head says
// which it reads. It also zeroes res_next, the buffer the layer's FFN sums its
// output into: nothing reads it between the previous layer's FFN and that.
//
// With x8 set (the int8 layouts on wide models), the normed activations
// come as act_q8's int8 blocks instead (act_q8.cu), and nothing is staged.
//
// The rotation's cos and sin come from a table computed on the host in
// float64 (rope_cs[pos][i] = cos, sin of pos·θ_i), exactly as the CPU engine
// rounds them.
//
// A warp's R rows (decode.cuh) are R/2 pairs of rows that RoPE rotates
// together, so the rotation happens in registers: adjacent rows (2i, 2i+1)
// for llama's "normal" RoPE, rows (i, i+rope_dim/2) for NeoX. Rows past
// rope_dim are paired adjacently and left unrotated.
#include "decode.cuh"
#include "rope.cuh"

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

// EXT: the block's variations (no pre-norm: norm_w null; the attention
// temperature table temp). The plain kernels (EXT false, llama's block)
// have none of their code: these kernels run on cold instruction caches,
// where it cost 3% of a SmolLM-135M token (H200) unused.
template <int T, int R, bool EXT>
__device__ __forceinline__ void qkv_rope(const long long *res, long long *res_next, const unsigned *poison,
                                         const float *norm_w, float eps, int k, const qkv_w &w,
                                         const float *bias, int n_head, int n_kv_head, int head_dim,
                                         const float *rope_cs, int rope_dim, int neox, const float *temp,
                                         const int *pos_ptr, float *q_out, float *k_cache, float *v_cache,
                                         int ctx_max, const unsigned *x8) {
	int nb = (k + 31) >> 5, lane = threadIdx.x & 31;
	int half = head_dim >> 1, rhalf = rope_dim >> 1;
	int pairs = (n_head + 2 * n_kv_head) * half;
	mv<T, R, 1> m;
	int grp = grid_warp();
	qkv_rows<T, R>(m, w, grp, pairs, half, head_dim, rhalf, rope_dim, neox);
	m.preload(nb);
	extern __shared__ float4 xs4[]; // the staged residual, then the norm weights (norm_offset)
	float *gs = (float *)xs4 + norm_offset(k);
	// g8: the activations come as int8 blocks from act_q8 (x8), with
	// the norm's weights in them; nothing is staged.
	const bool g8 = xq8<T>::x8 && x8;
	if (!g8) {
		if (!EXT || norm_w)
			norm_stage(norm_w, k, gs);
		else
			norm_ones(k, gs);
	}
	pdl_wait_and_release();
	int pos = *pos_ptr;
	const float tq = EXT && temp ? temp[pos] : 1.f;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < k; i += gridDim.x * blockDim.x) res_next[i] = 0;
	const bool bad = *poison;
	const float *x = nullptr;
	if (!g8) {
		norm_ready();
		x = res_stage(res, k, (float *)xs4);
		if constexpr (xq8<T>::on) q8_stage((float *)xs4, gs, k);
	}
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
			if (h < n_head + n_kv_head && p % half < rhalf) {
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
		if (g8) {
			if constexpr (xq8<T>::x8) m.dot8(nb, x8row{x8, nb}, acc, ss);
		} else if constexpr (xq8<T>::on) {
			m.dot8(nb, x, acc, ss);
		} else {
			m.template dot<36, true>(nb, k, x, gs, acc, ss);
		}
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
			q_out[(long)h * head_dim + a] = EXT ? t0 * tq : t0;
			q_out[(long)h * head_dim + b] = EXT ? t1 * tq : t1;
		} else {
			bool is_v = h >= n_head + n_kv_head;
			int kh = is_v ? h - n_head - n_kv_head : h - n_head;
			float *dst = (is_v ? v_cache : k_cache) + ((long)kh * ctx_max + pos) * head_dim;
			dst[a] = t0;
			dst[b] = t1;
		}
	}
}

// qkv_rope2 is qkv_rope for Q and K of layout T and V of layout TV
// (llama.cpp's Q4_K_M and Q5_K_M give a layer's V Q6_K in a third to a
// half of the layers), on act_q8's activations only: a warp takes one
// pair of rows of one matrix (the launcher's grid has a warp for every
// pair), and picks its layout's code before anything else; nothing block-
// wide is staged that the two would share. Against the mixed family's
// runtime switch: 29 → 11 µs a layer (Llama-8B shape, H200). Without x8
// the staged path would write past a launch of no shared memory: the
// launcher never does that (qkvV6), and the kernel traps if it did.
template <int T, int TV, bool EXT>
__device__ __forceinline__ void qkv_rope2(const long long *res, long long *res_next, const unsigned *poison,
                                          const float *norm_w, float eps, int k, const qkv_w &w, const float *bias,
                                          int n_head, int n_kv_head, int head_dim, const float *rope_cs, int rope_dim,
                                          int neox, const float *temp, const int *pos_ptr, float *q_out,
                                          float *k_cache, float *v_cache, int ctx_max, const unsigned *x8) {
	if (!x8) asm volatile("trap;");
	const int p = grid_warp();
	if (p < (n_head + 2 * n_kv_head) * (head_dim >> 1) && p / (head_dim >> 1) >= n_head + n_kv_head)
		qkv_rope<TV, 2, EXT>(res, res_next, poison, norm_w, eps, k, w, bias, n_head, n_kv_head, head_dim, rope_cs,
		                     rope_dim, neox, temp, pos_ptr, q_out, k_cache, v_cache, ctx_max, x8);
	else
		qkv_rope<T, 2, EXT>(res, res_next, poison, norm_w, eps, k, w, bias, n_head, n_kv_head, head_dim, rope_cs,
		                    rope_dim, neox, temp, pos_ptr, q_out, k_cache, v_cache, ctx_max, x8);
}

// QKV_ENTRY defines the entry point qkv_rope_<name>, whose body calls fn
// (qkv_rope or qkv_rope2) with template arguments TARGS.
#define QKV_ENTRY(name, fn, TARGS)                                                                                 \
	extern "C" __global__ void __launch_bounds__(256)                                                              \
	    qkv_rope_##name(const long long *res, long long *res_next, const unsigned *poison, const float *norm_w,     \
	                    float eps, int k, const u8 *wq, const f16 *wd, const u8 *wkq, const f16 *wkd,             \
	                    const u8 *wvq, const f16 *wvd, const float *bias, int n_head, int n_kv_head, int head_dim, \
	                    const float *rope_cs, int rope_dim, int neox, const float *temp,                          \
	                    const int *pos_ptr, float *q_out, float *k_cache, float *v_cache, int ctx_max,             \
	                    const unsigned *x8) {                                                                      \
		const qkv_w w = {wq, wkq, wvq, wd, wkd, wvd, n_head, n_kv_head};                                           \
		fn<TARGS>(res, res_next, poison, norm_w, eps, k, w, bias, n_head, n_kv_head, head_dim, rope_cs, rope_dim,  \
		          neox, temp, pos_ptr, q_out, k_cache, v_cache, ctx_max, x8);                               \
	}
#define COMMA ,
#define QKV_ROPE_R(name, T, R, EXT) QKV_ENTRY(name, qkv_rope, T COMMA R COMMA EXT)
// qkv_rope_<type> with decode.cuh's rows per warp, qkv_rope_<type>_r2 with
// two; qkv_rope_ext_<type>(_r2) with the block's variations.
#define QKV_ROPE(name, T)                                                                                          \
	QKV_ROPE_R(name, T, mv_shape<T>::R, false) QKV_ROPE_R(name##_r2, T, 2, false)                                  \
	QKV_ROPE_R(ext_##name, T, mv_shape<T>::R, true) QKV_ROPE_R(ext_##name##_r2, T, 2, true)
FOR_EACH_WEIGHT_TYPE(QKV_ROPE)
// The typed mixed families: two rows a warp only (the launcher's default).
QKV_ROPE_R(mixq4k_r2, WT_MIX_Q4K, 2, false) QKV_ROPE_R(ext_mixq4k_r2, WT_MIX_Q4K, 2, true)
QKV_ROPE_R(mixq6k_r2, WT_MIX_Q6K, 2, false) QKV_ROPE_R(ext_mixq6k_r2, WT_MIX_Q6K, 2, true)
QKV_ROPE_R(mixq5k_r2, WT_MIX_Q5K, 2, false) QKV_ROPE_R(ext_mixq5k_r2, WT_MIX_Q5K, 2, true)
// qkv_rope(_ext)_<family>_v6k_r2: V in Q6_K (qkv_rope2).
#define QKV_ROPE_V(name, T, TV, EXT) QKV_ENTRY(name, qkv_rope2, T COMMA TV COMMA EXT)
QKV_ROPE_V(mixq4k_v6k_r2, WT_MIX_Q4K, WT_MIX_Q6K, false) QKV_ROPE_V(ext_mixq4k_v6k_r2, WT_MIX_Q4K, WT_MIX_Q6K, true)
QKV_ROPE_V(mixq5k_v6k_r2, WT_MIX_Q5K, WT_MIX_Q6K, false) QKV_ROPE_V(ext_mixq5k_v6k_r2, WT_MIX_Q5K, WT_MIX_Q6K, true)
