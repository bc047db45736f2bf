// attention: one query token against the KV cache, flash-decoding style.
//
// Block (g, s) takes the G query heads g*G … g*G+G-1, which share one KV
// head (grouped-query attention: each K and V row is read once for all G),
// and split s of the current length n = pos+1: ATT_SPLITS splits of
// c = max(min_chunk, ⌈n/ATT_SPLITS⌉) positions, so short contexts use few
// blocks and long ones all of them. Splits past n exit at once. With one
// split the block writes the normalized output; otherwise each writes an
// unnormalized partial (the max score m, the sum of exp(score-m) and the
// exp-weighted sum of V rows), and the last of the head group's splits to
// finish (a ticket counter, left at zero again) merges them, all its
// threads at once, so the output projection reads a plain vector.
//
// The grid is fixed, so one captured graph serves every position: the
// length comes from pos_ptr in device memory, which the embedding kernel
// wrote two launches earlier and is safe to read before the PDL wait, as
// are the cache rows before pos (earlier steps wrote them). Those rows are
// asked of L2 before the wait; only q and the row at pos come from the
// previous kernel.
#include "common.cuh"

#define ATT_SPLITS 32 // splits of the context per head group (the grid's y)
#define ATT_MAXG 8    // query heads per block at most
#define ATT_THREADS 128

__device__ __forceinline__ float4 ldcg4(const float *p) { return __ldcg((const float4 *)p); }

extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    attention(const float *q, const float *k_cache, const float *v_cache, int ctx_max, int head_dim, int n_head,
              int n_kv_head, int G, const int *pos_ptr, float scale, int min_chunk, int max_chunk, float *part_acc,
              float *part_ml, unsigned *tickets, float *out) {
	// qs[G*D] | p[G*max_chunk] | red[…]
	extern __shared__ float4 sm4[];
	__shared__ float scratch[2][ATT_THREADS / 32][ATT_MAXG];
	__shared__ bool last;
	float *sm = (float *)sm4;
	const int D = head_dim, tid = threadIdx.x, lane = tid & 31, w = tid >> 5, nw = ATT_THREADS / 32;
	const int hb = blockIdx.x, s = blockIdx.y, h0 = hb * G;
	const int kvh = h0 / (n_head / n_kv_head);
	const int n = *pos_ptr + 1;
	const int c = max(min_chunk, (n + ATT_SPLITS - 1) / ATT_SPLITS);
	const int nvalid = (n + c - 1) / c;
	if (s >= nvalid) return; // past the current length
	const int t0 = s * c, cnt = min(n, t0 + c) - t0;
	const float *kc = k_cache + ((long)kvh * ctx_max + t0) * D;
	const float *vc = v_cache + ((long)kvh * ctx_max + t0) * D;
	// Ask L2 for this split's K and V rows, 128-byte lines, before the wait.
	for (int l = tid; l * 32 < cnt * D; l += ATT_THREADS) {
		asm volatile("prefetch.global.L2 [%0];" ::"l"(kc + l * 32));
		asm volatile("prefetch.global.L2 [%0];" ::"l"(vc + l * 32));
	}
	pdl_wait_and_release();
	float *qs = sm, *p = sm + G * D, *red = p + G * max_chunk;
	for (int i = tid; i < G * D; i += ATT_THREADS) qs[i] = q[h0 * D + i];
	__syncthreads();

	// Scores: a thread per position, its K row read once for all G heads.
	float mx[ATT_MAXG], l[ATT_MAXG];
#pragma unroll
	for (int h = 0; h < ATT_MAXG; h++) mx[h] = -INFINITY, l[h] = 0.f;
	const int D4 = D / 4;
	for (int t = tid; t < cnt; t += ATT_THREADS) {
		const float4 *kr = (const float4 *)(kc + (long)t * D);
		float dot[ATT_MAXG];
#pragma unroll
		for (int h = 0; h < ATT_MAXG; h++) dot[h] = 0.f;
#pragma unroll 8
		for (int j = 0; j < D4; j++) {
			float4 a = kr[j];
#pragma unroll
			for (int h = 0; h < ATT_MAXG; h++) {
				if (h < G) {
					float4 b = ((const float4 *)qs)[h * D4 + j];
					dot[h] += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
				}
			}
		}
#pragma unroll
		for (int h = 0; h < ATT_MAXG; h++) {
			if (h < G) {
				p[h * max_chunk + t] = dot[h] * scale;
				mx[h] = fmaxf(mx[h], dot[h] * scale);
			}
		}
	}
	// Block max of every head at once: one barrier for all of them.
#pragma unroll
	for (int h = 0; h < ATT_MAXG; h++) {
		mx[h] = warp_max(mx[h]);
		if (lane == 0 && h < G) scratch[0][w][h] = mx[h];
	}
	__syncthreads();
#pragma unroll
	for (int h = 0; h < ATT_MAXG; h++) {
		if (h < G) {
			mx[h] = scratch[0][0][h];
			for (int j = 1; j < nw; j++) mx[h] = fmaxf(mx[h], scratch[0][j][h]);
		}
	}
	for (int t = tid; t < cnt; t += ATT_THREADS) {
#pragma unroll
		for (int h = 0; h < ATT_MAXG; h++) {
			if (h < G) {
				float e = expf(p[h * max_chunk + t] - mx[h]);
				p[h * max_chunk + t] = e;
				l[h] += e;
			}
		}
	}
#pragma unroll
	for (int h = 0; h < ATT_MAXG; h++) {
		l[h] = warp_sum(l[h]);
		if (lane == 0 && h < G) scratch[1][w][h] = l[h];
	}
	__syncthreads(); // also publishes p
#pragma unroll
	for (int h = 0; h < ATT_MAXG; h++) {
		if (h < G) {
			l[h] = 0.f;
			for (int j = 0; j < nw; j++) l[h] += scratch[1][j][h];
		}
	}

	// p·V: a thread owns a float4 column of every head and every groups-th
	// position, two rows in flight; the groups are summed through red.
	const int groups = max(1, ATT_THREADS / D4);
	for (int idx = tid; idx < D4 * groups; idx += ATT_THREADS) {
		int col = idx % D4, g = idx / D4;
		const float4 *vr = (const float4 *)vc + col;
		float4 acc[ATT_MAXG];
#pragma unroll
		for (int h = 0; h < ATT_MAXG; h++) acc[h] = make_float4(0.f, 0.f, 0.f, 0.f);
		int t = g;
		for (; t + groups < cnt; t += 2 * groups) {
			float4 v0 = vr[(long)t * D4], v1 = vr[(long)(t + groups) * D4];
#pragma unroll
			for (int h = 0; h < ATT_MAXG; h++) {
				if (h < G) {
					float p0 = p[h * max_chunk + t], p1 = p[h * max_chunk + t + groups];
					acc[h].x += p0 * v0.x + p1 * v1.x;
					acc[h].y += p0 * v0.y + p1 * v1.y;
					acc[h].z += p0 * v0.z + p1 * v1.z;
					acc[h].w += p0 * v0.w + p1 * v1.w;
				}
			}
		}
		if (t < cnt) {
			float4 v0 = vr[(long)t * D4];
#pragma unroll
			for (int h = 0; h < ATT_MAXG; h++) {
				if (h < G) {
					float p0 = p[h * max_chunk + t];
					acc[h].x += p0 * v0.x;
					acc[h].y += p0 * v0.y;
					acc[h].z += p0 * v0.z;
					acc[h].w += p0 * v0.w;
				}
			}
		}
#pragma unroll
		for (int h = 0; h < ATT_MAXG; h++)
			if (h < G) ((float4 *)red)[(g * G + h) * D4 + col] = acc[h];
	}
	__syncthreads();
	for (int i = tid; i < G * D; i += ATT_THREADS) {
		int h = i / D;
		float a = 0.f;
		for (int g = 0; g < groups; g++) a += red[g * G * D + i];
		float lh = 0.f, mh = 0.f;
#pragma unroll
		for (int j = 0; j < ATT_MAXG; j++)
			if (j == h) lh = l[j], mh = mx[j];
		if (nvalid == 1) {
			out[h0 * D + i] = a / lh;
		} else {
			part_acc[((long)(hb * ATT_SPLITS + s) * G) * D + i] = a;
			if (i % D == 0) {
				part_ml[2 * ((hb * ATT_SPLITS + s) * G + h)] = mh;
				part_ml[2 * ((hb * ATT_SPLITS + s) * G + h) + 1] = lh;
			}
		}
	}
	if (nvalid == 1) return;

	// The last split of the head group to finish merges.
	__syncthreads(); // every thread's partial writes are issued
	if (tid == 0) {
		__threadfence();
		last = atomicAdd(&tickets[hb], 1u) == (unsigned)nvalid - 1;
	}
	__syncthreads();
	if (!last) return;
	__threadfence();
	// Weights: warp h (one lane per split) takes head h's maxima and sums.
	float *wts = red; // [G][ATT_SPLITS]: exp(m_s - M) / L
	for (int h = w; h < G; h += nw) {
		int i = 2 * ((hb * ATT_SPLITS + lane) * G + h);
		float m = -INFINITY, ls = 0.f;
		if (lane < nvalid) {
			m = __ldcg(part_ml + i);
			ls = __ldcg(part_ml + i + 1);
		}
		float M = warp_max(m);
		float e = lane < nvalid ? expf(m - M) : 0.f;
		float L = warp_sum(ls * e);
		wts[h * ATT_SPLITS + lane] = e / L;
	}
	__syncthreads();
	// Sums: a thread per float4 column of the group's output and every
	// groups2-th split, eight loads in flight; then across groups.
	float4 *red4 = (float4 *)(red + G * ATT_SPLITS);
	const int cols = G * D4;
	const int groups2 = max(1, ATT_THREADS / cols);
	for (int idx = tid; idx < cols * groups2; idx += ATT_THREADS) {
		int col = idx % cols, g = idx / cols, h = col / D4;
		const float *base = part_acc + (long)hb * ATT_SPLITS * G * D + 4 * col;
		float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
		int sp = g;
		for (; sp + 7 * groups2 < nvalid; sp += 8 * groups2) {
			float4 v[8];
#pragma unroll
			for (int u = 0; u < 8; u++) v[u] = ldcg4(base + (long)(sp + u * groups2) * G * D);
#pragma unroll
			for (int u = 0; u < 8; u++) {
				float wt = wts[h * ATT_SPLITS + sp + u * groups2];
				a.x += wt * v[u].x;
				a.y += wt * v[u].y;
				a.z += wt * v[u].z;
				a.w += wt * v[u].w;
			}
		}
		for (; sp < nvalid; sp += groups2) {
			float4 v = ldcg4(base + (long)sp * G * D);
			float wt = wts[h * ATT_SPLITS + sp];
			a.x += wt * v.x;
			a.y += wt * v.y;
			a.z += wt * v.z;
			a.w += wt * v.w;
		}
		red4[g * cols + col] = a;
	}
	__syncthreads();
	for (int col = tid; col < cols; col += ATT_THREADS) {
		float4 a = red4[col];
		for (int g = 1; g < groups2; g++) {
			float4 b = red4[g * cols + col];
			a.x += b.x;
			a.y += b.y;
			a.z += b.z;
			a.w += b.w;
		}
		((float4 *)out)[h0 * D4 + col] = a;
	}
	if (tid == 0) tickets[hb] = 0;
}
