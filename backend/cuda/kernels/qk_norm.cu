// qk_norm: the query and key RMS norms of one token, then RoPE and the
// attention temperature (Qwen3, Gemma 3: one head_dim weight shared by the
// heads; OLMo 2: the whole projection under one norm, a weight per
// element). qkv_rope has written the projections (biases added, not
// rotated) to q: the queries, then the keys (staged there in f32, so that
// the f16 cache rounds them once, after the norm, as the prefill and the
// CPU engine do). This kernel normalizes, rotates and scales them, the
// queries in place and the keys into the cache at the step's position,
// before attention reads them.
//
// A block takes one norm group: a head (per-head norms: n_head query
// groups, then n_kv key groups) or all the query heads, or all the key
// heads (whole-projection norms: two groups, thousands of elements, which
// a warp alone walks too slowly: 38 µs a layer at Llama-1B's width on an
// H200). It sums the squares of its elements, then walks the rotation
// pairs (rope.cuh), each thread reading both elements of a pair,
// normalizing, rotating and writing them: no element is read by one
// thread and written by another after the sum.
#include "rope.cuh"
#include "kv.cuh"

// qk_src is the index in q of element e of group g: the query heads
// ([n_head][head_dim]), then the key heads qkv_rope staged after them
// ([n_kv][head_dim]); qk_set writes its result: to q for a query, to the
// cache row at pos ([n_kv][ctx_max][head_dim]) for a key.
__device__ __forceinline__ long qk_src(bool is_q, int n_head, int h0, int e, int head_dim) {
	return (long)((is_q ? 0 : n_head) + h0) * head_dim + e;
}
__device__ __forceinline__ void qk_set(float *q, kv_t *k_cache, bool is_q, int h0, int e, int head_dim, int ctx_max,
                                       int pos, float v) {
	if (is_q) {
		q[(long)h0 * head_dim + e] = v;
	} else {
		int h = h0 + e / head_dim, d = e % head_dim;
		kv_put(k_cache + ((long)h * ctx_max + pos) * head_dim + d, v);
	}
}

extern "C" __global__ void __launch_bounds__(1024)
    qk_norm(float *q, kv_t *k_cache, const int *pos_ptr, int ctx_max, int n_head, int n_kv, int head_dim, int full,
            const float *qw, const float *kw, float eps, const float *rope_cs, int rope_dim, int neox,
            const float *temp) {
	__shared__ float scratch[32];
	pdl_wait_and_release();
	const int g = blockIdx.x;
	const bool is_q = full ? g == 0 : g < n_head;
	const int heads = full ? (is_q ? n_head : n_kv) : 1;
	const int h0 = full ? 0 : (is_q ? g : g - n_head);
	const int n = heads * head_dim, pos = *pos_ptr;
	const float *w = is_q ? qw : kw;
	float ss = 0.f;
	for (int e = threadIdx.x; e < n; e += blockDim.x) {
		float v = q[qk_src(is_q, n_head, h0, e, head_dim)];
		ss += v * v;
	}
	const float f = rms_factor(block_sum(ss, scratch), n, eps);
	const float tq = is_q && temp ? temp[pos] : 1.f;
	const int half = head_dim >> 1, rhalf = rope_dim >> 1;
	for (int p = threadIdx.x; p < heads * half; p += blockDim.x) {
		int hh = p / half, i = p % half, a, b;
		pair_rows(i, rhalf, rope_dim, neox, a, b);
		int ea = hh * head_dim + a, eb = hh * head_dim + b;
		float v0 = q[qk_src(is_q, n_head, h0, ea, head_dim)] * f * w[full ? ea : a];
		float v1 = q[qk_src(is_q, n_head, h0, eb, head_dim)] * f * w[full ? eb : b];
		if (i < rhalf) {
			const float *cs = rope_cs + 2 * ((long)pos * rhalf + i);
			float c = cs[0], s = cs[1];
			float r0 = v0 * c - v1 * s, r1 = v0 * s + v1 * c;
			v0 = r0;
			v1 = r1;
		}
		qk_set(q, k_cache, is_q, h0, ea, head_dim, ctx_max, pos, v0 * tq);
		qk_set(q, k_cache, is_q, h0, eb, head_dim, ctx_max, pos, v1 * tq);
	}
}
