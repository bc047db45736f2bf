// decode.cuh: the matrix-vector core of the decode kernels (one token).
//
// A warp owns R weight rows at a time. Lane l takes the 32-element blocks
// l, l+32, l+64, … of every one of its rows, so the lane needs the
// activations of those blocks only and nothing is staged in shared memory:
// no barrier anywhere. The first PRE blocks of each row are loaded into
// registers before the PDL wait (weights never depend on the previous
// kernel), so after the wait the critical path is one load of the
// activations, the arithmetic and one warp reduction.
//
// Weights as laid out at upload: weights.cuh.
#pragma once
#include "weights.cuh"

// xblk is the lane's 32 activations of one block, with the sums of each
// half (the mixed layouts' min terms need them: taken once a block, not
// once a row; dead code for the other layouts).
struct xblk {
	float4 v[8];
	float s0, s1;
	__device__ __forceinline__ void sum() {
		s0 = s1 = 0.f;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			s0 += (v[j].x + v[j].y) + (v[j].z + v[j].w);
			s1 += (v[4 + j].x + v[4 + j].y) + (v[4 + j].z + v[4 + j].w);
		}
	}
};

// wdot is the dot product of a weight block with 32 activations.
template <int T> __device__ __forceinline__ float wdot(const wblk<T> &w, const xblk &x);

template <> __device__ __forceinline__ float wdot<WT_Q4_0>(const wblk<WT_Q4_0> &w, const xblk &x) {
	// Byte j holds element j (low nibble) and j+16 (high nibble).
	unsigned u[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
	const float off = 8388608.f + 8.f;
	float s0 = 0.f, s1 = 0.f;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		float a, b, c, d;
		bytes_f32(u[j] & 0x0F0F0F0Fu, off, a, b, c, d);
		float4 lo = x.v[j];
		s0 += a * lo.x + b * lo.y + c * lo.z + d * lo.w;
		bytes_f32((u[j] >> 4) & 0x0F0F0F0Fu, off, a, b, c, d);
		float4 hi = x.v[4 + j];
		s1 += a * hi.x + b * hi.y + c * hi.z + d * hi.w;
	}
	return w.d * (s0 + s1);
}

template <> __device__ __forceinline__ float wdot<WT_Q8_0>(const wblk<WT_Q8_0> &w, const xblk &x) {
	unsigned u[8] = {w.q0.x, w.q0.y, w.q0.z, w.q0.w, w.q1.x, w.q1.y, w.q1.z, w.q1.w};
	// Flipping the sign bits maps int8 v to the unsigned byte v+128.
	const float off = 8388608.f + 128.f;
	float s0 = 0.f, s1 = 0.f;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		float a, b, c, d;
		bytes_f32(u[j] ^ 0x80808080u, off, a, b, c, d);
		float4 v = x.v[j];
		float t = a * v.x + b * v.y + c * v.z + d * v.w;
		if (j & 1) s1 += t; else s0 += t;
	}
	return w.d * (s0 + s1);
}

template <> __device__ __forceinline__ float wdot<WT_F16>(const wblk<WT_F16> &w, const xblk &x) {
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		unsigned u[4] = {w.q[j].x, w.q[j].y, w.q[j].z, w.q[j].w};
		float4 a = x.v[2 * j], b = x.v[2 * j + 1];
		s += f16_to_f32((f16)(u[0] & 0xffff)) * a.x + f16_to_f32((f16)(u[0] >> 16)) * a.y +
		     f16_to_f32((f16)(u[1] & 0xffff)) * a.z + f16_to_f32((f16)(u[1] >> 16)) * a.w +
		     f16_to_f32((f16)(u[2] & 0xffff)) * b.x + f16_to_f32((f16)(u[2] >> 16)) * b.y +
		     f16_to_f32((f16)(u[3] & 0xffff)) * b.z + f16_to_f32((f16)(u[3] >> 16)) * b.w;
	}
	return s;
}

template <> __device__ __forceinline__ float wdot<WT_F32>(const wblk<WT_F32> &w, const xblk &x) {
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 8; j++) s += w.q[j].x * x.v[j].x + w.q[j].y * x.v[j].y + w.q[j].z * x.v[j].z + w.q[j].w * x.v[j].w;
	return s;
}

template <> __device__ __forceinline__ float wdot<WT_BF16>(const wblk<WT_BF16> &w, const xblk &x) {
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		unsigned u[4] = {w.q[j].x, w.q[j].y, w.q[j].z, w.q[j].w};
		float4 a = x.v[2 * j], b = x.v[2 * j + 1];
		s += bf16_lo(u[0]) * a.x + bf16_hi(u[0]) * a.y + bf16_lo(u[1]) * a.z + bf16_hi(u[1]) * a.w +
		     bf16_lo(u[2]) * b.x + bf16_hi(u[2]) * b.y + bf16_lo(u[3]) * b.z + bf16_hi(u[3]) * b.w;
	}
	return s;
}

// mix_dot is Σ (c_i − off)·x_i over the 16 elements of words [W, W+4) of a
// mixed block's codes (mix_codes), x the matching float4s.
template <int W> __device__ __forceinline__ float mix_dot(const unsigned c[8], float off, const float4 *x) {
	float acc = 0.f;
#pragma unroll
	for (int j = W; j < W + 4; j++) {
		float a, b, cc, d;
		bytes_f32(c[j], off, a, b, cc, d);
		float4 v = x[j - W];
		acc += a * v.x + b * v.y + cc * v.z + d * v.w;
	}
	return acc;
}

// mix_half is mix_dot and Σ x_i over the same 16 elements.
template <int W>
__device__ __forceinline__ void mix_half(const unsigned c[8], float off, const float4 *x, float &acc, float &sum) {
	acc = mix_dot<W>(c, off, x);
	sum = 0.f;
#pragma unroll
	for (int j = 0; j < 4; j++) sum += (x[j].x + x[j].y) + (x[j].z + x[j].w);
}

template <int FIX> __device__ __forceinline__ float wdot_mix(const wblk<WT_MIX> &w, const xblk &x) {
	unsigned c[8];
	mix_codes<0, 8, FIX>(w, c);
	float a0 = mix_dot<0>(c, w.off, x.v), a1 = mix_dot<4>(c, w.off, x.v + 4);
	return w.s0 * a0 + w.m0 * x.s0 + (w.s1 * a1 + w.m1 * x.s1);
}
template <> __device__ __forceinline__ float wdot<WT_MIX>(const wblk<WT_MIX> &w, const xblk &x) { return wdot_mix<0>(w, x); }
#define TYPED_MIX_WDOT(name, T, MX)                                                                                \
	template <> __device__ __forceinline__ float wdot<T>(const wblk<T> &w, const xblk &x) { return wdot_mix<MX>(w, x); }
FOR_EACH_TYPED_MIX(TYPED_MIX_WDOT)

// Int8 activations (llama.cpp's MMVQ idea): for the layouts of xq8, the
// staged kernels quantize the normed activations once a block, 32
// elements to int8 codes with a float scale amax/127 (rounded half away
// from zero, as the CPU engine's Q8_0 activations), and multiply the
// weight codes by them four at a time (dp4a) in integer arithmetic.
// Against the float path a lane holds 12 registers of activations
// instead of 34, reads 52 bytes a block instead of 256,
// and spends a quarter of the instructions: these kernels were bound by
// those, not by their weights' bytes. Q4_0 keeps float activations: its
// float path was already at its weights' bandwidth, and int8 was 4%
// slower. A scale for every 32 elements, where the CPU engine's K-quant
// products take one for 256 (Q8_K), keeps the rounding small: 1.2%
// against 1.5% of the logits beside the f16 batched step on a Q4_K_M-like
// test model (BENCHMARKS.md).
//
// Q4_0 takes int8 activations only from act_q8 (x8: wide models), where
// they save the staging: its staged kernels keep float ones.
template <int T> struct xq8 {
	static constexpr bool on = T == WT_Q8_0 || mix_fixed<T>::code != 0;
	static constexpr bool x8 = on || T == WT_Q4_0;
};

// xblk8 is a lane's 32 activations as int8 (q, four a word, element 4i
// in word i's low byte), the scale of each half (d0, d1: one value for
// q8_stage's blocks; the split FFN's hidden units come 16 to a block,
// ffn.cu's h8_store) and Σq over each half (the codes' offsets and the
// mixed layouts' min terms need them). In memory, a block is 12 words:
// q, d0, d1, s0, s1.
struct xblk8 {
	int q[8];
	float d0, d1;
	int s0, s1;
};

__device__ __forceinline__ int dp4a(int a, int b, int c) {
	int d;
	asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

// wdot8 is wdot on int8 activations.
template <int T> __device__ __forceinline__ float wdot8(const wblk<T> &w, const xblk8 &x);

template <> __device__ __forceinline__ float wdot8<WT_Q8_0>(const wblk<WT_Q8_0> &w, const xblk8 &x) {
	const unsigned u[8] = {w.q0.x, w.q0.y, w.q0.z, w.q0.w, w.q1.x, w.q1.y, w.q1.z, w.q1.w};
	int s0 = 0, s1 = 0;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		s0 = dp4a((int)u[j], x.q[j], s0);
		s1 = dp4a((int)u[4 + j], x.q[4 + j], s1);
	}
	return w.d * (x.d0 * (float)s0 + x.d1 * (float)s1);
}

// Q4_0: byte j of the block holds element j (low nibble) and j+16 (high);
// the codes are 0…15 for weights c − 8, so the offset comes off Σq.
template <> __device__ __forceinline__ float wdot8<WT_Q4_0>(const wblk<WT_Q4_0> &w, const xblk8 &x) {
	const unsigned u[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
	int a0 = 0, a1 = 0;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		a0 = dp4a((int)(u[j] & 0x0F0F0F0Fu), x.q[j], a0);
		a1 = dp4a((int)((u[j] >> 4) & 0x0F0F0F0Fu), x.q[4 + j], a1);
	}
	return w.d * (x.d0 * (float)(a0 - 8 * x.s0) + x.d1 * (float)(a1 - 8 * x.s1));
}

// iq4_vals maps the eight 4-bit IQ4 codes of q (byte b: the codes of
// elements b, low nibble, and b+16, high nibble) to their values as
// signed bytes (kvalues_iq4nl), four a word: lo the low nibbles' (byte b:
// element b), hi the high nibbles'. A byte permute reads only the low
// three bits of each selector nibble, so q itself, four codes at a time,
// selects each code's value from the table's first half and from its
// second; a third permute keeps one of the two by the code's bit 3, and
// two more sort the bytes into elements. 13 instructions for eight codes,
// where mix_codes' nibbles and iq4_map took ~29 (the typed IQ4 kernels
// were bound by them: Llama-8B IQ4_XS gate/up 36.6 µs a layer against
// Q4_K's 25.1 for as many bytes).
__device__ __forceinline__ void iq4_vals(unsigned q, unsigned &lo, unsigned &hi) {
	const unsigned k0 = 0xbfad9881u, k1 = 0xf6eaddcfu, k2 = 0x26190d01u, k3 = 0x71594535u;
	const unsigned pick = 0x32103210u | ((q & 0x88888888u) >> 1);
	unsigned v[2];
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const unsigned s = q >> (16 * h);
		v[h] = __byte_perm(__byte_perm(k0, k1, s), __byte_perm(k2, k3, s), pick >> (16 * h));
	}
	lo = __byte_perm(v[0], v[1], 0x6420);
	hi = __byte_perm(v[0], v[1], 0x7531);
}

// The typed mixed layouts: element i is s·(c_i − off) + m. Codes below
// 128 (up to 6 bits) go to a signed dp4a as they are; the IQ4 codes go
// as their values (iq4_vals), with no offset.
template <int FIX> __device__ __forceinline__ float wdot8_mix(const wblk<WT_MIX> &w, const xblk8 &x) {
	constexpr bool iq4 = FIX == MX_IQ4_NL || FIX == MX_IQ4_XS;
	unsigned c[8];
	if constexpr (iq4) {
		const unsigned q[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
#pragma unroll
		for (int j = 0; j < 4; j++) iq4_vals(q[j], c[j], c[4 + j]);
	} else {
		mix_codes<0, 8, FIX>(w, c);
	}
	int a0 = 0, a1 = 0;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		a0 = dp4a((int)c[j], x.q[j], a0);
		a1 = dp4a((int)c[4 + j], x.q[4 + j], a1);
	}
	const int off = iq4 ? 0 : (int)(w.off - 8388608.f);
	return x.d0 * (w.s0 * (float)(a0 - off * x.s0) + w.m0 * (float)x.s0) +
	       x.d1 * (w.s1 * (float)(a1 - off * x.s1) + w.m1 * (float)x.s1);
}
#define TYPED_MIX_WDOT8(name, T, MX)                                                                               \
	template <> __device__ __forceinline__ float wdot8<T>(const wblk<T> &w, const xblk8 &x) { return wdot8_mix<MX>(w, x); }
FOR_EACH_TYPED_MIX(TYPED_MIX_WDOT8)

// res_stage converts the fixed-point residual stream's k elements
// (common.cuh) to float32 in shared memory xs, with the whole block, for
// the matrix-vector core to read: converting the 64-bit integers in every
// warp cost more than the barrier. Every 32 floats are followed by a float4
// of padding (element e at XS_AT(e)): lane l reads block l, and without the
// padding the lanes of a quarter warp would all hit the same four banks.
// Each thread's loads are issued together, four 16-byte pairs at a time.
#define XS_AT(e) ((e) + 4 * ((e) >> 5))
__device__ __forceinline__ const float *res_stage(const long long *res, int k, float *xs) {
	const longlong2 *p = (const longlong2 *)res;
	const int np = k >> 1, nt = blockDim.x, tid = threadIdx.x;
	for (int base = 0; base < np; base += 4 * nt) { // block-uniform
		longlong2 v[4];
#pragma unroll
		for (int j = 0; j < 4; j++)
			if (base + j * nt + tid < np) v[j] = p[base + j * nt + tid];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int e = 2 * (base + j * nt + tid);
			if (e < k) {
				xs[XS_AT(e)] = res_f32(v[j].x);
				xs[XS_AT(e + 1)] = res_f32(v[j].y);
			}
		}
	}
	if ((k & 1) && tid == 0) xs[XS_AT(k - 1)] = res_f32(res[k - 1]);
	__syncthreads();
	return xs;
}
__device__ __forceinline__ const float *res_stage(const float *in, int, float *) { return in; }

// q8_quant quantizes a warp's 32 values v, one a lane, to int8 codes with
// the scale d = amax/127 of each group of G lanes (32, or 16: both halves
// of a block get their own), rounded half away from zero as the CPU
// engine's Q8_0 activations; a NaN anywhere in the warp makes d NaN, so
// that it reaches the products (the poison rule). It returns the lane's
// code packed with the three after it (element 4i in word i's low byte:
// lanes 4i hold word i) and sets s to Σ codes over the lane's half.
template <int G> __device__ __forceinline__ unsigned q8_quant(float v, float &d, int &s) {
	float a = fabsf(v);
#pragma unroll
	for (int o = G / 2; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
	d = __any_sync(0xffffffffu, v != v) ? __int_as_float(0x7fc00000) : a / 127.f;
	const int q = (int)roundf(v * (d != 0.f ? 1.f / d : 0.f));
	s = q;
#pragma unroll
	for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
	int u = (q & 0xff) << (8 * (threadIdx.x & 3));
	u |= __shfl_xor_sync(0xffffffffu, u, 1);
	u |= __shfl_xor_sync(0xffffffffu, u, 2);
	return (unsigned)u;
}

// q8_block writes a warp's block of 32 values v (one a lane, one scale)
// to o as xblk8's 12 words.
__device__ __forceinline__ void q8_block(float v, unsigned *o) {
	const int lane = threadIdx.x & 31;
	float d;
	int s;
	const unsigned u = q8_quant<32>(v, d, s);
	if ((lane & 3) == 0) o[lane >> 2] = u;
	if (lane == 0) {
		o[8] = o[9] = __float_as_uint(d);
		o[10] = (unsigned)s;
	}
	if (lane == 16) o[11] = (unsigned)s;
}

// q8_stage quantizes the staged residual times the norm's weights gs
// (both padded as XS_AT; res_stage's barrier behind them; GP false: gs
// unpadded, in global memory, or null) to int8, in place: block b's 36
// floats become its 12 words of xblk8 (the scale twice) and, in its
// padding (word 32), Σ x² of the unweighted elements (RMSNorm's
// statistic). The norm's scale comes after the products, so the codes
// are those of the normed activations but for rounding. k is whole
// 32-element blocks (the int8 layouts' rows are). A warp takes a block,
// a lane an element; each warp reads only the blocks it writes, and its
// shuffles order every lane's read before any write.
template <bool GP = true> __device__ __forceinline__ void q8_stage(float *xs, const float *gs, int k) {
	const int lane = threadIdx.x & 31, nb = k >> 5;
	for (int b = threadIdx.x >> 5; b < nb; b += blockDim.x >> 5) {
		const int e = 32 * b + lane;
		const float x = xs[XS_AT(e)];
		const float v = GP ? x * gs[XS_AT(e)] : gs ? x * gs[e] : x;
		const float ss = warp_sum(x * x);
		unsigned *o = (unsigned *)(xs + 36 * b);
		q8_block(v, o);
		if (lane == 0) o[32] = __float_as_uint(ss);
	}
	__syncthreads();
}

// x8ld reads an xblk8 (12 words, 16-byte aligned).
__device__ __forceinline__ void x8ld(xblk8 &x, const unsigned *p) {
	const uint4 a = ((const uint4 *)p)[0], c = ((const uint4 *)p)[1], m = ((const uint4 *)p)[2];
	x.q[0] = (int)a.x, x.q[1] = (int)a.y, x.q[2] = (int)a.z, x.q[3] = (int)a.w;
	x.q[4] = (int)c.x, x.q[5] = (int)c.y, x.q[6] = (int)c.z, x.q[7] = (int)c.w;
	x.d0 = __uint_as_float(m.x), x.d1 = __uint_as_float(m.y);
	x.s0 = (int)m.z, x.s1 = (int)m.w;
}

// x8load reads block b of q8_stage's output and returns its Σ x².
__device__ __forceinline__ float x8load(xblk8 &x, const float *xs, int b) {
	x8ld(x, (const unsigned *)(xs + 36 * b));
	return xs[36 * b + 32];
}

// x8 is a row of act_q8's output (act_q8.cu) in global memory: nb blocks
// of xblk8's 12 words, then each block's Σ x².
struct x8row {
	const unsigned *p;
	int nb;
	__device__ __forceinline__ float load(xblk8 &x, int b) const {
		x8ld(x, p + 12 * b);
		return __uint_as_float(p[12 * nb + b]);
	}
};

__device__ __forceinline__ float x8load(xblk8 &x, const x8row &xr, int b) { return xr.load(x, b); }

// xfrow is act_f32's output (act_f32.cu), the input of the float rows'
// kernels (weights.cuh's hrow): nb blocks of normed activations, then
// each block's Σ x².
struct xfrow {
	const float *p;
	int nb;
	// at loads the 8 activations from element e (a multiple of 8 below 32·nb).
	__device__ __forceinline__ void at(int e, float4 &a, float4 &b) const {
		const float4 *q = (const float4 *)(p + e);
		a = q[0];
		b = q[1];
	}
	// ss is Σ x² over the row, to every lane of the warp.
	__device__ __forceinline__ float ss() const {
		float s = 0.f;
		for (int b = threadIdx.x & 31; b < nb; b += 32) s += p[32 * nb + b];
		return warp_sum(s);
	}
};

// xstride is the distance in floats between 32-element blocks of an input
// x of type X: padded (36) once staged from the fixed-point residual
// stream, plain (32) for a float32 row.
template <typename X> struct xstride { static constexpr int BS = 32; };
template <> struct xstride<long long> { static constexpr int BS = 36; };

// normw holds a lane's norm weights for its first PRE blocks (those of
// full 32-element blocks), loaded before the PDL wait: they never change,
// and read after it they would add a round trip to L2 to the critical path.
template <int PRE> struct normw {
	xblk g[PRE];
	__device__ __forceinline__ void load(const float *gp, int nb, int k) {
		int lane = threadIdx.x & 31;
#pragma unroll
		for (int j = 0; j < PRE; j++) {
			int b = lane + 32 * j;
			if (gp && b < nb && 32 * b + 32 <= k) {
				const float4 *p = (const float4 *)(gp + 32 * b);
#pragma unroll
				for (int i = 0; i < 8; i++) g[j].v[i] = p[i];
			}
		}
	}
};

// norm_stage starts copying the k norm weights g into shared memory gs,
// padded as res_stage pads (element e at XS_AT(e)), with cp.async before
// the PDL wait: the copies take no registers and land while the kernel
// waits. Held in registers instead, the weights took a block's registers
// past what lets the next kernel's blocks share its SM. norm_ready, after
// the wait and before a block barrier (res_stage's), waits for the
// thread's own copies. norm_offset is where gs starts after the staged
// residual (stagedBytes on the Go side), 16-byte aligned.
__device__ __forceinline__ int norm_offset(int k) { return (k + 4 * ((k + 31) >> 5) + 3) & ~3; }
__device__ __forceinline__ void norm_stage(const float *g, int k, float *gs) {
	for (int e = threadIdx.x; e < k; e += blockDim.x) {
		unsigned long long sa;
		asm("cvta.to.shared.u64 %0, %1;" : "=l"(sa) : "l"(gs + XS_AT(e)));
		asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((unsigned)sa), "l"(g + e) : "memory");
	}
	asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void norm_ready() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// norm_ones fills gs with ones in norm_stage's layout: a block without
// pre-norms (no weights) runs the matrix-vector core's code with weights.
__device__ __forceinline__ void norm_ones(int k, float *gs) {
	for (int e = threadIdx.x; e < k; e += blockDim.x) gs[XS_AT(e)] = 1.f;
}

// xload fills x with block b of in (elements 32b…32b+31, BS floats apart:
// see xstride) times g[32b…] (g may be null; padded as XS_AT when GP, as
// norm_stage leaves it; gr, when set, holds that block of g in
// registers), zero past k, and adds the squares of in to ss (RMSNorm's
// statistic, taken before g).
template <int BS, bool GP = false>
__device__ __forceinline__ void xload(xblk &x, const float *in, const float *g, int b, int k, float &ss,
                                      const xblk *gr = nullptr) {
	int e0 = 32 * b;
	if (e0 + 32 <= k) {
		const float4 *p = (const float4 *)(in + BS * b);
#pragma unroll
		for (int j = 0; j < 8; j++) x.v[j] = p[j];
		if (g) {
			const float4 *gp = (const float4 *)(g + (GP ? XS_AT(e0) : e0));
#pragma unroll
			for (int j = 0; j < 8; j++) {
				float4 w = gr ? gr->v[j] : gp[j];
				ss += x.v[j].x * x.v[j].x + x.v[j].y * x.v[j].y + x.v[j].z * x.v[j].z + x.v[j].w * x.v[j].w;
				x.v[j].x *= w.x;
				x.v[j].y *= w.y;
				x.v[j].z *= w.z;
				x.v[j].w *= w.w;
			}
		}
		x.sum();
		return;
	}
	// The row's last, partial block (F32/F16 rows padded to 32).
	float *f = (float *)x.v;
#pragma unroll
	for (int j = 0; j < 32; j++) {
		int e = e0 + j;
		float v = e < k ? in[BS * b + j] : 0.f;
		ss += v * v;
		f[j] = g && e < k ? v * g[GP ? XS_AT(e) : e] : v;
	}
	x.sum();
}

// mv is a warp's R rows: row i is row[i] of the matrix (q[i], d[i]); rows
// with row[i] < 0 are skipped. T is the weight layout; the first PRE blocks
// of each row per lane are held in registers.
template <int T, int R, int PRE = 1> struct mv {
	const u8 *q[R];
	const f16 *d[R];
	long row[R];
	wblk<T> w[R][PRE];

	// preload reads the first PRE blocks of each row into registers.
	__device__ __forceinline__ void preload(int nb) {
		int lane = threadIdx.x & 31;
#pragma unroll
		for (int j = 0; j < PRE; j++) {
			int b = lane + 32 * j;
#pragma unroll
			for (int i = 0; i < R; i++)
				if (b < nb && row[i] >= 0) wload<T>(w[i][j], q[i], d[i], row[i] * nb + b);
		}
	}

	// dot computes every row's dot product with in (times g, when set) and
	// returns them to every lane in acc; ss gets Σ in² over the k elements
	// when g is set (the norm's statistic; each warp has all of it). BS is
	// in's block stride (xstride). gr, when set, holds the lane's first PRE
	// blocks of g in registers; GP says g is padded (norm_stage).
	template <int BS, bool GP = false>
	__device__ __forceinline__ void dot(int nb, int k, const float *in, const float *g, float acc[R], float &ss,
	                                    const normw<PRE> *gr = nullptr) {
		int lane = threadIdx.x & 31;
		xblk x[PRE];
		float ssl = 0.f;
#pragma unroll
		for (int j = 0; j < PRE; j++)
			if (lane + 32 * j < nb) xload<BS, GP>(x[j], in, g, lane + 32 * j, k, ssl, gr ? &gr->g[j] : nullptr);
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] = 0.f;
#pragma unroll
		for (int j = 0; j < PRE; j++) {
			if (lane + 32 * j < nb) {
#pragma unroll
				for (int i = 0; i < R; i++)
					if (row[i] >= 0) acc[i] += wdot<T>(w[i][j], x[j]);
			}
		}
		// Rows longer than PRE*32 blocks: the rest after the wait.
		for (int b = lane + 32 * PRE; b < nb; b += 32) {
			xblk xb;
			xload<BS, GP>(xb, in, g, b, k, ssl);
#pragma unroll
			for (int i = 0; i < R; i++) {
				if (row[i] >= 0) {
					wblk<T> wb;
					wload<T>(wb, q[i], d[i], row[i] * nb + b);
					acc[i] += wdot<T>(wb, xb);
				}
			}
		}
		// One butterfly for all R sums and the squares: the shuffles of
		// different values are independent, so they overlap.
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
			for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
			if (g) ssl += __shfl_xor_sync(0xffffffffu, ssl, o);
		}
		ss = ssl;
	}

	// dot8 is dot on int8 activations xs (x8load: q8_stage's or
	// act_q8's; the norm's weights already in them; ss is Σ x² all the
	// same).
	template <typename X8> __device__ __forceinline__ void dot8(int nb, const X8 &xs, float acc[R], float &ss) {
		int lane = threadIdx.x & 31;
		xblk8 x[PRE];
		float ssl = 0.f;
#pragma unroll
		for (int j = 0; j < PRE; j++)
			if (lane + 32 * j < nb) ssl += x8load(x[j], xs, lane + 32 * j);
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] = 0.f;
#pragma unroll
		for (int j = 0; j < PRE; j++) {
			if (lane + 32 * j < nb) {
#pragma unroll
				for (int i = 0; i < R; i++)
					if (row[i] >= 0) acc[i] += wdot8<T>(w[i][j], x[j]);
			}
		}
		for (int b = lane + 32 * PRE; b < nb; b += 32) {
			xblk8 xb;
			ssl += x8load(xb, xs, b);
#pragma unroll
			for (int i = 0; i < R; i++) {
				if (row[i] >= 0) {
					wblk<T> wb;
					wload<T>(wb, q[i], d[i], row[i] * nb + b);
					acc[i] += wdot8<T>(wb, xb);
				}
			}
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
			for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
			ssl += __shfl_xor_sync(0xffffffffu, ssl, o);
		}
		ss = ssl;
	}

	// dotx8 is dotx on int8 activations (rows of one block a lane).
	__device__ __forceinline__ void dotx8(int nb, const xblk8 &x, float acc[R]) {
		int lane = threadIdx.x & 31;
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] = lane < nb && row[i] >= 0 ? wdot8<T>(w[i][0], x) : 0.f;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
			for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
		}
	}

	// dotx is dot on activations already in registers (xpre): for a warp
	// that takes several row groups of one input, which it then loads and
	// converts once.
	__device__ __forceinline__ void dotx(int nb, const xblk x[PRE], float acc[R]) {
		int lane = threadIdx.x & 31;
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] = 0.f;
#pragma unroll
		for (int j = 0; j < PRE; j++) {
			if (lane + 32 * j < nb) {
#pragma unroll
				for (int i = 0; i < R; i++)
					if (row[i] >= 0) acc[i] += wdot<T>(w[i][j], x[j]);
			}
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
			for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
		}
	}
};

// xpre loads the lane's activations of a row of nb ≤ PRE·32 blocks for
// mv::dotx and returns the norm's statistic (as dot's ss).
template <int PRE, int BS>
__device__ __forceinline__ float xpre(xblk x[PRE], int nb, int k, const float *in, const float *g,
                                      const normw<PRE> *gr = nullptr) {
	int lane = threadIdx.x & 31;
	float ss = 0.f;
#pragma unroll
	for (int j = 0; j < PRE; j++)
		if (lane + 32 * j < nb) xload<BS>(x[j], in, g, lane + 32 * j, k, ss, gr ? &gr->g[j] : nullptr);
	return g ? warp_sum(ss) : ss;
}

// Warps of the whole grid walk the row groups.
__device__ __forceinline__ int grid_warp() { return blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); }
__device__ __forceinline__ int grid_warps() { return gridDim.x * (blockDim.x >> 5); }

// Rows per warp: four for the quantized layouts, two for F16/F32, whose
// blocks take four and eight times the registers. The matrix kernels' rows
// are the model width and preload one block a lane (rows up to 1024
// elements whole).
template <int T> struct mv_shape {
	static constexpr bool quant = T == WT_Q4_0 || T == WT_Q8_0 || T == WT_MIX || mix_fixed<T>::code != 0;
	static constexpr int R = quant ? 4 : 2;
};
