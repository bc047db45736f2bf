// gate_up: the feed-forward block's first half. RMSNorm of the residual
// stream, then for each hidden unit i, SiLU(gate[i]·x)·(up[i]·x), so neither
// projection is ever stored. A warp takes R adjacent units (decode.cuh's
// rows per warp): their gate rows and their up rows are its 2R rows.
#include "decode.cuh"

template <int T, int R> __device__ __forceinline__ void gate_up_rows(mv<T, R, 1> &m, int grp, int rows) {
	constexpr int U = R / 2;
#pragma unroll
	for (int i = 0; i < U; i++) {
		long r = (long)grp * U + i;
		m.row[i] = m.row[U + i] = r < rows ? r : -1;
	}
}

template <int T, int U>
__device__ __forceinline__ void gate_up(const float *x, const float *norm_w, float eps, int k, const u8 *gq,
                                        const f16 *gd, const u8 *uq, const f16 *ud, int rows, float *h) {
	constexpr int R = 2 * U;
	int nb = (k + 31) >> 5, lane = threadIdx.x & 31;
	mv<T, R, 1> m;
#pragma unroll
	for (int i = 0; i < U; i++) {
		m.q[i] = gq;
		m.d[i] = gd;
		m.q[U + i] = uq;
		m.d[U + i] = ud;
	}
	int grp = grid_warp();
	gate_up_rows<T, R>(m, grp, rows);
	m.preload(nb);
	pdl_wait_and_release();
	for (bool first = true; (long)grp * U < rows; grp += grid_warps(), first = false) {
		if (!first) {
			gate_up_rows<T, R>(m, grp, rows);
			m.preload(nb);
		}
		float acc[R], ss;
		m.dot(nb, k, x, norm_w, acc, ss);
		float scale = rms_factor(ss, k, eps);
#pragma unroll
		for (int i = 0; i < U; i++) {
			if (lane == i && m.row[i] >= 0) {
				float g = acc[i] * scale, u = acc[U + i] * scale;
				h[m.row[i]] = g / (1.f + expf(-g)) * u;
			}
		}
	}
}

#define GATE_UP_U(name, T, U)                                                                                      \
	extern "C" __global__ void __launch_bounds__(128) gate_up_##name(const float *x, const float *norm_w, float eps, \
	                                                                 int k, const u8 *gq, const f16 *gd,           \
	                                                                 const u8 *uq, const f16 *ud, int rows,        \
	                                                                 float *h) {                                    \
		gate_up<T, U>(x, norm_w, eps, k, gq, gd, uq, ud, rows, h);                                                 \
	}
// gate_up_<type> with decode.cuh's rows per warp as units, gate_up_<type>_r2
// and _r1 with two and one.
#define GATE_UP(name, T) GATE_UP_U(name, T, mv_shape<T>::R) GATE_UP_U(name##_r2, T, 2) GATE_UP_U(name##_r1, T, 1)
FOR_EACH_WEIGHT_TYPE(GATE_UP)
