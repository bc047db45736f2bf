// rope.cuh: the rotation's pairing, shared by the kernels that rotate
// queries and keys (qkv_rope.cu, qk_norm.cu, prefill_rope.cu), so that
// decode and prefill pair alike. Those kernels also multiply the queries by
// the attention temperature of their position (model.Block.AttnTemp): a
// table the host computes (temp[pos]; null: none), as cheap to read as the
// rotation's, where computing it in the kernel put a logarithm into the
// code of every model's step (3% of a SmolLM-135M token on an H200).
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
