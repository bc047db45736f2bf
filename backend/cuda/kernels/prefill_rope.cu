// prefill_rope: the attention input for m prompt tokens at positions
// pos0..pos0+m-1, from the stacked Q, K, V projection (gemm store, f32
// [m][(n_head+2·n_kv)·head_dim]): optional biases (from head bias_h0 on:
// prefill_qk_norm has added Q's and K's when the model normalizes them),
// RoPE on Q and K with the
// host's float64 (cos, sin) table, Q rounded to f16 for prefill_attention,
// and the K and V rows written into the KV cache (f16, kv.cuh) at their positions.
// One thread per rotated pair, paired as qkv_rope pairs them: adjacent
// elements (2i, 2i+1) for llama's RoPE, (i, i+rope_dim/2) for NeoX; elements
// past rope_dim are paired adjacently and left unrotated. The queries are
// then multiplied by the attention temperature of their position (a
// table, rope.cuh).
//
// A batched step of many sequences (pos_of set) gives each token its own
// position and KV cache row (row_of: the row its sequence's block table
// maps the position to); otherwise token t is at position and row pos0+t.
#include "prefill.cuh"
#include "rope.cuh"
#include "kv.cuh"

extern "C" __global__ void prefill_rope(const float *qkv, int m, const float *bias, int bias_h0, int n_head, int n_kv,
                                        int head_dim, const float *rope_cs, int rope_dim, int neox, const float *temp,
                                        int pos0, f16 *q_out, kv_t *k_cache, kv_t *v_cache,
                                        int ctx_max, const int *pos_of, const int *row_of) {
	pdl_wait_and_release();
	int half = head_dim >> 1, rhalf = rope_dim >> 1;
	int heads = n_head + 2 * n_kv;
	int pairs = heads * half;
	long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (idx >= (long)m * pairs) return;
	int t = (int)(idx / pairs), p = (int)(idx % pairs);
	int h = p / half, i = p % half;
	int a, b;
	pair_rows(i, rhalf, rope_dim, neox, a, b);
	long c0 = (long)h * head_dim + a, c1 = (long)h * head_dim + b;
	const float *row = qkv + (long)t * heads * head_dim;
	float v0 = row[c0], v1 = row[c1];
	if (bias && h >= bias_h0) {
		v0 += bias[c0];
		v1 += bias[c1];
	}
	int pos = pos_of ? pos_of[t] : pos0 + t;
	bool is_v = h >= n_head + n_kv;
	if (!is_v && i < rhalf) {
		const float *cs = rope_cs + 2 * ((long)pos * rhalf + i);
		float c = cs[0], s = cs[1];
		float r0 = v0 * c - v1 * s, r1 = v0 * s + v1 * c;
		v0 = r0;
		v1 = r1;
	}
	if (h < n_head) {
		f16 *qr = q_out + (long)t * n_head * head_dim;
		float tq = temp ? temp[pos] : 1.f;
		qr[c0] = to_half(v0 * tq);
		qr[c1] = to_half(v1 * tq);
	} else {
		int kh = is_v ? h - n_head - n_kv : h - n_head;
		int row = row_of ? row_of[t] : pos;
		kv_t *dst = (is_v ? v_cache : k_cache) + ((long)kh * ctx_max + row) * head_dim;
		kv_put(dst + a, v0);
		kv_put(dst + b, v1);
	}
}
