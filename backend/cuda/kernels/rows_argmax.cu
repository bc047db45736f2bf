// rows_argmax: the greedy token of each of rows logit rows (f32 [rows][n])
// of a batched step, after the model's logit multiplier (scale) and final
// soft-cap (cap, 0: none), which it writes back so that the host reads
// final logits for the rows it samples itself. One block per row; ties go
// to the lower index and NaN never wins (sample.Argmax's rule); a row of
// NaN alone gives -1.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(1024)
    rows_argmax(float *logits, int n, float scale, float cap, int *out) {
	__shared__ float sv[32];
	__shared__ int si[32];
	pdl_wait_and_release(); // the head's gemm may still be writing
	float *row = logits + (long)blockIdx.x * n;
	float best = -INFINITY;
	int bi = 0x7fffffff;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float v = row[i];
		if (scale != 1.f || cap > 0.f) {
			v = softcap(v * scale, cap);
			row[i] = v;
		}
		better(best, bi, v, i);
	}
	for (int o = 16; o > 0; o >>= 1) {
		float v2 = __shfl_xor_sync(0xffffffffu, best, o);
		int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
		better(best, bi, v2, i2);
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	if (lane == 0) {
		sv[w] = best;
		si[w] = bi;
	}
	__syncthreads();
	if (w == 0) {
		int nw = blockDim.x >> 5;
		best = lane < nw ? sv[lane] : -INFINITY;
		bi = lane < nw ? si[lane] : 0x7fffffff;
		for (int o = 16; o > 0; o >>= 1) {
			float v2 = __shfl_xor_sync(0xffffffffu, best, o);
			int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
			better(best, bi, v2, i2);
		}
		if (lane == 0) out[blockIdx.x] = bi == 0x7fffffff ? -1 : bi;
	}
}
