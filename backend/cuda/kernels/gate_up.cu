// gate_up: the feed-forward block's first half. RMSNorm of the residual
// stream (once per block), then for each hidden unit i one warp computes
// gate[i]·x and up[i]·x and writes SiLU(gate)*up, so neither projection is
// ever stored.
#include "common.cuh"

template <int T>
__device__ __forceinline__ void gate_up(const float *x, const float *norm_w, float eps, int k, const u8 *gq,
                                        const f16 *gd, const u8 *uq, const f16 *ud, int rows, float *h) {
	extern __shared__ float xs[];
	__shared__ float scratch[32];
	int nb = (k + 31) >> 5;
	if (grid_warp() < rows) {
		prefetch_row<T>(gq, gd, grid_warp(), nb);
		prefetch_row<T>(uq, ud, grid_warp(), nb);
	}
	pdl_wait_and_release();
	float scale = rms_factor(xs_load(xs, x, norm_w, k, nb, scratch), k, eps);
	for (int i = grid_warp(); i < rows; i += grid_warps()) {
		float g, u;
		dot_rows2<T>(gq, gd, i, uq, ud, i, true, nb, xs, g, u);
		g *= scale;
		u *= scale;
		if ((threadIdx.x & 31) == 0) h[i] = g / (1.f + expf(-g)) * u;
	}
}

#define GATE_UP(name, T)                                                                                           \
	extern "C" __global__ void gate_up_##name(const float *x, const float *norm_w, float eps, int k, const u8 *gq,  \
	                                          const f16 *gd, const u8 *uq, const f16 *ud, int rows, float *h) {      \
		gate_up<T>(x, norm_w, eps, k, gq, gd, uq, ud, rows, h);                                                    \
	}
FOR_EACH_WEIGHT_TYPE(GATE_UP)
