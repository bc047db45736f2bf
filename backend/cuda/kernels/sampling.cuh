// sampling.cuh: the sampler chain's parameters and the penalties, shared by
// the output head (logits.cu, which applies the penalties as it writes each
// logit) and the chain itself (sampler.cu). The arithmetic copies package
// sample exactly; its doc.go spells out the recipe.
#pragma once
#include "common.cuh"

// samp_params mirrors the Go side's sampParams word for word. The host
// writes it to pinned memory before each step and the embedding kernel
// copies it to device memory, so later kernels read it from there.
#define SP_DRAW 1    // draw (temperature > 0); else greedy
#define SP_PENALTY 2 // penalties on
#define SP_REPEAT 4  // repeat penalty on
#define SP_TOPP 8    // top-p on
#define SP_MINP 16   // min-p on
struct samp_params {
	unsigned flags;
	int top_k; // 0: off
	float top_p;
	float temperature;
	float repeat, freq, presence;
	unsigned last_n;          // the history ring's length (PenaltyLastN)
	double min_p_log;         // log(MinP), computed by the host in float64
	unsigned long long seed;  //
	unsigned long long step;  // the draw's index in the random stream
};
#define SP_WORDS 14

// penalize is sample.penalize: each operation rounded to float32 on its
// own, no fused multiply-add.
__device__ __forceinline__ float penalize(float l, int count, const samp_params &p) {
	if (p.flags & SP_REPEAT) l = l <= 0.f ? __fmul_rn(l, p.repeat) : __fdiv_rn(l, p.repeat);
	float freq = __fmul_rn((float)count, p.freq);
	return __fsub_rn(l, __fadd_rn(freq, p.presence));
}
