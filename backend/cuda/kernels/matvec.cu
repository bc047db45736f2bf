// matvec: y = W·(norm(x)) or y += W·x for one token.
//   matvec_*      y[r] = W[r]·in            (norm_w null: plain input)
//                 y[r] = W[r]·rmsnorm(in)   (norm_w set)
//   matvec_add_*  y[r] += W[r]·in           (O-proj and FFN down + residual)
// Each warp takes R adjacent rows (decode.cuh); every warp computes the
// norm's statistic itself from the activations it loads anyway.
#include "decode.cuh"

template <int T, int R>
__device__ __forceinline__ void matvec(const float *in, const float *norm_w, float eps, int k, const u8 *wq,
                                       const f16 *wd, int rows, float *y, bool add) {
	int nb = (k + 31) >> 5, lane = threadIdx.x & 31;
	mv<T, R, mv_shape<T>::PRE> m;
	int grp = grid_warp();
#pragma unroll
	for (int i = 0; i < R; i++) {
		long r = (long)grp * R + i;
		m.q[i] = wq;
		m.d[i] = wd;
		m.row[i] = r < rows ? r : -1;
	}
	m.preload(nb);
	pdl_wait_and_release();
	for (bool first = true; (long)grp * R < rows; grp += grid_warps(), first = false) {
		if (!first) {
#pragma unroll
			for (int i = 0; i < R; i++) {
				long r = (long)grp * R + i;
				m.row[i] = r < rows ? r : -1;
			}
			m.preload(nb);
		}
		// The residual is read alongside the activations, not after.
		long mine = (long)grp * R + lane;
		float y0 = add && lane < R && mine < rows ? y[mine] : 0.f;
		float acc[R], ss;
		m.dot(nb, k, in, norm_w, acc, ss);
		float scale = norm_w ? rms_factor(ss, k, eps) : 1.f;
#pragma unroll
		for (int i = 0; i < R; i++)
			if (lane == i && m.row[i] >= 0) y[m.row[i]] = y0 + acc[i] * scale;
	}
}

#define MATVEC_R(name, T, R)                                                                                       \
	extern "C" __global__ void __launch_bounds__(128) matvec_##name(const float *in, const float *norm_w, float eps, \
	                                                                int k, const u8 *wq, const f16 *wd, int rows,   \
	                                                                float *y) {                                     \
		matvec<T, R>(in, norm_w, eps, k, wq, wd, rows, y, false);                                                  \
	}                                                                                                              \
	extern "C" __global__ void __launch_bounds__(128) matvec_add_##name(const float *in, int k, const u8 *wq,      \
	                                                                    const f16 *wd, int rows, float *y) {        \
		matvec<T, R>(in, nullptr, 0.f, k, wq, wd, rows, y, true);                                                  \
	}
// matvec_<type> with decode.cuh's rows per warp, matvec_<type>_r2 and _r1
// with two and one.
#define MATVEC(name, T) MATVEC_R(name, T, mv_shape<T>::R) MATVEC_R(name##_r2, T, 2) MATVEC_R(name##_r1, T, 1)
FOR_EACH_WEIGHT_TYPE(MATVEC)
