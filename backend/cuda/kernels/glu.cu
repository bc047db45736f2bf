// glu: the split FFN's gate/up half for F16 and BF16 rows on wide models,
// h[u] = act(gate_u·n)·(up_u·n) with n act_f32's normed row (xf);
// matvec_add.cu adds W_down·h after. It takes the place of ffn.cu's kernel
// with h_out for these layouts: that one stages the residual stream and
// the norm's weights in every block and holds a lane's 32-element blocks
// (Llama-8B shape, F16: 102 registers a thread, 16 warps an SM).
//
// A block of 4 warps a unit: warp w takes the steps w, w+4, … of 256
// elements of both rows (lane l the elements 8l … 8l+7 of a step:
// weights.cuh's hrow), the first P before the PDL wait, and the warps'
// sums meet in shared memory. norm = 0: no pre-norm (the row as it is,
// unscaled). A set poison word makes h NaN (the poison rule).
#include "decode.cuh"

#define GLU_WARPS 4

template <int T, int P>
__device__ __forceinline__ void glu_unit(const float *xf, int k, const u8 *gq, const u8 *uq, int hidden, int act,
                                         int norm, float eps, const unsigned *poison, float *h) {
	const int u = blockIdx.x, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	if (u >= hidden) return; // the whole block
	const int nb = (k + 31) >> 5, n = 32 * nb;
	const long row0 = (long)u * n;
	uint4 g[P], up[P];
#pragma unroll
	for (int p = 0; p < P; p++) {
		const int e = 256 * (w + GLU_WARPS * p) + 8 * lane;
		if (e < n) {
			g[p] = hrow<T>::load(gq, row0 + e);
			up[p] = hrow<T>::load(uq, row0 + e);
		}
	}
	pdl_wait_and_release();
	const xfrow xr{xf, nb};
	float ag = 0.f, au = 0.f;
#pragma unroll
	for (int p = 0; p < P; p++) {
		const int e = 256 * (w + GLU_WARPS * p) + 8 * lane;
		if (e < n) {
			float4 a, b;
			xr.at(e, a, b);
			ag += hrow<T>::dot(g[p], a, b);
			au += hrow<T>::dot(up[p], a, b);
		}
	}
	for (int s = w + GLU_WARPS * P; 256 * s < n; s += GLU_WARPS) { // rows wider than 256·4·P
		const int e = 256 * s + 8 * lane;
		if (e < n) {
			float4 a, b;
			xr.at(e, a, b);
			ag += hrow<T>::dot(hrow<T>::load(gq, row0 + e), a, b);
			au += hrow<T>::dot(hrow<T>::load(uq, row0 + e), a, b);
		}
	}
	ag = warp_sum(ag);
	au = warp_sum(au);
	__shared__ float part[2][GLU_WARPS];
	if (lane == 0) {
		part[0][w] = ag;
		part[1][w] = au;
	}
	__syncthreads();
	if (w != 0) return;
	const float ss = norm ? xr.ss() : 0.f; // the whole warp
	if (lane == 0) {
		float gs = 0.f, us = 0.f;
#pragma unroll
		for (int i = 0; i < GLU_WARPS; i++) {
			gs += part[0][i];
			us += part[1][i];
		}
		float scale = norm ? rms_factor(ss, k, eps) : 1.f;
		if (*poison) scale = __int_as_float(0x7fc00000);
		h[u] = glu(gs * scale, us * scale, act);
	}
}

// glu_<type>: a block of GLU_WARPS warps a hidden unit; all of a 4,096-wide
// row's steps in registers before the wait.
#define GLU(name, T)                                                                                               \
	extern "C" __global__ void __launch_bounds__(32 * GLU_WARPS)                                                   \
	    glu_##name(const float *xf, int k, const u8 *gq, const u8 *uq, int hidden, int act, int norm, float eps,   \
	               const unsigned *poison, float *h) {                                                             \
		glu_unit<T, 4>(xf, k, gq, uq, hidden, act, norm, eps, poison, h);                                           \
	}
GLU(f16, WT_F16)
GLU(bf16, WT_BF16)
