//go:build amd64 && !purego

package quant

// q4KSumsAVX2 sets out[2i] to Σ_j sc_j·Σ_l q·y over the eight 32-element
// sub-blocks j of Q4_K super-block i at w and Q8_K block i at x, and
// out[2i+1] to Σ_j m_j·(bsums[2j]+bsums[2j+1]). sc holds 24 int16 per
// block: the eight scales, then the eight mins, each twice.
//
//go:noescape
func q4KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32)

// q6KSumsAVX2 sets out[2i] to Σ_j scale_j·Σ_l q·y over the sixteen
// 16-element sub-blocks j of Q6_K super-block i at w and Q8_K block i at
// x, with the codes q unsigned (0..63), and out[2i+1] to
// Σ_j scale_j·bsums_j, through which the caller takes out the offset of 32.
//
//go:noescape
func q6KSumsAVX2(w, x *byte, nblocks int, out *int32)

// q5KSumsAVX2 is q4KSumsAVX2 for Q5_K super-blocks.
//
//go:noescape
func q5KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32)
