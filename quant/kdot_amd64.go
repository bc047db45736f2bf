//go:build amd64 && !purego

package quant

// q4KSumsAVX2 sets out[i] to Σ_j sc[8i+j]·Σ_l q·y over the eight 32-element
// sub-blocks j of Q4_K super-block i at w and Q8_K block i at x.
//
//go:noescape
func q4KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32)

// q6KSumsAVX2 sets out[i] to Σ_j scale_j·Σ_l q·y over the sixteen
// 16-element sub-blocks j of Q6_K super-block i at w and Q8_K block i at
// x, with the codes q unsigned (0..63): the caller subtracts the offset of
// 32 through the bsums.
//
//go:noescape
func q6KSumsAVX2(w, x *byte, nblocks int, out *int32)

// q5KSumsAVX2 is q4KSumsAVX2 for Q5_K super-blocks.
//
//go:noescape
func q5KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32)
