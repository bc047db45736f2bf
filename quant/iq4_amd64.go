//go:build amd64 && !purego

package quant

// The IQ4 kernels of iq4_amd64.s; their Go callers have checked the lengths.

//go:noescape
func dotIQ4_NLQ8_0AVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotIQ4_XSQ8_KAVX2(w, x *byte, nblocks int) float32

// matVecIQ4_NLQ8_0AVX2 and matVecIQ4_XSQ8_KAVX2 write the row kernels'
// products of rows consecutive rows at w with one activation row x to
// out[0:rows] (nblocks ≥ 1, rows ≥ 1), the row loop in assembly.
//
//go:noescape
func matVecIQ4_NLQ8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecIQ4_XSQ8_KAVX2(w, x *byte, nblocks int, out *float32, rows int)

// dotIQ4XSRow4AVX2 is dotIQ4_XSQ8_KAVX2 for four tokens' activations
// xstride bytes apart, adding token t's 8 partial sums to acc[8t:8t+8].
//
//go:noescape
func dotIQ4XSRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)
