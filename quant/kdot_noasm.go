//go:build !amd64 || purego

package quant

func dotQ4KRowAVX2(w, x *byte, nblocks int) float32       { panic("unreachable") }
func dotQ5KRowAVX2(w, x *byte, nblocks int) float32       { panic("unreachable") }
func dotQ6KRowAVX2(w, x *byte, nblocks int) float32       { panic("unreachable") }
func quantizeQ8_KAVX2(x *float32, dst *byte, nblocks int) { panic("unreachable") }

func dotQ4KRow2AVX2(w, x0, x1 *byte, nblocks int, out *float32) { panic("unreachable") }

func dotQ4KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32) { panic("unreachable") }

func dotQ5KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32) { panic("unreachable") }

func dotQ6KRow4AVX2(w, x *byte, xstride, nblocks int, acc *[32]float32) { panic("unreachable") }
func matVecQ4KAVX2(w, x *byte, nblocks int, out *float32, rows int)     { panic("unreachable") }
func matVecQ5KAVX2(w, x *byte, nblocks int, out *float32, rows int)     { panic("unreachable") }
func matVecQ6KAVX2(w, x *byte, nblocks int, out *float32, rows int)     { panic("unreachable") }

func dotQ2KRowAVX2(w, x *byte, nblocks int) float32                 { panic("unreachable") }
func dotQ3KRowAVX2(w, x *byte, nblocks int) float32                 { panic("unreachable") }
func matVecQ2KAVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }
func matVecQ3KAVX2(w, x *byte, nblocks int, out *float32, rows int) { panic("unreachable") }

func q4KX8Tile4AVX2(w, x *byte, xstride, nblocks int, out *float32, ostride int) {
	panic("unreachable")
}

func packQ4KX8Codes(dst, w *byte, rb, nb int) { panic("unreachable") }

func q6KX8Tile4AVX2(w, x *byte, xstride, nblocks int, out *float32, ostride int) {
	panic("unreachable")
}

func packQ6KX8Codes(dst, w *byte, rb, nb int) { panic("unreachable") }
