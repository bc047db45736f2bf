// matvec_add: out = res + W·x for one token, W rows × n, out and res the
// fixed-point residual stream (common.cuh; out zeroed by qkv_rope): the FFN's
// down projection for wide models, after ffn.cu's gate/up half has written
// x = SiLU(gate·n)·(up·n).
//
// A warp takes R rows and one chunk of their 32-element blocks: lane l
// the blocks base+l, base+l+32, … (C of them), all loaded before any is
// multiplied. Rows are cut into chunks of 32·C blocks and each (rows,
// chunk) pair is a warp of its own, so that a wide matrix is thousands of
// warps with one round of loads each, every one issued before the PDL wait
// (the weights never depend on the kernel before): with a warp per row
// group looping over its chunks, Llama-1B's 2048 × 8192 Q4_K down
// projection read at 0.4 TB/s (H200, 22.8 µs). The chunks of a row add
// their sums to out with the fixed-point atomics (the same bits in any
// order); chunk 0 carries res (when set: a post-normed branch has none).
// The product is scaled by rs, the model's residual multiplier.
#include "decode.cuh"

// mva_shape is the rows a warp takes and the blocks a lane loads ahead,
// by layout: about 40-80 registers of weights.
template <int T> struct mva_shape {
	static constexpr int R = T == WT_F32 || T == WT_F16 || T == WT_BF16 ? 1 : 2;
	static constexpr int C = T == WT_Q4_0 ? 4 : 2;
};

// matvec_add_h is matvec_add for F16 and BF16 rows (R = 1): the same
// warps, each a row and a chunk of S steps of 256 elements (32·C blocks),
// lane l reading elements 256s + 8l … +7 of each step (weights.cuh's
// hrow: 116 → ~50 registers a thread at C = 2). x past n is not read.
template <int T, int S>
__device__ __forceinline__ void matvec_add_h(const float *x, int n, const u8 *wq, int rows, float rs,
                                             const long long *res, long long *out, unsigned *poison) {
	const int lane = threadIdx.x & 31, nb = (n + 31) >> 5;
	const int chunks = (nb + S * 8 - 1) / (S * 8);
	const int item = grid_warp();
	if (item >= chunks * rows) return;
	const int r = item % rows, base = (item / rows) * 256 * S;
	const long row0 = (long)r * nb * 32;
	uint4 w[S];
#pragma unroll
	for (int s = 0; s < S; s++) {
		const int e = base + 256 * s + 8 * lane;
		if (e < 32 * nb) w[s] = hrow<T>::load(wq, row0 + e);
	}
	pdl_wait_and_release();
	float acc = 0.f;
#pragma unroll
	for (int s = 0; s < S; s++) {
		const int e = base + 256 * s + 8 * lane;
		if (e + 8 <= n) {
			const float4 *p = (const float4 *)(x + e);
			acc += hrow<T>::dot(w[s], p[0], p[1]);
		} else if (e < n) {
			float v[8];
#pragma unroll
			for (int j = 0; j < 8; j++) v[j] = e + j < n ? x[e + j] : 0.f;
			acc += hrow<T>::dot(w[s], make_float4(v[0], v[1], v[2], v[3]), make_float4(v[4], v[5], v[6], v[7]));
		}
	}
	acc = warp_sum(acc);
	if (lane == 0) res_add(out + r, acc * rs, base == 0 && res ? res[r] : 0, poison);
}

// Q8: x is int8 blocks (xblk8, 12 words each: the split FFN's h8,
// ffn.cu's h8_store), multiplied as the int8 decode kernels do
// (decode.cuh, xq8); a third of the float row's bytes a block.
template <int T, bool Q8>
__device__ __forceinline__ void matvec_add(const float *x, int n, const u8 *wq, const f16 *wd, int rows,
                                           float rs, const long long *res, long long *out, unsigned *poison) {
	constexpr int R = mva_shape<T>::R, C = mva_shape<T>::C;
	if constexpr (is_hrow<T>::v && !Q8) {
		matvec_add_h<T, 4 * C>(x, n, wq, rows, rs, res, out, poison);
		return;
	}
	const int lane = threadIdx.x & 31, nb = (n + 31) >> 5;
	const int chunks = (nb + 32 * C - 1) / (32 * C);
	const int groups = (rows + R - 1) / R;
	const int item = grid_warp(); // one (row group, chunk) a warp
	if (item >= chunks * groups) return;
	// The warps of a block take one chunk of consecutive row groups, so
	// that they read the same activations (from L1 after the first): with
	// a block's warps on the chunks of one row group instead, every warp
	// read its activations from L2, 3.5 times the weights' bytes at R = 2.
	const int grp = item % groups, base = (item / groups) * 32 * C;
	wblk<T> w[R][C];
#pragma unroll
	for (int i = 0; i < R; i++) {
		const int r = grp * R + i;
#pragma unroll
		for (int c = 0; c < C; c++) {
			const int b = base + lane + 32 * c;
			if (r < rows && b < nb) wload<T>(w[i][c], wq, wd, (long)r * nb + b);
		}
	}
	pdl_wait_and_release();
	float acc[R];
	if constexpr (Q8) {
		xblk8 xb[C];
#pragma unroll
		for (int c = 0; c < C; c++)
			if (base + lane + 32 * c < nb) x8ld(xb[c], (const unsigned *)x + 12 * (base + lane + 32 * c));
#pragma unroll
		for (int i = 0; i < R; i++) {
			acc[i] = 0.f;
#pragma unroll
			for (int c = 0; c < C; c++)
				if (grp * R + i < rows && base + lane + 32 * c < nb) acc[i] += wdot8<T>(w[i][c], xb[c]);
		}
	} else {
		xblk xb[C];
		float ss = 0.f;
#pragma unroll
		for (int c = 0; c < C; c++)
			if (base + lane + 32 * c < nb) xload<32>(xb[c], x, nullptr, base + lane + 32 * c, n, ss);
#pragma unroll
		for (int i = 0; i < R; i++) {
			acc[i] = 0.f;
#pragma unroll
			for (int c = 0; c < C; c++)
				if (grp * R + i < rows && base + lane + 32 * c < nb) acc[i] += wdot<T>(w[i][c], xb[c]);
		}
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
	}
#pragma unroll
	for (int i = 0; i < R; i++) {
		const int r = grp * R + i;
		if (lane == i && r < rows) res_add(out + r, acc[i] * rs, base == 0 && res ? res[r] : 0, poison);
	}
}

#define MATVEC_ADD(name, T)                                                                                        \
	extern "C" __global__ void __launch_bounds__(128)                                                              \
	    matvec_add_##name(const float *x, int n, const u8 *wq, const f16 *wd, int rows, float rs,                  \
	                      const long long *res, long long *out, unsigned *poison) {                                \
		matvec_add<T, false>(x, n, wq, wd, rows, rs, res, out, poison);                                            \
	}
FOR_EACH_WEIGHT_TYPE(MATVEC_ADD)
#define MATVEC_ADD_TYPED(name, T, MX) MATVEC_ADD(name, T)
FOR_EACH_TYPED_MIX(MATVEC_ADD_TYPED)
// matvec_add8_<type>: x the split FFN's int8 hidden units (h8).
#define MATVEC_ADD8(name, T)                                                                                       \
	extern "C" __global__ void __launch_bounds__(128)                                                              \
	    matvec_add8_##name(const unsigned *x, int n, const u8 *wq, const f16 *wd, int rows, float rs,              \
	                       const long long *res, long long *out, unsigned *poison) {                               \
		matvec_add<T, true>((const float *)x, n, wq, wd, rows, rs, res, out, poison);                              \
	}
MATVEC_ADD8(q4_0, WT_Q4_0)
MATVEC_ADD8(q8_0, WT_Q8_0)
#define MATVEC_ADD8_TYPED(name, T, MX) MATVEC_ADD8(name, T)
FOR_EACH_TYPED_MIX(MATVEC_ADD8_TYPED)
