// rope.cuh: the rotation's pairing and the attention temperature, shared by
// the kernels that rotate queries and keys (qkv_rope.cu, qk_norm.cu,
// prefill_rope.cu), so that decode and prefill pair and scale alike.
#pragma once
#include "common.cuh"

// pair_rows gives the two elements (within a head) of rotation pair i:
// adjacent ones (2i, 2i+1) for llama's "normal" RoPE, (i, i+rope_dim/2)
// for NeoX; pairs past rope_dim/2 are adjacent elements past rope_dim,
// which stay unrotated. A rope_dim of 0 rotates nothing.
__device__ __forceinline__ void pair_rows(int i, int rhalf, int rope_dim, int neox, int &a, int &b) {
	if (neox && i < rhalf) {
		a = i;
		b = i + rhalf;
	} else if (neox) {
		a = rope_dim + 2 * (i - rhalf);
		b = a + 1;
	} else {
		a = 2 * i;
		b = a + 1;
	}
}

// attn_temp is the query multiplier of the token at pos under attention
// temperature tuning (model.Block.AttnTemp): 1 + scale·ln(⌊pos/floor⌋ + 1),
// or 1 when scale is 0.
__device__ __forceinline__ float attn_temp(int pos, float scale, int floor_) {
	if (scale == 0.f) return 1.f;
	return logf((float)(pos / floor_) + 1.f) * scale + 1.f;
}
