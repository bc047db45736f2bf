//go:build amd64 && !purego

package quant

// dotQ4KRowAVX2 and dotQ5KRowAVX2 return the dot product of nblocks Q4_K
// (Q5_K) super-blocks at w with nblocks Q8_K blocks at x, all in assembly.
//
//go:noescape
func dotQ4KRowAVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotQ5KRowAVX2(w, x *byte, nblocks int) float32

// dotQ4KRow2AVX2 is dotQ4KRowAVX2 for two tokens' activations at once,
// writing out[0] and out[1].
//
//go:noescape
func dotQ4KRow2AVX2(w, x0, x1 *byte, nblocks int, out *float32)

// dotQ4KRow4AVX2 is dotQ4KRowAVX2 for four tokens' activations xstride
// bytes apart, adding token t's 8 partial sums to acc[8t:8t+8].
//
//go:noescape
func dotQ4KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)

// dotQ5KRow4AVX2 is dotQ4KRow4AVX2 for Q5_K.
//
//go:noescape
func dotQ5KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)

// dotQ6KRow4AVX2 is dotQ4KRow4AVX2 for Q6_K.
//
//go:noescape
func dotQ6KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)

// dotQ6KRowAVX2 is dotQ4KRowAVX2 for Q6_K.
//
//go:noescape
func dotQ6KRowAVX2(w, x *byte, nblocks int) float32

// quantizeQ8_KAVX2 is QuantizeQ8_K's loop over nblocks blocks, bit for
// bit where the values are finite; a block with NaN or ±Inf gets a
// non-finite d, for the caller to redo.
//
//go:noescape
func quantizeQ8_KAVX2(x *float32, dst *byte, nblocks int)

// matVecQ4KAVX2, matVecQ5KAVX2 and matVecQ6KAVX2 write the row kernels'
// products of rows consecutive rows at w with the Q8_K row x to
// out[0:rows] (nblocks ≥ 1, rows ≥ 1), the row loop in assembly.
//
//go:noescape
func matVecQ4KAVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ5KAVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ6KAVX2(w, x *byte, nblocks int, out *float32, rows int)

// dotQ2KRowAVX2 and dotQ3KRowAVX2 are dotQ4KRowAVX2 for Q2_K and Q3_K.
//
//go:noescape
func dotQ2KRowAVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotQ3KRowAVX2(w, x *byte, nblocks int) float32

// matVecQ2KAVX2 and matVecQ3KAVX2 are matVecQ4KAVX2 for Q2_K and Q3_K.
//
//go:noescape
func matVecQ2KAVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ3KAVX2(w, x *byte, nblocks int, out *float32, rows int)

// q4KX8Tile4AVX2 adds the products of eight Q4_K rows packed by packQ4KX8
// (nblocks super-blocks at w) with four tokens' Q8_K rows xstride bytes
// apart from x to out[t·ostride+r], t = 0..3, r = 0..7.
//
//go:noescape
func q4KX8Tile4AVX2(w, x *byte, xstride, nblocks int, out *float32, ostride int)

// packQ4KX8Codes writes the codes of nb super-blocks of the eight Q4_K
// rows at w, rb bytes apart, in packQ4KX8's layout at dst.
//
//go:noescape
func packQ4KX8Codes(dst, w *byte, rb, nb int)

// q6KX8Tile4AVX2 is q4KX8Tile4AVX2 for Q6_K rows packed by packQ6KX8.
//
//go:noescape
func q6KX8Tile4AVX2(w, x *byte, xstride, nblocks int, out *float32, ostride int)

// packQ6KX8Codes writes the codes of nb super-blocks of the eight Q6_K
// rows at w, rb bytes apart, decoded to a byte each, in packQ6KX8's
// layout at dst.
//
//go:noescape
func packQ6KX8Codes(dst, w *byte, rb, nb int)
