//go:build amd64 && !purego

package quant

// useAVX2 selects the assembly kernels in dot_amd64.s, and useVNNI their
// AVX512-VNNI variants where those exist. Both are set once, at package
// initialization, from CPUID.
var (
	useAVX2 = hasAVX2FMA()
	useVNNI = useAVX2 && hasAVX512VNNI()
)

// The kernels take raw pointers; their Go callers have checked the lengths.

//go:noescape
func dotQ4_0Q8_0AVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotQ8_0Q8_0AVX2(w, x *byte, nblocks int) float32

//go:noescape
func matVecQ4_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ8_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ4_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ8_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func quantizeQ8_0AVX2(x *float32, dst *byte, nblocks int)

//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

//go:noescape
func axpyAVX2(a float32, x, y *float32, n int)

//go:noescape
func dotQ4_1Q8_0AVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotQ5_0Q8_0AVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotQ5_1Q8_0AVX2(w, x *byte, nblocks int) float32

// matVecQ4_1Q8_0AVX2, matVecQ5_0Q8_0AVX2 and matVecQ5_1Q8_0AVX2 write the
// dot products of rows consecutive rows of nblocks blocks at w with the
// nblocks Q8_0 blocks at x to out[0:rows] (rows ≥ 1, nblocks ≥ 1).
//
//go:noescape
func matVecQ4_1Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ5_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ5_1Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)

// matVecQ4_1Q8_0VNNI, matVecQ5_0Q8_0VNNI and matVecQ5_1Q8_0VNNI are the
// row kernels' matrix–vector products four rows at a time with
// AVX512-VNNI (MatVecRowsQ8_0).
//
//go:noescape
func matVecQ4_1Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ5_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ5_1Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)

// matVecIQ4_NLQ8_0VNNI is matVecQ4_0Q8_0VNNI for IQ4_NL weights, rows a
// multiple of 4.
//
//go:noescape
func matVecIQ4_NLQ8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)

// matVecIQ4_NLQ8_0Rows4AVX2 is matVecIQ4_NLQ8_0AVX2 four rows at a time,
// rows a multiple of 4 (dot_amd64.s).
//
//go:noescape
func matVecIQ4_NLQ8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)

// matVecQ4_1Q8_0Rows4AVX2, matVecQ5_0Q8_0Rows4AVX2 and
// matVecQ5_1Q8_0Rows4AVX2 are the single-row AVX2 kernels four rows at a
// time, rows a multiple of 4 (dot_amd64.s).
//
//go:noescape
func matVecQ4_1Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ5_0Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)

//go:noescape
func matVecQ5_1Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int)

// matVecIQ4_XSQ8_KRows4AVX2 is matVecIQ4_XSQ8_KAVX2 four rows at a time,
// rows a multiple of 4 (dot_amd64.s).
//
//go:noescape
func matVecIQ4_XSQ8_KRows4AVX2(w, x *byte, nblocks int, out *float32, rows int)
