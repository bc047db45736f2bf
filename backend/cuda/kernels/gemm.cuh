// gemm.cuh: what the prefill gemms share (gemm.cu on mma.sync, gemm_wg.cu
// on wgmma): a weight block's load into registers and its dequantization
// into shared memory as f16, and the epilogues.
#pragma once
#include "prefill.cuh"
#include "weights.cuh"

// The k loop's stage: two quant blocks.
#define GEMM_BK 64

#define EPI_STORE 0
#define EPI_ADD 1
#define EPI_GLU 2

// wblock is one quant block's raw words, held in registers between the
// load and the dequantization into shared memory.
template <int T> struct wblock {
	static const int words = T == WT_Q8_0 ? 8 : 4;
	unsigned w[words];
	float d;
};

template <int T> __device__ __forceinline__ wblock<T> load_wblock(const u8 *wq, const f16 *wd, long blk, bool valid) {
	wblock<T> b;
	const int nw = wblock<T>::words;
	if (valid) {
		const uint4 *p = (const uint4 *)(wq + blk * 4 * nw);
#pragma unroll
		for (int i = 0; i < nw / 4; i++) {
			uint4 v = p[i];
			b.w[4 * i] = v.x;
			b.w[4 * i + 1] = v.y;
			b.w[4 * i + 2] = v.z;
			b.w[4 * i + 3] = v.w;
		}
		b.d = f16_to_f32(wd[blk]);
	} else {
#pragma unroll
		for (int i = 0; i < nw; i++) b.w[i] = 0;
		b.d = 0.f;
	}
	return b;
}

// wdst is where a quant block's 32 values go in shared memory: four
// 16-byte chunks of a row, chunk j at chunk index (c0 + j) ^ swz of the
// row (swz 0 for gemm.cu's padded rows; the row's index mod 8 for the
// 128-byte swizzle gemm_wg.cu's wgmma reads).
struct wdst {
	f16 *row;
	int c0, swz;
	__device__ __forceinline__ void put(int j, const u32 *v) const {
		*(uint4 *)(row + 8 * ((c0 + j) ^ swz)) = make_uint4v(v[0], v[1], v[2], v[3]);
	}
};

// store_wblock writes a block's 32 values as f16 to dst.
template <int T> __device__ __forceinline__ void store_wblock(const wdst &dst, const wblock<T> &b);

// Byte j of a Q4_0 block holds element j in its low nibble and element j+16
// in its high one.
template <> __device__ __forceinline__ void store_wblock<WT_Q4_0>(const wdst &dst, const wblock<WT_Q4_0> &b) {
	const int nw = wblock<WT_Q4_0>::words;
	u32 lo[2 * nw], hi[2 * nw];
	float d = b.d;
#pragma unroll
	for (int j = 0; j < nw; j++) {
		unsigned u = b.w[j];
		lo[2 * j] = pack_half2(((float)(u & 15) - 8.f) * d, ((float)((u >> 8) & 15) - 8.f) * d);
		lo[2 * j + 1] = pack_half2(((float)((u >> 16) & 15) - 8.f) * d, ((float)((u >> 24) & 15) - 8.f) * d);
		hi[2 * j] = pack_half2(((float)((u >> 4) & 15) - 8.f) * d, ((float)((u >> 12) & 15) - 8.f) * d);
		hi[2 * j + 1] = pack_half2(((float)((u >> 20) & 15) - 8.f) * d, ((float)(u >> 28) - 8.f) * d);
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		dst.put(i, lo + 4 * i);
		dst.put(2 + i, hi + 4 * i);
	}
}

template <> __device__ __forceinline__ void store_wblock<WT_Q8_0>(const wdst &dst, const wblock<WT_Q8_0> &b) {
	const int nw = wblock<WT_Q8_0>::words;
	u32 o[2 * nw];
	float d = b.d;
#pragma unroll
	for (int j = 0; j < nw; j++) {
		unsigned u = b.w[j];
		o[2 * j] = pack_half2((float)(signed char)(u & 255) * d, (float)(signed char)((u >> 8) & 255) * d);
		o[2 * j + 1] = pack_half2((float)(signed char)((u >> 16) & 255) * d, (float)(signed char)(u >> 24) * d);
	}
#pragma unroll
	for (int i = 0; i < 4; i++) dst.put(i, o + 4 * i);
}

// The float and mixed layouts hold the block as the decode kernels do.
template <> struct wblock<WT_F16> { wblk<WT_F16> w; };
template <> struct wblock<WT_BF16> { wblk<WT_BF16> w; };
template <> struct wblock<WT_MIX> { wblk<WT_MIX> w; };

template <> __device__ __forceinline__ wblock<WT_F16> load_wblock<WT_F16>(const u8 *wq, const f16 *wd, long blk, bool valid) {
	wblock<WT_F16> b;
	if (valid) {
		wload<WT_F16>(b.w, wq, wd, blk);
	} else {
#pragma unroll
		for (int j = 0; j < 4; j++) b.w.q[j] = make_zero4();
	}
	return b;
}
template <> __device__ __forceinline__ wblock<WT_BF16> load_wblock<WT_BF16>(const u8 *wq, const f16 *wd, long blk, bool valid) {
	wblock<WT_BF16> b;
	if (valid) {
		wload<WT_BF16>(b.w, wq, wd, blk);
	} else {
#pragma unroll
		for (int j = 0; j < 4; j++) b.w.q[j] = make_zero4();
	}
	return b;
}
template <> __device__ __forceinline__ wblock<WT_MIX> load_wblock<WT_MIX>(const u8 *wq, const f16 *wd, long blk, bool valid) {
	wblock<WT_MIX> b;
	if (valid) {
		wload<WT_MIX>(b.w, wq, wd, blk);
	} else { // zero codes, zero scales
		b.w.q = b.w.x = make_zero4();
		b.w.s0 = b.w.s1 = b.w.m0 = b.w.m1 = 0.f;
		b.w.off = 8388608.f;
		b.w.t = MX_Q4_1;
	}
	return b;
}

template <> __device__ __forceinline__ void store_wblock<WT_F16>(const wdst &dst, const wblock<WT_F16> &b) {
#pragma unroll
	for (int j = 0; j < 4; j++) dst.put(j, (const u32 *)&b.w.q[j]);
}

template <> __device__ __forceinline__ void store_wblock<WT_BF16>(const wdst &dst, const wblock<WT_BF16> &b) {
#pragma unroll
	for (int j = 0; j < 4; j++) {
		const uint4 q = b.w.q[j];
		u32 o[4] = {pack_half2(bf16_lo(q.x), bf16_hi(q.x)), pack_half2(bf16_lo(q.y), bf16_hi(q.y)),
		            pack_half2(bf16_lo(q.z), bf16_hi(q.z)), pack_half2(bf16_lo(q.w), bf16_hi(q.w))};
		dst.put(j, o);
	}
}

// store_mix writes a mixed block's values; FIX is the typed families'
// layout (0: the block's own).
template <int FIX> __device__ __forceinline__ void store_mix(const wdst &dst, const wblk<WT_MIX> &w) {
	unsigned c[8];
	mix_codes<0, 8, FIX>(w, c);
	u32 o[16];
#pragma unroll
	for (int i = 0; i < 16; i++) o[i] = pack_half2(mix_value(w, c, 2 * i), mix_value(w, c, 2 * i + 1));
#pragma unroll
	for (int j = 0; j < 4; j++) dst.put(j, o + 4 * j);
}
template <> __device__ __forceinline__ void store_wblock<WT_MIX>(const wdst &dst, const wblock<WT_MIX> &b) { store_mix<0>(dst, b.w); }

// The typed mixed families (common.cuh): WT_MIX's bytes with the layout
// fixed at compile time, for matrices of one type, without the switch
// over the layouts in the dequantization that bounds these gemms when a
// pass has few rows (kernelset.go's typedFamily.gemm says which have them).
template <int T, int FIX>
__device__ __forceinline__ wblock<T> load_mix_typed(const u8 *wq, const f16 *wd, long blk, bool valid) {
	wblock<T> b;
	if (valid) {
		mix_load<FIX>(b.w, wq, wd, blk);
	} else { // zero codes, zero scales
		b.w.q = b.w.x = make_zero4();
		b.w.s0 = b.w.s1 = b.w.m0 = b.w.m1 = 0.f;
		b.w.off = 8388608.f;
		b.w.t = FIX;
	}
	return b;
}
#define TYPED_MIX_WBLOCK(name, T, MX)                                                                              \
	template <> struct wblock<T> {                                                                                 \
		wblk<WT_MIX> w;                                                                                            \
	};                                                                                                             \
	template <> __device__ __forceinline__ wblock<T> load_wblock<T>(const u8 *wq, const f16 *wd, long blk, bool valid) { \
		return load_mix_typed<T, MX>(wq, wd, blk, valid);                                                          \
	}                                                                                                              \
	template <> __device__ __forceinline__ void store_wblock<T>(const wdst &dst, const wblock<T> &b) { store_mix<MX>(dst, b.w); }
FOR_EACH_TYPED_MIX(TYPED_MIX_WBLOCK)

// The grid of a product: x the row tiles of A, y the weight tiles, z the
// parts of a split k loop. The blocks that read one weight tile are
// launched side by side and read it from DRAM about once, L2 serving the
// others: with the weight tiles in x, a tile's readers were a whole row
// of tiles apart, and a prompt of 512 rows read Llama-8B's gate and up
// (235 MB at F16, more than L2) from DRAM four times.

// gemm_put applies the epilogue EPI to C's elements (row, col) and
// (row, col+1) of the block's tile (col even; BN columns a tile), v0 and
// v1. split: the add epilogue's partial sums of a split k loop.
template <int EPI, int BN>
__device__ __forceinline__ void gemm_put(void *out, int ldo, int m, int n, int row, int col, float v0, float v1, int act,
                                         bool split) {
	if (row >= m) return;
	if (EPI == EPI_GLU) {
		int u = blockIdx.y * (BN / 2) + (col >> 1);
		if (u < n) ((f16 *)out)[(long)row * ldo + u] = to_half(glu(v0, v1, act));
		return;
	}
	int c = blockIdx.y * BN + col;
	float *o = (float *)out + (long)row * ldo + c;
	if (EPI == EPI_ADD && split) {
		if (c < n) atomicAdd(o, v0);
		if (c + 1 < n) atomicAdd(o + 1, v1);
	} else if (EPI == EPI_ADD) {
		if (c < n) o[0] += v0;
		if (c + 1 < n) o[1] += v1;
	} else {
		if (c < n) o[0] = v0;
		if (c + 1 < n) o[1] = v1;
	}
}
