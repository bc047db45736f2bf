// sampler: the sampler chain of package sample on the device, after the
// output head (logits.cu) has applied the penalties and found the argmax.
// One block of SAMP_THREADS threads:
//
//  1. Greedy: the argmax is the token.
//  2. Candidates: with top-k on, a histogram of the logits in bins of 1/32
//     nat below the max finds the smallest set of bins holding k tokens;
//     with top-k off, the tokens whose shift from the max is at least the
//     top-p floor (from package sample's mass histogram over whole nats) or
//     the min-p floor. Those are collected (at most SAMP_CAP) and sorted by
//     logit descending, then id ascending: sample's candidate order.
//  3. Top-k, top-p, min-p and the temperature draw on the sorted prefix,
//     in float64, with every running sum taken in candidate order by one
//     thread, as sample does, and the draw from sample.Uniform's formula.
//
// The token goes to out (host-mapped) and, with penalties on, into the
// history ring and its counts for the next step. When more than SAMP_CAP
// tokens are candidates (e.g. temperature alone over a large vocabulary) the
// kernel writes SAMP_OVERFLOW and the host samples those logits instead.
#include "sampling.cuh"

#define SAMP_THREADS 1024
#define SAMP_BINS (2 * SAMP_THREADS) // 1/32 nat each, the last one open-ended
#define SAMP_CAP 4096
#define SAMP_OVERFLOW (-2)

typedef unsigned long long u64;

// mix64 and uniform are sample.Uniform, bit for bit.
__device__ __forceinline__ u64 mix64(u64 z) {
	z ^= z >> 30;
	z *= 0xBF58476D1CE4E5B9ull;
	z ^= z >> 27;
	z *= 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

__device__ __forceinline__ float uniform(u64 seed, u64 step) {
	u64 r = mix64(mix64(seed) + (step + 1) * 0x9E3779B97F4A7C15ull);
	return (float)(r >> 40) * (1.0f / 16777216.0f);
}

// sort_key orders candidates as sample does (logit descending, then id
// ascending) when sorted ascending. -0 and +0 are one logit there.
__device__ __forceinline__ u64 sort_key(float l, int id) {
	if (l == 0.f) l = 0.f;
	unsigned b = __float_as_uint(l);
	unsigned o = (b & 0x80000000u) ? ~b : (b | 0x80000000u); // grows with l
	return ((u64)(~o) << 32) | (unsigned)id;
}

__device__ __forceinline__ float key_logit(u64 key) {
	unsigned o = ~(unsigned)(key >> 32);
	return __uint_as_float((o & 0x80000000u) ? (o ^ 0x80000000u) : ~o);
}

__device__ __forceinline__ int key_id(u64 key) { return (int)(unsigned)key; }

// shift is sample's shift: the logit relative to the max in float64, 0
// when equal (so infinite logits compare sanely).
__device__ __forceinline__ double shift(float l, float m) { return l == m ? 0.0 : (double)l - (double)m; }

// top_k_bin is the histogram bin of logit l below the max m; monotone in l
// and equal for equal logits, which is all the bin search needs.
__device__ __forceinline__ int top_k_bin(float l, float m) {
	float d = l == m ? 0.f : m - l;
	return d < 64.f ? (int)(d * 32.f) : SAMP_BINS - 1;
}

__device__ __forceinline__ double block_sum_d(double v, double *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads();
	if (lane == 0) scratch[w] = v;
	__syncthreads();
	v = lane < SAMP_THREADS / 32 ? scratch[lane] : 0.0;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// block_excl_scan returns the sum of v over the threads before this one.
__device__ __forceinline__ int block_excl_scan(int v, int *scratch) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int x = v;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		int y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o) x += y;
	}
	__syncthreads();
	if (lane == 31) scratch[w] = x;
	__syncthreads();
	int before = 0;
	for (int j = 0; j < w; j++) before += scratch[j];
	return before + x - v;
}

struct samp_smem {
	u64 *keys;    // SAMP_CAP candidates
	double *wts;  // SAMP_CAP weights
	int *bins;    // SAMP_BINS
	double *mass; // 64
	double *dscr; // 32
	int *iscr;    // 32
	int *vars;    // 4: candidate count, bin, kept count, token
	double *dvar; // 1: top-p floor
};

// collect gathers the candidates into keys (top-k: bins up to bin; else
// shift >= floor) and returns how many there are, even past SAMP_CAP.
__device__ int collect(const float *logits, int n, float m, bool topk, int bin, double floor, samp_smem &s) {
	int lane = threadIdx.x & 31;
	if (threadIdx.x == 0) s.vars[0] = 0;
	__syncthreads();
	for (int base = 0; base < n; base += SAMP_THREADS) {
		int e = base + threadIdx.x;
		float l = e < n ? logits[e] : __int_as_float(0x7fc00000);
		bool keep = l == l && (topk ? top_k_bin(l, m) <= bin : shift(l, m) >= floor);
		unsigned ball = __ballot_sync(0xffffffffu, keep);
		int at = 0;
		if (lane == 0 && ball) at = atomicAdd(&s.vars[0], __popc(ball));
		at = __shfl_sync(0xffffffffu, at, 0) + __popc(ball & ((1u << lane) - 1));
		if (keep && at < SAMP_CAP) s.keys[at] = sort_key(l, e);
	}
	__syncthreads();
	return s.vars[0];
}

// sort_keys sorts keys[0:cnt] ascending (bitonic, padded to a power of 2).
__device__ void sort_keys(int cnt, samp_smem &s) {
	int np = 2;
	while (np < cnt) np <<= 1;
	for (int i = cnt + threadIdx.x; i < np; i += SAMP_THREADS) s.keys[i] = ~0ull;
	__syncthreads();
	for (int k = 2; k <= np; k <<= 1) {
		for (int j = k >> 1; j > 0; j >>= 1) {
			for (int i = threadIdx.x; i < np; i += SAMP_THREADS) {
				int ixj = i ^ j;
				if (ixj > i) {
					u64 a = s.keys[i], b = s.keys[ixj];
					if ((a > b) == ((i & k) == 0)) {
						s.keys[i] = b;
						s.keys[ixj] = a;
					}
				}
			}
			__syncthreads();
		}
	}
}

// exp_shifts fills wts[0:k] with exp(shift/temp) of the sorted candidates.
__device__ void exp_shifts(int k, double temp, samp_smem &s) {
	float m = key_logit(s.keys[0]);
	for (int i = threadIdx.x; i < k; i += SAMP_THREADS) s.wts[i] = exp(shift(key_logit(s.keys[i]), m) / temp);
	__syncthreads();
}

// draw_token runs steps 2 and 3 of the chain; every thread gets the token,
// or SAMP_OVERFLOW.
__device__ int draw_token(const float *logits, int n, int best, const samp_params &p, samp_smem &s) {
	const int tid = threadIdx.x;
	const float m = logits[best];
	const bool topk = p.top_k > 0, topp = p.flags & SP_TOPP, minp = p.flags & SP_MINP;
	const double top = (double)p.top_p;
	const double min_floor = minp ? p.min_p_log : -INFINITY;
	int bin = 0;
	double floor = min_floor, z = 0.0;
	bool try_top = false;
	if (topk) {
		for (int i = tid; i < SAMP_BINS; i += SAMP_THREADS) s.bins[i] = 0;
		__syncthreads();
		for (int e = tid; e < n; e += SAMP_THREADS) {
			float l = logits[e];
			if (l == l) atomicAdd(&s.bins[top_k_bin(l, m)], 1);
		}
		__syncthreads();
		if (tid == 0) s.vars[1] = SAMP_BINS - 1; // fewer than k non-NaN tokens: all
		int b0 = s.bins[2 * tid], b1 = s.bins[2 * tid + 1];
		int before = block_excl_scan(b0 + b1, s.iscr);
		if (before < p.top_k && before + b0 + b1 >= p.top_k) s.vars[1] = before + b0 >= p.top_k ? 2 * tid : 2 * tid + 1;
		__syncthreads();
		bin = s.vars[1];
	} else if (topp) {
		// sample.topPFloor: z over every token, and the mass by whole nats.
		if (tid < 64) s.mass[tid] = 0.0;
		__syncthreads();
		double zl = 0.0;
		for (int e = tid; e < n; e += SAMP_THREADS) {
			float l = logits[e];
			if (l != l) continue;
			double d = shift(l, m), x = exp(d);
			zl += x;
			if (d > -64) atomicAdd(&s.mass[(int)(-d)], x);
		}
		z = block_sum_d(zl, s.dscr);
		if (tid == 0) {
			double want = top * z * (1 + 1e-9), cum = 0.0, f = -INFINITY;
			for (int b = 0; b < 64; b++) {
				cum += s.mass[b];
				if (cum >= want) {
					f = -(double)(b + 1);
					break;
				}
			}
			*s.dvar = f;
		}
		__syncthreads();
		if (*s.dvar > min_floor) {
			floor = *s.dvar;
			try_top = true;
		}
	}

	int kept;
	for (;;) {
		int cnt = collect(logits, n, m, topk, bin, floor, s);
		if (cnt > SAMP_CAP) return SAMP_OVERFLOW;
		sort_keys(cnt, s);
		kept = cnt;
		if (topk) {
			kept = min(p.top_k, cnt);
			if (topp) {
				// sample.cutTopP with z = 0: normalized by the kept ones.
				exp_shifts(kept, 1.0, s);
				if (tid == 0) {
					double zk = 0.0, cum = 0.0;
					for (int i = 0; i < kept; i++) zk += s.wts[i];
					int k2 = kept;
					for (int i = 0; i < kept; i++) {
						cum += s.wts[i] / zk;
						if (cum >= top) {
							k2 = i + 1;
							break;
						}
					}
					s.vars[2] = k2;
				}
				__syncthreads();
				kept = s.vars[2];
			}
			if (minp) {
				// Every thread has read the top-p cut from vars[2]
				// before thread 0 writes the min-p cut there
				// (compute-sanitizer's racecheck found the hazard).
				__syncthreads();
				if (tid == 0) {
					float m0 = key_logit(s.keys[0]);
					int k3 = kept;
					for (int i = 0; i < kept; i++) {
						if (shift(key_logit(s.keys[i]), m0) < p.min_p_log) {
							k3 = i;
							break;
						}
					}
					s.vars[2] = k3;
				}
				__syncthreads();
				kept = s.vars[2];
			}
			break;
		}
		if (!topp) break;
		// sample.cutTopP with the all-token z.
		exp_shifts(cnt, 1.0, s);
		if (tid == 0) {
			double cum = 0.0;
			int k2 = -1;
			for (int i = 0; i < cnt; i++) {
				cum += s.wts[i] / z;
				if (cum >= top) {
					k2 = i + 1;
					break;
				}
			}
			s.vars[2] = k2;
		}
		__syncthreads();
		kept = s.vars[2];
		if (kept > 0) break;
		kept = cnt;
		if (!try_top) break;
		// Rounding put the top-p boundary just past the floor: collect
		// down to the min-p floor and cut again, as sample does.
		try_top = false;
		floor = min_floor;
	}

	// Temperature and the draw.
	exp_shifts(kept, (double)p.temperature, s);
	if (tid == 0) {
		double zt = 0.0, cum = 0.0;
		for (int i = 0; i < kept; i++) zt += s.wts[i];
		double x = (double)uniform(p.seed, p.step) * zt;
		int pick = 0;
		for (int i = 0; i < kept; i++) {
			cum += s.wts[i];
			if (x < cum) {
				pick = i;
				break;
			}
		}
		s.vars[3] = key_id(s.keys[pick]);
	}
	__syncthreads();
	return s.vars[3];
}

// history_add appends tok to the penalty history: hist = {length, oldest,
// ring[last_n]}, counts per token id (ids outside the vocabulary are in the
// ring but not counted, as sample ignores them).
__device__ void history_add(int *hist, int *counts, int n, int last_n, int tok) {
	int len = hist[0], oldest = hist[1];
	int *ring = hist + 2;
	if (len < last_n) {
		ring[len] = tok;
		hist[0] = len + 1;
	} else {
		int old = ring[oldest];
		if (old >= 0 && old < n) counts[old]--;
		ring[oldest] = tok;
		hist[1] = oldest + 1 == last_n ? 0 : oldest + 1;
	}
	counts[tok]++;
}

// sample_chain draws the step's token and writes it to out, or with the
// step's position (pos) to slot pos&1 of out and, with pos+1, to next: the
// input of a step chained to this one (logits.cu), whose draw is the
// stream's next: the step word of params is advanced for it (a step fed
// by the host overwrites params from io).
extern "C" __global__ void __launch_bounds__(SAMP_THREADS)
    sample_chain(const float *logits, int n, samp_params *params, const int *best, int *hist, int *counts,
                 int *out, const int *pos, int *next) {
	extern __shared__ u64 dyn[]; // keys[SAMP_CAP] | wts[SAMP_CAP] | bins[SAMP_BINS]
	__shared__ double mass[64], dscr[32], dvar;
	__shared__ int iscr[32], vars[4];
	samp_smem s = {dyn, (double *)(dyn + SAMP_CAP), (int *)((double *)(dyn + SAMP_CAP) + SAMP_CAP), mass, dscr, iscr,
	               vars, &dvar};
	pdl_wait_and_release();
	samp_params p = *params;
	int tok = *best;
	if ((p.flags & SP_DRAW) && tok >= 0) tok = draw_token(logits, n, tok, p, s);
	if (threadIdx.x == 0) {
		const int at = pos ? *pos : 0;
		*(volatile int *)(out + (at & 1)) = tok;
		if (tok >= 0 && (p.flags & SP_PENALTY)) history_add(hist, counts, n, (int)p.last_n, tok);
		if (next) {
			next[0] = tok;
			next[1] = at + 1;
			params->step = p.step + 1;
		}
	}
}
