//go:build !amd64 || purego

package quant

func dotIQ4_NLQ8_0AVX2(w, x *byte, nblocks int) float32                    { panic("unreachable") }
func dotIQ4_XSQ8_KAVX2(w, x *byte, nblocks int) float32                    { panic("unreachable") }
func matVecIQ4_NLQ8_0AVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecIQ4_XSQ8_KAVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func dotIQ4XSRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32)  { panic("unreachable") }
