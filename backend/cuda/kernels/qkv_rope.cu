// qkv_rope: the attention block's input step for one token. RMSNorm of the
// residual stream (once per block), the Q, K and V projections as one matrix
// (rows: Q heads, then K heads, then V heads), optional biases, RoPE on Q and
// K, and the K/V rows appended to the cache at the current position.
//
// The rotation's cos and sin come from a table computed on the host in
// float64 (rope_cs[pos][i] = cos, sin of pos·θ_i), exactly as the CPU engine
// rounds them.
//
// Each warp computes the two rows that RoPE rotates together, so the
// rotation happens in registers: adjacent rows (2i, 2i+1) for llama's
// "normal" RoPE, rows (i, i+rope_dim/2) for NeoX. Rows past rope_dim are
// paired adjacently and left unrotated.
#include "common.cuh"

template <int T>
__device__ __forceinline__ void qkv_rope(const float *x, const float *norm_w, float eps, int k, const u8 *wq,
                                         const f16 *wd, const float *bias, int n_head, int n_kv_head, int head_dim,
                                         const float *rope_cs, int rope_dim, int neox, const int *pos_ptr, float *q_out,
                                         float *k_cache, float *v_cache, int ctx_max) {
	extern __shared__ float xs[];
	__shared__ float scratch[32];
	int nb = (k + 31) >> 5;
	int half = head_dim >> 1, rhalf = rope_dim >> 1;
	if (grid_warp() < (n_head + 2 * n_kv_head) * half) {
		int p = grid_warp(), h = p / half, i = p % half;
		prefetch_row<T>(wq, wd, (long)h * head_dim + (neox && i < rhalf ? i : 2 * i), nb);
	}
	pdl_wait_and_release();
	float scale = rms_factor(xs_load(xs, x, norm_w, k, nb, scratch), k, eps);
	int pos = *pos_ptr;
	int pairs = (n_head + 2 * n_kv_head) * half;
	int lane = threadIdx.x & 31;
	for (int p = grid_warp(); p < pairs; p += grid_warps()) {
		int h = p / half, i = p % half;
		int a, b;
		if (neox && i < rhalf) {
			a = i;
			b = i + rhalf;
		} else if (neox) {
			a = rope_dim + 2 * (i - rhalf);
			b = a + 1;
		} else {
			a = 2 * i;
			b = a + 1;
		}
		long r0 = (long)h * head_dim + a, r1 = (long)h * head_dim + b;
		float v0, v1;
		dot_rows2<T>(wq, wd, r0, wq, wd, r1, true, nb, xs, v0, v1);
		if (lane != 0) continue;
		v0 *= scale;
		v1 *= scale;
		if (bias) {
			v0 += bias[r0];
			v1 += bias[r1];
		}
		bool is_v = h >= n_head + n_kv_head;
		if (!is_v && i < rhalf) {
			const float *cs = rope_cs + 2 * ((long)pos * rhalf + i);
			float c = cs[0], s = cs[1];
			float t0 = v0 * c - v1 * s, t1 = v0 * s + v1 * c;
			v0 = t0;
			v1 = t1;
		}
		if (h < n_head) {
			q_out[r0] = v0;
			q_out[r1] = v1;
		} else {
			int kh = is_v ? h - n_head - n_kv_head : h - n_head;
			float *dst = (is_v ? v_cache : k_cache) + ((long)kh * ctx_max + pos) * head_dim;
			dst[a] = v0;
			dst[b] = v1;
		}
	}
}

#define QKV_ROPE(name, T)                                                                                          \
	extern "C" __global__ void qkv_rope_##name(const float *x, const float *norm_w, float eps, int k, const u8 *wq,  \
	                                           const f16 *wd, const float *bias, int n_head, int n_kv_head,          \
	                                           int head_dim, const float *rope_cs, int rope_dim, int neox,             \
	                                           const int *pos_ptr, float *q_out, float *k_cache, float *v_cache,     \
	                                           int ctx_max) {                                                        \
		qkv_rope<T>(x, norm_w, eps, k, wq, wd, bias, n_head, n_kv_head, head_dim, rope_cs, rope_dim, neox, pos_ptr, \
		            q_out, k_cache, v_cache, ctx_max);                                                             \
	}
FOR_EACH_WEIGHT_TYPE(QKV_ROPE)
