// kv_copy: moves positions [from, to) of one sequence's keys and values, one
// layer, between the single-sequence cache (ctx_rows rows a KV head, a
// position a row) and the batched steps' KV pool (pool_rows rows a KV head,
// position p in row table[p/bs]·bs + p%bs): into the pool (to_pool 1) when
// a sequence that ran alone on the decode graphs joins a batch, out of it
// (0) when a sequence goes on alone. Four elements a thread; head_dim is a
// multiple of 4 (every batched model's is: prefill_attention's dimensions).
#include "kv.cuh"

extern "C" __global__ void __launch_bounds__(256)
    kv_copy(kv_t *cache_k, kv_t *cache_v, int ctx_rows, kv_t *pool_k, kv_t *pool_v, int pool_rows,
            const int *table, int bs, int n_kv, int head_dim, int from, int to, int to_pool) {
	pdl_wait_and_release();
	int per = head_dim / 4;
	long n = (long)(to - from) * n_kv * per;
	for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
		int c = (int)(i % per);
		long r = i / per;
		int h = (int)(r % n_kv), pos = from + (int)(r / n_kv);
		long crow = (long)h * ctx_rows + pos;
		long prow = (long)h * pool_rows + (long)table[pos / bs] * bs + pos % bs;
		kv4_t *ck = (kv4_t *)(cache_k + crow * head_dim) + c, *cv = (kv4_t *)(cache_v + crow * head_dim) + c;
		kv4_t *pk = (kv4_t *)(pool_k + prow * head_dim) + c, *pv = (kv4_t *)(pool_v + prow * head_dim) + c;
		if (to_pool) {
			*pk = *ck;
			*pv = *cv;
		} else {
			*ck = *pk;
			*cv = *pv;
		}
	}
}
