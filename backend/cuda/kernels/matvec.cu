// matvec: y = W·(norm(x)) or y (+)= W·x for one token.
//   matvec_*      y[r] = W[r]·in            (norm_w null: plain input)
//                 y[r] = W[r]·rmsnorm(in)   (norm_w set: final norm + output head)
//   matvec_add_*  y[r] += W[r]·in           (FFN down projection + residual)
// Warps take adjacent row pairs across the grid; the input is normalized once
// per block, never per row.
#include "common.cuh"

template <int T>
__device__ __forceinline__ void matvec(const float *in, const float *norm_w, float eps, int k, const u8 *wq,
                                       const f16 *wd, int rows, float *y, bool add) {
	extern __shared__ float xs[];
	__shared__ float scratch[32];
	int nb = (k + 31) >> 5;
	if (2 * grid_warp() < rows) prefetch_row<T>(wq, wd, 2 * grid_warp(), nb);
	if (2 * grid_warp() + 1 < rows) prefetch_row<T>(wq, wd, 2 * grid_warp() + 1, nb);
	pdl_wait_and_release();
	float ss = xs_load(xs, in, norm_w, k, nb, scratch);
	float scale = norm_w ? rms_factor(ss, k, eps) : 1.f;
	int lane = threadIdx.x & 31;
	for (int p = grid_warp(); 2 * p < rows; p += grid_warps()) {
		long r0 = 2 * p, r1 = r0 + 1;
		bool two = r1 < rows;
		float v0, v1;
		dot_rows2<T>(wq, wd, r0, wq, wd, r1, two, nb, xs, v0, v1);
		v0 *= scale;
		v1 *= scale;
		if (lane == 0) {
			if (add) {
				y[r0] += v0;
				if (two) y[r1] += v1;
			} else {
				y[r0] = v0;
				if (two) y[r1] = v1;
			}
		}
	}
}

#define MATVEC(name, T)                                                                                            \
	extern "C" __global__ void matvec_##name(const float *in, const float *norm_w, float eps, int k, const u8 *wq,  \
	                                         const f16 *wd, int rows, float *y) {                                    \
		matvec<T>(in, norm_w, eps, k, wq, wd, rows, y, false);                                                     \
	}                                                                                                              \
	extern "C" __global__ void matvec_add_##name(const float *in, int k, const u8 *wq, const f16 *wd, int rows,    \
	                                             float *y) {                                                       \
		matvec<T>(in, nullptr, 0.f, k, wq, wd, rows, y, true);                                                     \
	}
FOR_EACH_WEIGHT_TYPE(MATVEC)
