// matvec_add: out = res + W·x for one token, W rows × n, out and res the
// fixed-point residual stream (common.cuh; out zeroed by qkv_rope): the FFN's
// down projection for wide models, after ffn.cu's gate/up half has written
// x = SiLU(gate·n)·(up·n).
//
// Row-parallel: a warp takes R rows and lane l the 32-element blocks l,
// l+32, … of each, C of them loaded before any is multiplied, so that a
// warp has R·C·32 blocks in flight (the rows are long: 8192 and more
// elements, where one block a lane at a time would leave the loads
// latency-bound). Each element of out has one writer: no sum over blocks,
// the same bits in any order. The first chunk's weights are read before
// the PDL wait (the weights never depend on the kernel before).
#include "decode.cuh"

// mva_shape is the rows a warp takes and the blocks a lane loads ahead,
// by layout: about 40-80 registers of weights.
template <int T> struct mva_shape {
	static constexpr int R = T == WT_F32 || T == WT_F16 || T == WT_BF16 ? 1 : 2;
	static constexpr int C = T == WT_Q4_0 ? 4 : 2;
};

template <int T>
__device__ __forceinline__ void matvec_add(const float *x, int n, const u8 *wq, const f16 *wd, int rows,
                                           const long long *res, long long *out, unsigned *poison) {
	constexpr int R = mva_shape<T>::R, C = mva_shape<T>::C;
	const int lane = threadIdx.x & 31, nb = (n + 31) >> 5;
	wblk<T> w[R][C];
	auto load = [&](int grp, int base) {
#pragma unroll
		for (int i = 0; i < R; i++) {
			const int r = grp * R + i;
#pragma unroll
			for (int c = 0; c < C; c++) {
				const int b = base + lane + 32 * c;
				if (r < rows && b < nb) wload<T>(w[i][c], wq, wd, (long)r * nb + b);
			}
		}
	};
	int grp = grid_warp();
	load(grp, 0);
	pdl_wait_and_release();
	for (bool first = true; grp * R < rows; grp += grid_warps()) { // warp-uniform
		float acc[R];
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] = 0.f;
		for (int base = 0; base < nb; base += 32 * C, first = false) {
			if (!first) load(grp, base);
			xblk xb[C];
			float ss = 0.f;
#pragma unroll
			for (int c = 0; c < C; c++)
				if (base + lane + 32 * c < nb) xload<32>(xb[c], x, nullptr, base + lane + 32 * c, n, ss);
#pragma unroll
			for (int i = 0; i < R; i++)
#pragma unroll
				for (int c = 0; c < C; c++)
					if (grp * R + i < rows && base + lane + 32 * c < nb) acc[i] += wdot<T>(w[i][c], xb[c]);
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
			for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
		}
#pragma unroll
		for (int i = 0; i < R; i++) {
			const int r = grp * R + i;
			if (lane == i && r < rows) res_add(out + r, acc[i], res[r], poison);
		}
	}
}

#define MATVEC_ADD(name, T)                                                                                        \
	extern "C" __global__ void __launch_bounds__(128)                                                              \
	    matvec_add_##name(const float *x, int n, const u8 *wq, const f16 *wd, int rows, const long long *res,       \
	                      long long *out, unsigned *poison) {                                                      \
		matvec_add<T>(x, n, wq, wd, rows, res, out, poison);                                                       \
	}
FOR_EACH_WEIGHT_TYPE(MATVEC_ADD)
