// attention: one query token against the KV cache, flash-decoding style.
// Block (h, s) takes query head h and the positions [s*chunk, (s+1)*chunk)
// of its KV head (grouped-query: kv head = h / (n_head/n_kv_head)), and
// writes an unnormalized partial: the max score m, the sum of exp(score-m)
// and the exp-weighted sum of V rows. The last block of each head to finish
// (a ticket counter per head, left at zero again) merges the head's partials
// into out, once, so the output projection reads a plain vector. Splits past
// the current length do nothing but take their ticket.
//
// The grid is fixed by the context size, so one captured graph serves every
// position: the length comes from pos_ptr in device memory.
#include "common.cuh"

// merge_if_last takes the block's ticket for head h; the last of the head's
// nsplit blocks merges the nvalid valid partials into out[h*head_dim:].
// w needs nsplit floats of shared memory (the caller lends its 4*blockDim).
__device__ __forceinline__ void merge_if_last(int h, int nsplit, int nvalid, int head_dim, const float *part_acc,
                                              const float *part_ml, unsigned *tickets, float *out, float *w,
                                              float *scratch, bool *last) {
	__syncthreads(); // every thread's partial writes are issued
	if (threadIdx.x == 0) {
		__threadfence();
		*last = atomicAdd(&tickets[h], 1u) == (unsigned)nsplit - 1;
	}
	__syncthreads();
	if (!*last) return;
	__threadfence();
	nvalid = min(nvalid, nsplit);
	const volatile float *ml = part_ml + 2 * h * nsplit;
	float m = -INFINITY;
	for (int s = threadIdx.x; s < nvalid; s += blockDim.x) m = fmaxf(m, ml[2 * s]);
	m = block_max(m, scratch);
	float l = 0.f;
	for (int s = threadIdx.x; s < nvalid; s += blockDim.x) {
		float e = expf(ml[2 * s] - m);
		w[s] = e;
		l += ml[2 * s + 1] * e;
	}
	l = block_sum(l, scratch); // its barriers also publish w
	const volatile float *acc = part_acc + (long)h * nsplit * head_dim;
	for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
		float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
		int s = 0;
		for (; s + 3 < nvalid; s += 4) {
			a0 += w[s] * acc[(long)s * head_dim + d];
			a1 += w[s + 1] * acc[(long)(s + 1) * head_dim + d];
			a2 += w[s + 2] * acc[(long)(s + 2) * head_dim + d];
			a3 += w[s + 3] * acc[(long)(s + 3) * head_dim + d];
		}
		for (; s < nvalid; s++) a0 += w[s] * acc[(long)s * head_dim + d];
		out[h * head_dim + d] = (a0 + a1 + a2 + a3) / l;
	}
	if (threadIdx.x == 0) tickets[h] = 0;
}

extern "C" __global__ void __launch_bounds__(128)
    attention(const float *q, const float *k_cache, const float *v_cache, int ctx_max, int head_dim, int n_head,
              int n_kv_head, const int *pos_ptr, float scale, int chunk, float *part_acc, float *part_ml,
              unsigned *tickets, float *out) {
	extern __shared__ float sm[]; // q[head_dim] | p[chunk] | red[max(4*blockDim, head_dim)] | w[nsplit]
	__shared__ float scratch[32];
	__shared__ bool last;
	pdl_wait_and_release();
	int h = blockIdx.x, s = blockIdx.y, nsplit = gridDim.y, tid = threadIdx.x;
	int kvh = h / (n_head / n_kv_head);
	int t0 = s * chunk, t1 = min(*pos_ptr + 1, t0 + chunk);
	float *ml = part_ml + 2 * (h * nsplit + s);
	float *acc = part_acc + (long)(h * nsplit + s) * head_dim;
	int n = max(t1 - t0, 0);
	float *qs = sm, *p = sm + head_dim, *red = p + chunk;
	if (n == 0) { // past the current length: only the ticket
		merge_if_last(h, nsplit, (*pos_ptr + chunk) / chunk, head_dim, part_acc, part_ml, tickets, out, red, scratch, &last);
		return;
	}
	for (int d = tid; d < head_dim; d += blockDim.x) qs[d] = q[h * head_dim + d];
	__syncthreads();
	const float *kc = k_cache + ((long)kvh * ctx_max + t0) * head_dim;
	const float *vc = v_cache + ((long)kvh * ctx_max + t0) * head_dim;
	// Scores: a thread per position, its K row read as independent float4s.
	float mx = -INFINITY;
	const float4 *qv = (const float4 *)qs;
	for (int t = tid; t < n; t += blockDim.x) {
		const float4 *kr = (const float4 *)(kc + (long)t * head_dim);
		float dot = 0.f;
#pragma unroll 8
		for (int j = 0; j < head_dim / 4; j++) {
			float4 a = kr[j], b = qv[j];
			dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
		}
		dot *= scale;
		p[t] = dot;
		mx = fmaxf(mx, dot);
	}
	mx = block_max(mx, scratch);
	float l = 0.f;
	for (int t = tid; t < n; t += blockDim.x) {
		float e = expf(p[t] - mx);
		p[t] = e;
		l += e;
	}
	l = block_sum(l, scratch); // its barriers also publish p[]
	// p·V: a thread owns four dimensions (a float4 column) and every
	// groups-th position, with four rows in flight; the groups are summed
	// through shared memory.
	int cols = head_dim / 4;
	int groups = blockDim.x >= cols ? blockDim.x / cols : 1;
	for (int idx = tid; idx < cols * groups; idx += blockDim.x) {
		int c = idx % cols, g = idx / cols;
		const float4 *vr = (const float4 *)vc + c;
		float4 a0 = {0.f, 0.f, 0.f, 0.f}, a1 = a0, a2 = a0, a3 = a0;
		int t = g;
		for (; t + 3 * groups < n; t += 4 * groups) {
			float4 v0 = vr[(long)t * cols], v1 = vr[(long)(t + groups) * cols];
			float4 v2 = vr[(long)(t + 2 * groups) * cols], v3 = vr[(long)(t + 3 * groups) * cols];
			float p0 = p[t], p1 = p[t + groups], p2 = p[t + 2 * groups], p3 = p[t + 3 * groups];
			a0.x += p0 * v0.x; a0.y += p0 * v0.y; a0.z += p0 * v0.z; a0.w += p0 * v0.w;
			a1.x += p1 * v1.x; a1.y += p1 * v1.y; a1.z += p1 * v1.z; a1.w += p1 * v1.w;
			a2.x += p2 * v2.x; a2.y += p2 * v2.y; a2.z += p2 * v2.z; a2.w += p2 * v2.w;
			a3.x += p3 * v3.x; a3.y += p3 * v3.y; a3.z += p3 * v3.z; a3.w += p3 * v3.w;
		}
		for (; t < n; t += groups) {
			float4 v0 = vr[(long)t * cols];
			float p0 = p[t];
			a0.x += p0 * v0.x; a0.y += p0 * v0.y; a0.z += p0 * v0.z; a0.w += p0 * v0.w;
		}
		a0.x += a1.x + a2.x + a3.x;
		a0.y += a1.y + a2.y + a3.y;
		a0.z += a1.z + a2.z + a3.z;
		a0.w += a1.w + a2.w + a3.w;
		float *r = red + g * head_dim + 4 * c;
		r[0] = a0.x;
		r[1] = a0.y;
		r[2] = a0.z;
		r[3] = a0.w;
	}
	__syncthreads();
	for (int d = tid; d < head_dim; d += blockDim.x) {
		float a = 0.f;
		for (int g = 0; g < groups; g++) a += red[g * head_dim + d];
		acc[d] = a;
	}
	if (tid == 0) {
		ml[0] = mx;
		ml[1] = l;
	}
	merge_if_last(h, nsplit, (*pos_ptr + chunk) / chunk, head_dim, part_acc, part_ml, tickets, out, red, scratch, &last);
}
