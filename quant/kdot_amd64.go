//go:build amd64 && !purego

package quant

// q6KSumsAVX2 sets out[2i] to Σ_j scale_j·Σ_l q·y over the sixteen
// 16-element sub-blocks j of Q6_K super-block i at w and Q8_K block i at
// x, with the codes q unsigned (0..63), and out[2i+1] to
// Σ_j scale_j·bsums_j, through which the caller takes out the offset of 32.
//
//go:noescape
func q6KSumsAVX2(w, x *byte, nblocks int, out *int32)

// dotQ4KRowAVX2 and dotQ5KRowAVX2 return the dot product of nblocks Q4_K
// (Q5_K) super-blocks at w with nblocks Q8_K blocks at x, all in assembly.
//
//go:noescape
func dotQ4KRowAVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotQ5KRowAVX2(w, x *byte, nblocks int) float32
