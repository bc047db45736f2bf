// weights.cuh: the weight layouts as uploaded (backend/cuda/weights.go), one
// place per type: wblk<T> holds one 32-element block of one row in
// registers, wload<T> reads it, and weight_elem<T> reads one element (the
// embeddings). The decode kernels (decode.cuh) and the prefill gemm build
// on these.
//
// For row r and 32-element block b, blk = r*nb + b:
//   F32:  q = floats, rows padded to nb*32 elements
//   F16, BF16: q = halves, rows padded likewise
//   Q4_0: q = 16 nibble bytes per block (ggml order), d = one f16 scale per block
//   Q8_0: q = 32 int8 per block, d = one f16 scale per block
//   MIX:  any quantized type (the MX_* codes below), its code in the low
//         MIX_TAG_BITS bits of d; weights.go's mixLayout describes the bytes.
#pragma once
#include "common.cuh"

// wblk is one 32-element block of one row, in registers.
template <int T> struct wblk;
template <> struct wblk<WT_Q4_0> { uint4 q; float d; };
template <> struct wblk<WT_Q8_0> { uint4 q0, q1; float d; };
template <> struct wblk<WT_F16> { uint4 q[4]; };
template <> struct wblk<WT_BF16> { uint4 q[4]; };
template <> struct wblk<WT_F32> { float4 q[8]; };

template <int T> __device__ __forceinline__ void wload(wblk<T> &w, const u8 *q, const f16 *d, long blk);
template <> __device__ __forceinline__ void wload<WT_Q4_0>(wblk<WT_Q4_0> &w, const u8 *q, const f16 *d, long blk) {
	w.q = ((const uint4 *)q)[blk];
	w.d = f16_to_f32(d[blk]);
}
template <> __device__ __forceinline__ void wload<WT_Q8_0>(wblk<WT_Q8_0> &w, const u8 *q, const f16 *d, long blk) {
	const uint4 *p = (const uint4 *)q + 2 * blk;
	w.q0 = p[0];
	w.q1 = p[1];
	w.d = f16_to_f32(d[blk]);
}
template <> __device__ __forceinline__ void wload<WT_F16>(wblk<WT_F16> &w, const u8 *q, const f16 *, long blk) {
	const uint4 *p = (const uint4 *)q + 4 * blk;
#pragma unroll
	for (int j = 0; j < 4; j++) w.q[j] = p[j];
}
template <> __device__ __forceinline__ void wload<WT_BF16>(wblk<WT_BF16> &w, const u8 *q, const f16 *, long blk) {
	const uint4 *p = (const uint4 *)q + 4 * blk;
#pragma unroll
	for (int j = 0; j < 4; j++) w.q[j] = p[j];
}
template <> __device__ __forceinline__ void wload<WT_F32>(wblk<WT_F32> &w, const u8 *q, const f16 *, long blk) {
	const float4 *p = (const float4 *)q + 8 * blk;
#pragma unroll
	for (int j = 0; j < 8; j++) w.q[j] = p[j];
}

// bf16_lo and bf16_hi widen the low and high bf16 of a word, exactly.
__device__ __forceinline__ float bf16_lo(unsigned u) { return __int_as_float((int)(u << 16)); }
__device__ __forceinline__ float bf16_hi(unsigned u) { return __int_as_float((int)(u & 0xffff0000u)); }

// Float rows a lane reads 8 consecutive elements at a time (hrow<T>, F16
// and BF16): one 16-byte load, so that a warp's load is 512 contiguous
// bytes (with a lane a 32-element block, wload's, the lanes' loads are 64
// bytes apart and each sector is fetched twice), and the lane holds 8
// activations at a time instead of a block's 32: those kernels' registers,
// not their bytes, bounded them (Llama-8B shape, F16: 116-194 registers a
// thread, 12-25% occupancy). e is the element's index in the matrix, a
// multiple of 8 (rows are padded to 32).
template <int T> struct hrow;
template <> struct hrow<WT_F16> {
	static __device__ __forceinline__ uint4 load(const u8 *q, long e) { return ((const uint4 *)q)[e >> 3]; }
	static __device__ __forceinline__ float dot(uint4 w, float4 a, float4 b) {
		return f16_to_f32((f16)(w.x & 0xffff)) * a.x + f16_to_f32((f16)(w.x >> 16)) * a.y +
		       f16_to_f32((f16)(w.y & 0xffff)) * a.z + f16_to_f32((f16)(w.y >> 16)) * a.w +
		       f16_to_f32((f16)(w.z & 0xffff)) * b.x + f16_to_f32((f16)(w.z >> 16)) * b.y +
		       f16_to_f32((f16)(w.w & 0xffff)) * b.z + f16_to_f32((f16)(w.w >> 16)) * b.w;
	}
};
template <> struct hrow<WT_BF16> {
	static __device__ __forceinline__ uint4 load(const u8 *q, long e) { return ((const uint4 *)q)[e >> 3]; }
	static __device__ __forceinline__ float dot(uint4 w, float4 a, float4 b) {
		return bf16_lo(w.x) * a.x + bf16_hi(w.x) * a.y + bf16_lo(w.y) * a.z + bf16_hi(w.y) * a.w + bf16_lo(w.z) * b.x +
		       bf16_hi(w.z) * b.y + bf16_lo(w.w) * b.z + bf16_hi(w.w) * b.w;
	}
};
template <int T> struct is_hrow { static constexpr bool v = T == WT_F16 || T == WT_BF16; };

// bytes_f32 turns the four bytes of u into floats with the magic-number
// trick (0x4B000000|b is the float 2^23+b; selector 0x754i puts byte i
// under the exponent byte 0x4B): integer permutes and one add
// each, where a conversion instruction runs at a quarter of the rate. off is
// subtracted as well (2^23 plus the quantization offset).
__device__ __forceinline__ void bytes_f32(unsigned u, float off, float &a, float &b, float &c, float &d) {
	a = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7540)) - off;
	b = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7541)) - off;
	c = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7542)) - off;
	d = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7543)) - off;
}

// The mixed layouts' codes: mixLayouts in weights.go.
#define MIX_TAG_BITS 4
#define MX_Q4_0 1
#define MX_Q8_0 2
#define MX_Q4_1 3
#define MX_Q5_0 4
#define MX_Q5_1 5
#define MX_IQ4_NL 6
#define MX_Q2_K 7
#define MX_Q3_K 8
#define MX_Q4_K 9
#define MX_Q5_K 10
#define MX_Q6_K 11
#define MX_IQ4_XS 12

// A block of any mixed layout: element i is s[i/16]·(c_i − off) + m[i/16],
// c_i its code (0…255) from mix_codes, off the type's code offset. q holds
// the codes' low bits (16 bytes; 8 for the 2-bit types, 32 for Q8_0 with
// x), x the high bits (one word, or two for Q6_K).
template <> struct wblk<WT_MIX> {
	uint4 q, x;
	float s0, s1, m0, m1, off;
	int t;
};

__device__ __forceinline__ float ld_f16(const u8 *p) { return f16_to_f32(*(const f16 *)p); }
__device__ __forceinline__ unsigned ld_u32(const u8 *p) { return *(const unsigned *)p; }
__device__ __forceinline__ float lo_f16(unsigned u) { return f16_to_f32((f16)(u & 0xffff)); }
__device__ __forceinline__ float hi_f16(unsigned u) { return f16_to_f32((f16)(u >> 16)); }

// hbyte is byte i (0…11, runtime) of the 12 scale bytes a K-quant header
// holds in words y, z, w: selects and shifts, where indexing an array
// would put it in local memory.
__device__ __forceinline__ unsigned hbyte(unsigned y, unsigned z, unsigned w, int i) {
	unsigned v = i < 4 ? y : i < 8 ? z : w;
	return (v >> (8 * (i & 3))) & 0xffu;
}

// The typed mixed layouts (common.cuh): a WT_MIX block, and the type.
template <int T> struct mix_fixed { static constexpr int code = 0; };
#define TYPED_MIX_BLOCK(name, T, MX)                                                                               \
	template <> struct wblk<T> : wblk<WT_MIX> {};                                                                  \
	template <> struct mix_fixed<T> { static constexpr int code = MX; };
FOR_EACH_TYPED_MIX(TYPED_MIX_BLOCK)

// mix_load reads the block's codes and the few header words it needs,
// one load where the header is aligned for it (Q4_K's whole 16 bytes), and
// turns the header's scales into s0, s1, m0, m1. FIX is the layout's code
// when the kernel is typed (0: the one in dt's tag bits).
template <int FIX>
__device__ __forceinline__ void mix_load(wblk<WT_MIX> &w, const u8 *q, const f16 *dt, long blk) {
	const int t = FIX ? FIX : (int)((unsigned long long)dt & ((1u << MIX_TAG_BITS) - 1));
	const u8 *h = (const u8 *)((unsigned long long)dt & ~(unsigned long long)((1u << MIX_TAG_BITS) - 1));
	const int j = blk & 7; // sub-block of a K-quant super-block
	w.t = t;
	w.x = uint4{0, 0, 0, 0};
	w.m0 = w.m1 = 0.f;
	w.off = 8388608.f; // 2^23: bytes_f32's magic number, plus the type's offset below
	float s = 0.f;
	if (t == MX_Q2_K || t == MX_Q3_K) {
		uint2 v = ((const uint2 *)q)[blk];
		w.q = uint4{v.x, v.y, 0, 0};
	} else if (t == MX_Q8_0) {
		const uint4 *p = (const uint4 *)q + 2 * blk;
		w.q = p[0];
		w.x = p[1];
	} else {
		w.q = ((const uint4 *)q)[blk];
	}
	switch (t) {
	case MX_Q4_0:
		s = ld_f16(h + 2 * blk);
		w.off += 8.f;
		break;
	case MX_Q8_0:
	case MX_IQ4_NL:
		s = ld_f16(h + 2 * blk);
		w.off += 128.f;
		break;
	case MX_Q4_1: {
		unsigned v = ld_u32(h + 4 * blk);
		s = lo_f16(v);
		w.m0 = w.m1 = hi_f16(v);
		break;
	}
	case MX_Q5_0: {
		const unsigned short *p = (const unsigned short *)(h + 6 * blk);
		s = f16_to_f32(p[0]);
		w.x.x = (unsigned)p[1] | (unsigned)p[2] << 16;
		w.off += 16.f;
		break;
	}
	case MX_Q5_1: {
		uint2 v = *(const uint2 *)(h + 8 * blk);
		s = lo_f16(v.x);
		w.m0 = w.m1 = hi_f16(v.x);
		w.x.x = v.y;
		break;
	}
	case MX_Q2_K: {
		const u8 *p = h + 20 * (blk >> 3);
		unsigned dd = ld_u32(p), sc = *(const unsigned short *)(p + 4 + 2 * j);
		float d = lo_f16(dd), dmin = hi_f16(dd);
		w.s0 = d * (float)(sc & 15);
		w.s1 = d * (float)((sc >> 8) & 15);
		w.m0 = -(dmin * (float)((sc >> 4) & 15));
		w.m1 = -(dmin * (float)(sc >> 12));
		return;
	}
	case MX_Q3_K: {
		const u8 *p = h + 48 * (blk >> 3);
		uint4 v = *(const uint4 *)p; // d, pad, scales[12]
		float d = lo_f16(v.x);
		int n0 = 2 * j, n1 = 2 * j + 1;
		int sc0 = (int)((hbyte(v.y, v.z, v.w, n0 % 8) >> (4 * (n0 / 8))) & 15) |
		          (int)((hbyte(v.y, v.z, v.w, 8 + n0 % 4) >> (2 * (n0 / 4))) & 3) << 4;
		int sc1 = (int)((hbyte(v.y, v.z, v.w, n1 % 8) >> (4 * (n1 / 8))) & 15) |
		          (int)((hbyte(v.y, v.z, v.w, 8 + n1 % 4) >> (2 * (n1 / 4))) & 3) << 4;
		w.s0 = d * (float)(sc0 - 32);
		w.s1 = d * (float)(sc1 - 32);
		w.x.x = ld_u32(p + 16 + 4 * j);
		w.off += 4.f;
		return;
	}
	case MX_Q4_K:
	case MX_Q5_K: {
		const u8 *p = h + (t == MX_Q4_K ? 16 : 48) * (blk >> 3);
		uint4 v = *(const uint4 *)p; // d, dmin, scales[12]
		const int jj = j & 3;
		unsigned a = hbyte(v.y, v.z, v.w, jj), b = hbyte(v.y, v.z, v.w, 4 + jj), c = hbyte(v.y, v.z, v.w, 8 + jj);
		unsigned sc, m;
		if (j < 4) {
			sc = a & 63;
			m = b & 63;
		} else {
			sc = (c & 15) | (a >> 6) << 4;
			m = (c >> 4) | (b >> 6) << 4;
		}
		s = lo_f16(v.x) * (float)sc;
		w.m0 = w.m1 = -(hi_f16(v.x) * (float)m);
		if (t == MX_Q5_K) w.x.x = ld_u32(p + 16 + 4 * j);
		break;
	}
	case MX_Q6_K: {
		const u8 *p = h + 84 * (blk >> 3);
		float d = lo_f16(ld_u32(p));
		unsigned sc = *(const unsigned short *)(p + 4 + 2 * j);
		w.s0 = d * (float)(signed char)(sc & 0xff);
		w.s1 = d * (float)(signed char)(sc >> 8);
		w.x.x = ld_u32(p + 20 + 8 * j);
		w.x.y = ld_u32(p + 24 + 8 * j);
		w.off += 32.f;
		return;
	}
	case MX_IQ4_XS: {
		uint2 v = *(const uint2 *)(h + 8 * (blk >> 3)); // d, scales_h, scales_l[4]
		int ls = (int)((v.y >> (8 * (j / 2) + 4 * (j & 1))) & 15) | (int)((v.x >> (16 + 2 * j)) & 3) << 4;
		s = lo_f16(v.x) * (float)(ls - 32);
		w.off += 128.f;
		break;
	}
	}
	w.s0 = w.s1 = s;
}
template <> __device__ __forceinline__ void wload<WT_MIX>(wblk<WT_MIX> &w, const u8 *q, const f16 *dt, long blk) {
	mix_load<0>(w, q, dt, blk);
}
#define TYPED_MIX_WLOAD(name, T, MX)                                                                               \
	template <> __device__ __forceinline__ void wload<T>(wblk<T> & w, const u8 *q, const f16 *dt, long blk) {      \
		mix_load<MX>(w, q, dt, blk);                                                                               \
	}
FOR_EACH_TYPED_MIX(TYPED_MIX_WLOAD)

// iq4_map replaces four 4-bit codes (one a byte) by their IQ4_NL values
// plus 128 (kvalues_iq4nl + 128, four bytes a word, low first): two
// byte permutes pick from the table's halves and the codes' bit 3 chooses.
__device__ __forceinline__ unsigned iq4_map(unsigned v) {
	const unsigned t0 = 0x3f2d1801u, t1 = 0x766a5d4fu, t2 = 0xa6998d81u, t3 = 0xf1d9c5b5u;
	unsigned c = v | (v >> 4);
	unsigned sel = ((c & 0xffu) | ((c >> 8) & 0xff00u)) & 0x7777u;
	unsigned lo = __byte_perm(t0, t1, sel), hi = __byte_perm(t2, t3, sel);
	unsigned m = ((v >> 3) & 0x01010101u) * 0xffu;
	return (hi & m) | (lo & ~m);
}

// mix_codes writes the block's 32 codes as bytes, four a word (word i:
// elements 4i…4i+3, low byte first); words [lo, hi) only. The 2-bit codes
// and the high bits are stored so that a word's are a shift and a mask
// away (weights.go's pack2 and packBits): 2 bits of element 16g+4s+b at
// bits 2s of byte b of word g, one bit of element 4s+b at bit s of byte b.
// Spread from the plain order (bit i: element i), they took ~10
// instructions a word: Llama-8B's Q6_K head ran at 1.15 TB/s.
template <int LO = 0, int HI = 8, int FIX = 0>
__device__ __forceinline__ void mix_codes(const wblk<WT_MIX> &w, unsigned c[8]) {
	const int t = FIX ? FIX : w.t;
	const unsigned q[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
	if (t == MX_Q8_0) {
		const unsigned x[4] = {w.x.x, w.x.y, w.x.z, w.x.w};
#pragma unroll
		for (int i = LO; i < HI; i++) c[i] = (i < 4 ? q[i] : x[i - 4]) ^ 0x80808080u;
		return;
	}
	if (t == MX_Q2_K || t == MX_Q3_K) {
#pragma unroll
		for (int i = LO; i < HI; i++) c[i] = (q[i >> 2] >> (2 * (i & 3))) & 0x03030303u;
		if (t == MX_Q3_K) {
#pragma unroll
			for (int i = LO; i < HI; i++) c[i] |= ((w.x.x >> i) & 0x01010101u) << 2;
		}
		return;
	}
#pragma unroll
	for (int i = LO; i < HI; i++) c[i] = (q[i & 3] >> (4 * (i >> 2))) & 0x0f0f0f0fu;
	switch (t) {
	case MX_Q5_0:
	case MX_Q5_1:
	case MX_Q5_K:
#pragma unroll
		for (int i = LO; i < HI; i++) c[i] |= ((w.x.x >> i) & 0x01010101u) << 4;
		break;
	case MX_Q6_K:
#pragma unroll
		for (int i = LO; i < HI; i++) c[i] |= (((i < 4 ? w.x.x : w.x.y) >> (2 * (i & 3))) & 0x03030303u) << 4;
		break;
	case MX_IQ4_NL:
	case MX_IQ4_XS:
#pragma unroll
		for (int i = LO; i < HI; i++) c[i] = iq4_map(c[i]);
		break;
	default: // the plain nibbles (Q4_0, Q4_1, Q4_K)
		break;
	}
}

// mix_value is element i of a decoded block (c from mix_codes), rounded
// as package quant's dequantizers round it: the product, then the min
// (no fused multiply-add).
__device__ __forceinline__ float mix_value(const wblk<WT_MIX> &w, const unsigned c[8], int i) {
	float v = (float)((c[i >> 2] >> (8 * (i & 3))) & 255u) - (w.off - 8388608.f);
	return i < 16 ? __fadd_rn(__fmul_rn(w.s0, v), w.m0) : __fadd_rn(__fmul_rn(w.s1, v), w.m1);
}

// weight_elem is element e of row `row` (nb blocks a row).
template <int T> __device__ __forceinline__ float weight_elem(const u8 *q, const f16 *d, long row, int nb, int e);
template <> __device__ __forceinline__ float weight_elem<WT_F32>(const u8 *q, const f16 *, long row, int nb, int e) {
	return ((const float *)q)[row * nb * 32 + e];
}
template <> __device__ __forceinline__ float weight_elem<WT_F16>(const u8 *q, const f16 *, long row, int nb, int e) {
	return f16_to_f32(((const f16 *)q)[row * nb * 32 + e]);
}
template <> __device__ __forceinline__ float weight_elem<WT_BF16>(const u8 *q, const f16 *, long row, int nb, int e) {
	return bf16_lo(((const f16 *)q)[row * nb * 32 + e]);
}
template <> __device__ __forceinline__ float weight_elem<WT_Q4_0>(const u8 *q, const f16 *d, long row, int nb, int e) {
	long blk = row * nb + (e >> 5);
	int j = e & 31;
	int nib = j < 16 ? q[blk * 16 + j] & 15 : q[blk * 16 + j - 16] >> 4;
	return f16_to_f32(d[blk]) * (float)(nib - 8);
}
template <> __device__ __forceinline__ float weight_elem<WT_Q8_0>(const u8 *q, const f16 *d, long row, int nb, int e) {
	long blk = row * nb + (e >> 5);
	return f16_to_f32(d[blk]) * (float)(signed char)q[blk * 32 + (e & 31)];
}
template <> __device__ __forceinline__ float weight_elem<WT_MIX>(const u8 *q, const f16 *d, long row, int nb, int e) {
	wblk<WT_MIX> w;
	wload<WT_MIX>(w, q, d, row * nb + (e >> 5));
	unsigned c[8];
	mix_codes(w, c);
	return mix_value(w, c, e & 31);
}
