//go:build amd64 && !purego

package quant

// The MatMul kernels in matmul_amd64.s; matMulAsm checks their arguments.

// q8SumsAVX2 fills the activation table of matMulAsm: for token t < tokens
// (rows of x at xstride bytes) and block b < nblocks, the entry at
// ((t>>groupShift)*nblocks + b)<<groupShift + t&(1<<groupShift-1), 8 bytes
// each, holds the block's scale as float32 and −mult·Σy as int32.
//
//go:noescape
func q8SumsAVX2(x *byte, xstride, tokens, nblocks, mult, groupShift int, sums *byte)

// q8ScaledSumsAVX2 is q8SumsAVX2 for the weights with a min: the second
// word of an entry holds the block's d(x)·Σy as float32. mult is unused;
// the signature is q8SumsAVX2's, whose body it shares.
//
//go:noescape
func q8ScaledSumsAVX2(x *byte, xstride, tokens, nblocks, mult, groupShift int, sums *byte)

// The pack functions transpose nblocks blocks of nrows (at most 16 or 8)
// rows, rowBytes apart, into dst; rows past nrows repeat the last one.
//
//go:noescape
func packQ4_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packQ8_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packIQ4_NLVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

// packIQ4_XSVNNI packs nblocks IQ4_XS super-blocks as 8·nblocks blocks
// of packIQ4_NLVNNI's layout, one a sub-block.
//
//go:noescape
func packIQ4_XSVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packQ4_1VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

// packQ4_KVNNI and packQ5_KVNNI pack nblocks Q4_K (Q5_K) super-blocks as
// 8·nblocks blocks of packQ4_1VNNI's layout, one a sub-block, the scales
// d·sc and the mins −dmin·m.
//
//go:noescape
func packQ4_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packQ5_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

// packQ6_KVNNI packs nblocks Q6_K super-blocks, 5,184 bytes each: 8
// blocks of 32 unsigned 6-bit codes with the int32 scales of their two
// sub-blocks of 16, then the rows' d.
//
//go:noescape
func packQ6_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

// packQ3_KVNNI packs nblocks Q3_K super-blocks as packQ6_KVNNI packs
// Q6_K: codes low bits + 4·high bit, scales less 32.
//
//go:noescape
func packQ3_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

// packQ2_KVNNI packs nblocks Q2_K super-blocks, 5,760 bytes each: codes
// and scales as packQ6_KVNNI lays out Q6_K's, then the rows' d and dmin,
// then their 16 mins as int16 pairs.
//
//go:noescape
func packQ2_KVNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packQ5_1VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

// packQ5_0VNNI is packQ5_1VNNI for Q5_0 weights: the codes q of d·(q−16)
// with the scale d and the min −16·d.
//
//go:noescape
func packQ5_0VNNI(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packQ4_0AVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packQ8_0AVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)

//go:noescape
func packIQ4_NLAVX2(w *byte, rowBytes, nrows, nblocks int, dst *byte)

// The mulPacked functions multiply a packed row group by tokens rows of
// x and its table, storing (or, with accumulate 1, adding) row r of token
// t at out[t*outStride+r] for r < nrows. Meanwhile they prefetch the
// prefetchLen bytes at prefetch (which need not be valid memory).
//
//go:noescape
func mulPackedVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)

// mulPackedMinVNNI is mulPackedVNNI for Q4_1 and Q5_1 blocks, with
// q8ScaledSumsAVX2's table.
//
//go:noescape
func mulPackedMinVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)

// mulPackedXSVNNI is mulPackedVNNI for the sub-blocks of one Q8_K block
// a token, whose codes lie 32 bytes apart.
//
//go:noescape
func mulPackedXSVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)

// mulPackedKMinVNNI is mulPackedMinVNNI for the sub-blocks of one Q8_K
// block a token, whose codes lie 32 bytes apart.
//
//go:noescape
func mulPackedKMinVNNI(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)

// mulPackedQ6_KVNNI is mulPackedVNNI for one packed Q6_K super-block a
// token, with a table of 16 entries a super-block: the Q8_K block's d and
// −32·Σy of each sub-block of 16.
//
//go:noescape
func mulPackedQ6_KVNNI(pack *byte, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)

// mulPackedQ2_KVNNI is mulPackedQ6_KVNNI for a packed Q2_K super-block,
// the min term −dmin·Σ m·Σy taken from the Q8_K blocks' bsums.
//
//go:noescape
func mulPackedQ2_KVNNI(pack *byte, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)

//go:noescape
func mulPackedQ4_0AVX2(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)

//go:noescape
func mulPackedQ8_0AVX2(pack *byte, nblocks int, x *byte, xstride, tokens int, sums *byte, out *float32, outStride, nrows, accumulate int, prefetch *byte, prefetchLen int)
