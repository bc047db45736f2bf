// ffn: the feed-forward block of one token, in one kernel. The hidden units
// are split over the blocks, U each: block b takes units [bU, bU+U).
//
// First its warps compute those units as a gate/up matrix-vector product
// (decode.cuh): RMSNorm of the residual stream (staged as float32 in
// shared memory), then SiLU(gate·x)·(up·x),
// each warp UW units (their gate rows and their up rows are its 2·UW rows),
// into shared memory. Then each thread takes rows of W_down (a row is one
// element of the model width), multiplies the U columns that match the
// block's units by them and adds the product to that element of the next
// residual buffer. Block 0 also carries the current residual over, so once
// every block has added its part, out = res + W_down·h. The adds are the
// fixed-point atomic sum of common.cuh (the same result in any order); out
// must be zero beforehand (qkv_rope zeroes it).
//
// Both kinds of weights, and the norm's, are read before the PDL wait. W_down keeps the
// upload's row-major layout (the prefill gemm reads it too): a thread's U
// columns of a row are one 16-byte load or a few.
//
// The block's variations (model.Block): no pre-norm (norm_w null: the
// residual stream as it is), the gate's activation (act: common.cuh's glu),
// the residual multiplier rs on the product, and carry = 0 for a branch
// whose output is post-normed before it joins the stream (out is then a
// buffer of its own, and block 0 does not carry res into it).
//
// With h_out set the kernel stops after the gate/up half and writes the
// hidden units there instead (and, for the int8 layouts with h8 set, as
// int8 blocks to h8 too: h8_store): wide models (thousands of hidden units, each
// block's atomics over the whole width, W_down's columns a few bytes from
// each of thousands of rows) run the down projection as its own
// row-parallel matrix-vector product (matvec_add.cu).
//
// With x8 set (the int8 layouts on wide models), the normed activations
// come as act_q8's int8 blocks (act_q8.cu), and nothing is staged.
#include "decode.cuh"

// dseg is U consecutive elements of a weight row, starting at a multiple of
// U (16 or 32), in registers: load reads row r's elements [e0, e0+U) of a
// matrix with nb 32-element blocks a row; dot multiplies them by h[0..U).
template <int T, int U> struct dseg;

// Q4_0: the whole 16-byte block; U = 16 takes its low nibbles (elements
// 0-15) or its high ones (16-31).
template <int U> struct dseg<WT_Q4_0, U> {
	uint4 q;
	float d;
	__device__ __forceinline__ void load(const u8 *wq, const f16 *wd, long r, int nb, int e0) {
		long blk = r * nb + (e0 >> 5);
		q = ((const uint4 *)wq)[blk];
		d = f16_to_f32(wd[blk]);
	}
	__device__ __forceinline__ float dot(const float4 h[U / 4], int e0) const {
		unsigned u[4] = {q.x, q.y, q.z, q.w};
		const float off = 8388608.f + 8.f;
		const int sh = U == 16 && (e0 & 16) ? 4 : 0;
		float s0 = 0.f, s1 = 0.f;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			float a, b, c, e;
			bytes_f32((u[j] >> sh) & 0x0F0F0F0Fu, off, a, b, c, e);
			s0 += a * h[j].x + b * h[j].y + c * h[j].z + e * h[j].w;
			if (U == 32) {
				bytes_f32((u[j] >> 4) & 0x0F0F0F0Fu, off, a, b, c, e);
				s1 += a * h[4 + j].x + b * h[4 + j].y + c * h[4 + j].z + e * h[4 + j].w;
			}
		}
		return d * (s0 + s1);
	}
};

template <int U> struct dseg<WT_Q8_0, U> {
	uint4 q[U / 16];
	float d;
	__device__ __forceinline__ void load(const u8 *wq, const f16 *wd, long r, int nb, int e0) {
		long blk = r * nb + (e0 >> 5);
		const uint4 *p = (const uint4 *)(wq + blk * 32 + (e0 & 31));
#pragma unroll
		for (int j = 0; j < U / 16; j++) q[j] = p[j];
		d = f16_to_f32(wd[blk]);
	}
	__device__ __forceinline__ float dot(const float4 h[U / 4], int) const {
		const float off = 8388608.f + 128.f;
		float s = 0.f;
#pragma unroll
		for (int j = 0; j < U / 16; j++) {
			unsigned u[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
#pragma unroll
			for (int i = 0; i < 4; i++) {
				float a, b, c, e;
				bytes_f32(u[i] ^ 0x80808080u, off, a, b, c, e);
				float4 x = h[4 * j + i];
				s += a * x.x + b * x.y + c * x.z + e * x.w;
			}
		}
		return d * s;
	}
};

template <int U> struct dseg<WT_F16, U> {
	uint4 q[U / 8];
	__device__ __forceinline__ void load(const u8 *wq, const f16 *, long r, int nb, int e0) {
		const uint4 *p = (const uint4 *)wq + (r * nb * 32 + e0) / 8;
#pragma unroll
		for (int j = 0; j < U / 8; j++) q[j] = p[j];
	}
	__device__ __forceinline__ float dot(const float4 h[U / 4], int) const {
		float s = 0.f;
#pragma unroll
		for (int j = 0; j < U / 8; j++) {
			unsigned u[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
			float4 a = h[2 * j], b = h[2 * j + 1];
			s += f16_to_f32((f16)(u[0] & 0xffff)) * a.x + f16_to_f32((f16)(u[0] >> 16)) * a.y +
			     f16_to_f32((f16)(u[1] & 0xffff)) * a.z + f16_to_f32((f16)(u[1] >> 16)) * a.w +
			     f16_to_f32((f16)(u[2] & 0xffff)) * b.x + f16_to_f32((f16)(u[2] >> 16)) * b.y +
			     f16_to_f32((f16)(u[3] & 0xffff)) * b.z + f16_to_f32((f16)(u[3] >> 16)) * b.w;
		}
		return s;
	}
};

template <int U> struct dseg<WT_BF16, U> {
	uint4 q[U / 8];
	__device__ __forceinline__ void load(const u8 *wq, const f16 *, long r, int nb, int e0) {
		const uint4 *p = (const uint4 *)wq + (r * nb * 32 + e0) / 8;
#pragma unroll
		for (int j = 0; j < U / 8; j++) q[j] = p[j];
	}
	__device__ __forceinline__ float dot(const float4 h[U / 4], int) const {
		float s = 0.f;
#pragma unroll
		for (int j = 0; j < U / 8; j++) {
			unsigned u[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
			float4 a = h[2 * j], b = h[2 * j + 1];
			s += bf16_lo(u[0]) * a.x + bf16_hi(u[0]) * a.y + bf16_lo(u[1]) * a.z + bf16_hi(u[1]) * a.w +
			     bf16_lo(u[2]) * b.x + bf16_hi(u[2]) * b.y + bf16_lo(u[3]) * b.z + bf16_hi(u[3]) * b.w;
		}
		return s;
	}
};

// Any quantized type: the block holding the segment; U = 16 takes its
// first or second half (each with its own scale and min). FIX: the typed
// families' layout code (0: the matrix's tag).
template <int FIX, int U> struct dseg_mix {
	wblk<WT_MIX> w;
	__device__ __forceinline__ void load(const u8 *wq, const f16 *wd, long r, int nb, int e0) {
		mix_load<FIX>(w, wq, wd, r * nb + (e0 >> 5));
	}
	__device__ __forceinline__ float dot(const float4 h[U / 4], int e0) const {
		unsigned c[8];
		float a0, x0;
		if (U == 32) {
			float a1, x1;
			mix_codes<0, 8, FIX>(w, c);
			mix_half<0>(c, w.off, h, a0, x0);
			mix_half<4>(c, w.off, h + 4, a1, x1);
			return w.s0 * a0 + w.m0 * x0 + (w.s1 * a1 + w.m1 * x1);
		}
		if (e0 & 16) {
			mix_codes<4, 8, FIX>(w, c);
			mix_half<4>(c, w.off, h, a0, x0);
			return w.s1 * a0 + w.m1 * x0;
		}
		mix_codes<0, 4, FIX>(w, c);
		mix_half<0>(c, w.off, h, a0, x0);
		return w.s0 * a0 + w.m0 * x0;
	}
};
template <int U> struct dseg<WT_MIX, U> : dseg_mix<0, U> {};
#define TYPED_MIX_DSEG(name, T, MX) \
	template <int U> struct dseg<T, U> : dseg_mix<MX, U> {};
FOR_EACH_TYPED_MIX(TYPED_MIX_DSEG)

template <int U> struct dseg<WT_F32, U> {
	float4 q[U / 4];
	__device__ __forceinline__ void load(const u8 *wq, const f16 *, long r, int nb, int e0) {
		const float4 *p = (const float4 *)wq + (r * nb * 32 + e0) / 4;
#pragma unroll
		for (int j = 0; j < U / 4; j++) q[j] = p[j];
	}
	__device__ __forceinline__ float dot(const float4 h[U / 4], int) const {
		float s = 0.f;
#pragma unroll
		for (int j = 0; j < U / 4; j++) s += q[j].x * h[j].x + q[j].y * h[j].y + q[j].z * h[j].z + q[j].w * h[j].w;
		return s;
	}
};

// h8_store writes a block's U hidden units hs (U = 16 or 32, from unit
// u0, a multiple of U) to h8 as int8, 16 units to a scale: halves of
// xblk8 blocks (decode.cuh), which matvec_add8 reads. A warp, a lane a
// unit; a NaN makes the scales NaN (the poison rule).
template <int U> __device__ __forceinline__ void h8_store(const float *hs, int u0, unsigned *h8) {
	const int lane = threadIdx.x & 31;
	float d;
	int s;
	const unsigned u = q8_quant<16>(lane < U ? hs[lane] : 0.f, d, s);
	const int e = u0 + lane, hf = (e >> 4) & 1;
	unsigned *o = h8 + 12 * (e >> 5);
	if (lane < U) {
		if ((lane & 3) == 0) o[4 * hf + ((lane & 15) >> 2)] = u;
		if ((lane & 15) == 0) {
			o[8 + hf] = __float_as_uint(d);
			o[10 + hf] = (unsigned)s;
		}
	}
}

// ffn adds W_down·(SiLU(gate·n)·(up·n)), n = rmsnorm(res)·norm_w, and res
// itself to out (all k elements). gate and up are hidden×k, W_down k×hidden.
template <int T, int U, int UW>
__device__ __forceinline__ void ffn(const long long *res, long long *out, unsigned *poison, const float *norm_w,
                                    float eps, int k, const u8 *gq, const f16 *gd, const u8 *uq, const f16 *ud,
                                    int hidden, const u8 *dq, const f16 *dd, int act, float rs, int carry_res,
                                    float *h_out, unsigned *h8, const unsigned *x8) {
	constexpr int R = 2 * UW;
	// W_down rows a thread holds from before the wait: all of a 576-wide
	// model's at 256 threads.
	constexpr int DPRE = mv_shape<T>::quant ? 3 : 1;
	__shared__ float4 h4[U / 4];
	float *hs = (float *)h4;
	const int nb = (k + 31) >> 5, nbd = (hidden + 31) >> 5, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	const int u0 = blockIdx.x * U;
	mv<T, R, 1> m;
#pragma unroll
	for (int i = 0; i < UW; i++) {
		int unit = u0 + w * UW + i;
		m.q[i] = gq;
		m.d[i] = gd;
		m.q[UW + i] = uq;
		m.d[UW + i] = ud;
		m.row[i] = m.row[UW + i] = unit < hidden ? unit : -1;
	}
	m.preload(nb);
	extern __shared__ float4 xs4[]; // the staged residual, then the norm weights (norm_offset)
	float *gs = (float *)xs4 + norm_offset(k);
	const bool g8 = xq8<T>::x8 && x8; // act_q8's int8 activations: nothing staged
	if (!g8) {
		if (norm_w)
			norm_stage(norm_w, k, gs);
		else
			norm_ones(k, gs);
	}
	dseg<T, U> ds[DPRE];
	if (!h_out) {
#pragma unroll
		for (int j = 0; j < DPRE; j++) {
			int r = threadIdx.x + j * blockDim.x;
			if (r < k) ds[j].load(dq, dd, r, nbd, u0);
		}
	}
	pdl_wait_and_release();

	float acc[R], ss;
	if (g8) {
		if constexpr (xq8<T>::x8) m.dot8(nb, x8row{x8, nb}, acc, ss);
	} else {
		norm_ready();
		const float *xs = res_stage(res, k, (float *)xs4);
		if constexpr (xq8<T>::on) {
			q8_stage((float *)xs4, gs, k);
			m.dot8(nb, xs, acc, ss);
		} else {
			m.template dot<36, true>(nb, k, xs, gs, acc, ss);
		}
	}
	float scale = norm_w ? rms_factor(ss, k, eps) : 1.f;
	if (*poison) scale = __int_as_float(0x7fc00000);
#pragma unroll
	for (int i = 0; i < UW; i++) {
		if (lane == i) {
			float g = acc[i] * scale, u = acc[UW + i] * scale;
			float v = m.row[i] >= 0 ? glu(g, u, act) : 0.f;
			hs[w * UW + i] = v;
			if (h_out && m.row[i] >= 0) h_out[m.row[i]] = v;
		}
	}
	if (h_out) {
		if constexpr (xq8<T>::x8) {
			if (h8) { // the block's units as int8 too, for matvec_add8
				__syncthreads();
				if (w == 0) h8_store<U>(hs, u0, h8);
			}
		}
		return;
	}
	__syncthreads();
	float4 h[U / 4];
#pragma unroll
	for (int j = 0; j < U / 4; j++) h[j] = h4[j];
	const bool carry = blockIdx.x == 0 && carry_res;
#pragma unroll
	for (int j = 0; j < DPRE; j++) {
		int r = threadIdx.x + j * blockDim.x;
		if (r < k) res_add(out + r, ds[j].dot(h, u0) * rs, carry ? res[r] : 0, poison);
	}
	for (int r = threadIdx.x + DPRE * blockDim.x; r < k; r += blockDim.x) {
		dseg<T, U> s;
		s.load(dq, dd, r, nbd, u0);
		res_add(out + r, s.dot(h, u0) * rs, carry ? res[r] : 0, poison);
	}
}

#define FFN_V(name, T, U, UW)                                                                                      \
	extern "C" __global__ void __launch_bounds__(32 * (U / UW))                                                    \
	    ffn_##name##_u##U##w##UW(const long long *res, long long *out, unsigned *poison, const float *norm_w,      \
	                             float eps, int k, const u8 *gq, const f16 *gd, const u8 *uq, const f16 *ud,       \
	                             int hidden, const u8 *dq, const f16 *dd, int act, float rs, int carry_res,        \
	                             float *h_out, unsigned *h8, const unsigned *x8) {                                 \
		ffn<T, U, UW>(res, out, poison, norm_w, eps, k, gq, gd, uq, ud, hidden, dq, dd, act, rs, carry_res, h_out,  \
		              h8, x8);                                                                                     \
	}
// ffn_<type>_u<U>w<UW>: U hidden units a block, UW a warp (U/UW warps a
// block). The float layouts have one shape: their rows take four and eight
// times the registers.
#define FFN_QUANT(name, T) FFN_V(name, T, 16, 1) FFN_V(name, T, 16, 2) FFN_V(name, T, 32, 2) FFN_V(name, T, 32, 4)
FFN_QUANT(q4_0, WT_Q4_0)
FFN_QUANT(q8_0, WT_Q8_0)
FFN_QUANT(mix, WT_MIX)
// The typed mixed families: the mixed family's shape only (kernelSet.typed).
#define FFN_TYPED(name, T, MX) FFN_V(name, T, 16, 1)
FOR_EACH_TYPED_MIX(FFN_TYPED)
FFN_V(f16, WT_F16, 16, 1)
FFN_V(bf16, WT_BF16, 16, 1)
FFN_V(f32, WT_F32, 16, 1)
