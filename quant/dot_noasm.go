//go:build !amd64 || purego

package quant

// Without assembly every kernel is the Go code in dot_generic.go. The stubs
// below only satisfy the compiler: with useAVX2 constant false the calls to
// them are removed.

const (
	useAVX2 = false
	useVNNI = false
)

func dotQ4_0Q8_0AVX2(w, x *byte, nblocks int) float32                    { panic("unreachable") }
func dotQ8_0Q8_0AVX2(w, x *byte, nblocks int) float32                    { panic("unreachable") }
func matVecQ4_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecQ8_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecQ4_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecQ8_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func quantizeQ8_0AVX2(x *float32, dst *byte, nblocks int)                { panic("unreachable") }
func dotF32AVX2(a, b *float32, n int) float32                            { panic("unreachable") }
func axpyAVX2(a float32, x, y *float32, n int)                           { panic("unreachable") }

func dotQ4_1Q8_0AVX2(w, x *byte, nblocks int) float32                      { panic("unreachable") }
func dotQ5_0Q8_0AVX2(w, x *byte, nblocks int) float32                      { panic("unreachable") }
func dotQ5_1Q8_0AVX2(w, x *byte, nblocks int) float32                      { panic("unreachable") }
func matVecQ4_1Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)   { panic("unreachable") }
func matVecQ5_0Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)   { panic("unreachable") }
func matVecQ5_1Q8_0AVX2(w, x *byte, nblocks int, out *float32, rows int)   { panic("unreachable") }
func matVecQ4_1Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)   { panic("unreachable") }
func matVecQ5_0Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)   { panic("unreachable") }
func matVecQ5_1Q8_0VNNI(w, x *byte, nblocks int, out *float32, rows int)   { panic("unreachable") }
func matVecIQ4_NLQ8_0VNNI(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecIQ4_NLQ8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int) {
	panic("unreachable")
}
func matVecIQ4_XSQ8_KRows4AVX2(w, x *byte, nblocks int, out *float32, rows int) {
	panic("unreachable")
}
func matVecQ4_1Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecQ5_0Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecQ5_1Q8_0Rows4AVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
