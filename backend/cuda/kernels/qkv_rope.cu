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
// With k_cache null (a model with Q/K norms) the keys stay in f32, not
// rotated, in q_out after the queries: qk_norm normalizes and rotates them
// there and writes them to the f16 cache, rounding them once.
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
#include "kv.cuh"

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
                                         const int *pos_ptr, float *q_out, kv_t *k_cache, kv_t *v_cache,
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
			if (!is_v && !k_cache) { // staged for qk_norm, after the queries
				q_out[(long)h * head_dim + a] = t0;
				q_out[(long)h * head_dim + b] = t1;
				continue;
			}
			kv_t *dst = (is_v ? v_cache : k_cache) + ((long)kh * ctx_max + pos) * head_dim;
			kv_put(dst + a, t0);
			kv_put(dst + b, t1);
		}
	}
}

// qkv_rope2 is qkv_rope for Q and K of layout T and V of layout TV
// (llama-quantize gives many mixes' V more bits: QKV_ROPE_V's list), on
// act_q8's activations only: a warp takes one
// pair of rows of one matrix (the launcher's grid has a warp for every
// pair), and picks its layout's code before anything else; nothing block-
// wide is staged that the two would share. Against the mixed family's
// runtime switch: 29 → 11 µs a layer (Llama-8B shape, H200). Without x8
// the staged path would write past a launch of no shared memory: the
// launcher never does that (qkvV), and the kernel traps if it did.
template <int T, int TV, bool EXT>
__device__ __forceinline__ void qkv_rope2(const long long *res, long long *res_next, const unsigned *poison,
                                          const float *norm_w, float eps, int k, const qkv_w &w, const float *bias,
                                          int n_head, int n_kv_head, int head_dim, const float *rope_cs, int rope_dim,
                                          int neox, const float *temp, const int *pos_ptr, float *q_out,
                                          kv_t *k_cache, kv_t *v_cache, int ctx_max, const unsigned *x8) {
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
	                    const int *pos_ptr, float *q_out, kv_t *k_cache, kv_t *v_cache, int ctx_max,             \
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
#define QKV_ROPE_TYPED(name, T, MX) QKV_ROPE_R(name##_r2, T, 2, false) QKV_ROPE_R(ext_##name##_r2, T, 2, true)
FOR_EACH_TYPED_MIX(QKV_ROPE_TYPED)
// qkv_rope(_ext)_<family>_v<V family>_r2: Q and K of one typed family, V
// of another (qkv_rope2), for each pair llama-quantize writes for dense
// models (package quant/mix, llama-quant.cpp's attn_v rules): Q4_K_M and
// Q5_K_M give V Q6_K in a third to a half of the layers, Q4_K_S Q5_K in
// the first four; Q3_K_M gives it Q5_K or Q4_K, Q2_K Q4_K (Q3_K below
// four query heads a KV head, Q5_K at 70B), IQ4_NL and IQ4_XS Q5_K. kernelset.go's
// typedQuants lists the same pairs.
#define QKV_ROPE_V(name, T, TV)                                                                                    \
	QKV_ENTRY(name##_r2, qkv_rope2, T COMMA TV COMMA false) QKV_ENTRY(ext_##name##_r2, qkv_rope2, T COMMA TV COMMA true)
QKV_ROPE_V(mixq4k_vq6k, WT_MIX_Q4K, WT_MIX_Q6K)
QKV_ROPE_V(mixq5k_vq6k, WT_MIX_Q5K, WT_MIX_Q6K)
QKV_ROPE_V(mixq4k_vq5k, WT_MIX_Q4K, WT_MIX_Q5K)
QKV_ROPE_V(mixq3k_vq5k, WT_MIX_Q3K, WT_MIX_Q5K)
QKV_ROPE_V(mixq3k_vq4k, WT_MIX_Q3K, WT_MIX_Q4K)
QKV_ROPE_V(mixq2k_vq4k, WT_MIX_Q2K, WT_MIX_Q4K)
QKV_ROPE_V(mixq2k_vq3k, WT_MIX_Q2K, WT_MIX_Q3K)
QKV_ROPE_V(mixq2k_vq5k, WT_MIX_Q2K, WT_MIX_Q5K)
QKV_ROPE_V(mixiq4nl_vq5k, WT_MIX_IQ4NL, WT_MIX_Q5K)
QKV_ROPE_V(mixiq4xs_vq5k, WT_MIX_IQ4XS, WT_MIX_Q5K)

// qkv_rope_xf_<type>: qkv_rope for F16 and BF16 rows on wide models, on
// act_f32's normed row (xf): the staged kernel holds a lane's 32-element
// blocks and stages the residual stream in every block (Llama-8B shape,
// F16: 164 registers a thread, 2.1 TB/s). A block of QKV_XF_WARPS warps a
// rotation pair: warp w takes the steps w, w+4, … of 256 elements of both
// rows (weights.cuh's hrow), the first P before the PDL wait, and the
// warps' sums meet in shared memory, where thread 0 scales, biases,
// rotates and stores the pair as qkv_rope does. The block's variations
// at run time: norm = 0 (no pre-norm: the row unscaled), temp (the
// attention temperature; null: none).
#define QKV_XF_WARPS 4

template <int T, int P>
__device__ __forceinline__ void qkv_xf(const float *xf, long long *res_next, const unsigned *poison, int norm,
                                       float eps, int k, const qkv_w &w, const float *bias, int head_dim,
                                       const float *rope_cs, int rope_dim, int neox, const float *temp,
                                       const int *pos_ptr, float *q_out, kv_t *k_cache, kv_t *v_cache,
                                       int ctx_max) {
	const int p = blockIdx.x, wi = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int half = head_dim >> 1, rhalf = rope_dim >> 1, pairs = (w.n_head + 2 * w.n_kv_head) * half;
	const int nb = (k + 31) >> 5, n = 32 * nb;
	int h = p / half, a = 0, b = 0;
	pair_rows(p % half, rhalf, rope_dim, neox, a, b);
	const u8 *q = w.q;
	int hm = h; // the head within its matrix
	if (h >= w.n_head + w.n_kv_head) {
		q = w.vq;
		hm -= w.n_head + w.n_kv_head;
	} else if (h >= w.n_head) {
		q = w.kq;
		hm -= w.n_head;
	}
	const long ra = ((long)hm * head_dim + a) * n, rb = ((long)hm * head_dim + b) * n;
	uint4 wa[P], wb[P];
	if (p < pairs) {
#pragma unroll
		for (int i = 0; i < P; i++) {
			const int e = 256 * (wi + QKV_XF_WARPS * i) + 8 * lane;
			if (e < n) {
				wa[i] = hrow<T>::load(q, ra + e);
				wb[i] = hrow<T>::load(q, rb + e);
			}
		}
	}
	pdl_wait_and_release();
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < k; i += gridDim.x * blockDim.x) res_next[i] = 0;
	if (p >= pairs) return; // the whole block
	const xfrow xr{xf, nb};
	float s0 = 0.f, s1 = 0.f;
#pragma unroll
	for (int i = 0; i < P; i++) {
		const int e = 256 * (wi + QKV_XF_WARPS * i) + 8 * lane;
		if (e < n) {
			float4 x0, x1;
			xr.at(e, x0, x1);
			s0 += hrow<T>::dot(wa[i], x0, x1);
			s1 += hrow<T>::dot(wb[i], x0, x1);
		}
	}
	for (int s = wi + QKV_XF_WARPS * P; 256 * s < n; s += QKV_XF_WARPS) { // rows wider than 256·4·P
		const int e = 256 * s + 8 * lane;
		if (e < n) {
			float4 x0, x1;
			xr.at(e, x0, x1);
			s0 += hrow<T>::dot(hrow<T>::load(q, ra + e), x0, x1);
			s1 += hrow<T>::dot(hrow<T>::load(q, rb + e), x0, x1);
		}
	}
	s0 = warp_sum(s0);
	s1 = warp_sum(s1);
	__shared__ float part[2][QKV_XF_WARPS];
	if (lane == 0) {
		part[0][wi] = s0;
		part[1][wi] = s1;
	}
	__syncthreads();
	if (wi != 0) return;
	const float ss = norm ? xr.ss() : 0.f; // the whole warp
	if (lane != 0) return;
	float v0 = 0.f, v1 = 0.f;
#pragma unroll
	for (int i = 0; i < QKV_XF_WARPS; i++) {
		v0 += part[0][i];
		v1 += part[1][i];
	}
	const float scale = *poison ? __int_as_float(0x7fc00000) : norm ? rms_factor(ss, k, eps) : 1.f;
	v0 *= scale;
	v1 *= scale;
	if (bias) {
		v0 += bias[(long)h * head_dim + a];
		v1 += bias[(long)h * head_dim + b];
	}
	const int pos = *pos_ptr;
	float t0 = v0, t1 = v1;
	if (h < w.n_head + w.n_kv_head && p % half < rhalf) {
		const float *cs = rope_cs + 2 * ((long)pos * rhalf + p % half);
		t0 = v0 * cs[0] - v1 * cs[1];
		t1 = v0 * cs[1] + v1 * cs[0];
	}
	if (h < w.n_head) {
		const float tq = temp ? temp[pos] : 1.f;
		q_out[(long)h * head_dim + a] = t0 * tq;
		q_out[(long)h * head_dim + b] = t1 * tq;
	} else if (h < w.n_head + w.n_kv_head && !k_cache) { // staged for qk_norm, after the queries
		q_out[(long)h * head_dim + a] = t0;
		q_out[(long)h * head_dim + b] = t1;
	} else {
		kv_t *dst = (h >= w.n_head + w.n_kv_head ? v_cache : k_cache) + ((long)hm * ctx_max + pos) * head_dim;
		kv_put(dst + a, t0);
		kv_put(dst + b, t1);
	}
}

#define QKV_XF(name, T)                                                                                            \
	extern "C" __global__ void __launch_bounds__(32 * QKV_XF_WARPS)                                                \
	    qkv_rope_xf_##name(const float *xf, long long *res_next, const unsigned *poison, int norm, float eps, int k, \
	                       const u8 *wq, const u8 *wkq, const u8 *wvq, const float *bias, int n_head, int n_kv_head, \
	                       int head_dim, const float *rope_cs, int rope_dim, int neox, const float *temp,           \
	                       const int *pos_ptr, float *q_out, kv_t *k_cache, kv_t *v_cache, int ctx_max) {         \
		const qkv_w w = {wq, wkq, wvq, nullptr, nullptr, nullptr, n_head, n_kv_head};                              \
		qkv_xf<T, 4>(xf, res_next, poison, norm, eps, k, w, bias, head_dim, rope_cs, rope_dim, neox, temp, pos_ptr, \
		             q_out, k_cache, v_cache, ctx_max);                                                             \
	}
QKV_XF(f16, WT_F16)
QKV_XF(bf16, WT_BF16)
