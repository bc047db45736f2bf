// argmax: greedy sampling on the device. One block scans the logits and
// writes the index of the largest, the lowest index among equals (the CPU
// sample.Argmax rule), so only 4 bytes go back to the host. NaN never wins.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(1024) argmax(const float *logits, int n, int *out) {
	__shared__ float sv[32];
	__shared__ int si[32];
	pdl_wait_and_release();
	float v = -INFINITY;
	int i = 0x7fffffff;
	for (int j = threadIdx.x; j < n; j += blockDim.x) better(v, i, logits[j], j);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	if (lane == 0) {
		sv[w] = v;
		si[w] = i;
	}
	__syncthreads();
	if (w == 0) {
		v = lane < nw ? sv[lane] : -INFINITY;
		i = lane < nw ? si[lane] : 0x7fffffff;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
		if (lane == 0) *out = i == 0x7fffffff ? 0 : i;
	}
}
