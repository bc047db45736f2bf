package quant

import (
	"fmt"
	"unsafe"
)

// MatMulFloatFast reports whether MatMulFloat has a kernel on this CPU
// (AVX-512). Without one, a batch does better with MatMulF32 on widened
// rows and transposed activations.
func MatMulFloatFast() bool { return useAVX512 }

// MatMulFloat computes rows weight rows of type t (F32, F16 or BF16; cols
// elements each, stored one after another in w) times tokens activation
// vectors (cols floats each, one after another in x): out[i*outStride+r] =
// row r · x[i*cols:(i+1)*cols]. Other elements of out are left untouched.
// scratch holds at least 4·cols floats, the widened rows; more lets it
// widen more rows at a time.
//
// The AVX-512 kernel widens four rows at a time into scratch, where they
// stay in L1 while every token goes by, and prefetches the rows that
// follow while it multiplies: a widening pass over rows not yet in cache
// waited on memory. The activations need no transposition (the kernel
// multiplies along k and sums across lanes at the end), and each token's
// four results are stored side by side in out. Rows past a multiple of 4,
// and every row where cols is not a multiple of 16, take the Go code.
func MatMulFloat(t Type, w []byte, cols, rows int, x []float32, tokens int, out []float32, outStride int, scratch []float32) {
	if t != F32 && t != F16 && t != BF16 {
		panic(fmt.Sprintf("quant: MatMulFloat: %v is not a float type", t))
	}
	if cols <= 0 || rows < 0 || tokens < 0 {
		panic(fmt.Sprintf("quant: MatMulFloat: bad size %d rows × %d columns × %d tokens", rows, cols, tokens))
	}
	rb := cols * t.BlockBytes()
	switch {
	case len(w) < rows*rb:
		panic(fmt.Sprintf("quant: MatMulFloat: %d bytes of weights, %d rows of %d need %d", len(w), rows, rb, rows*rb))
	case len(x) < tokens*cols:
		panic(fmt.Sprintf("quant: MatMulFloat: %d activations, %d tokens of %d need %d", len(x), tokens, cols, tokens*cols))
	case len(scratch) < 4*cols:
		panic(fmt.Sprintf("quant: MatMulFloat: %d floats of scratch, need %d", len(scratch), 4*cols))
	}
	if rows == 0 || tokens == 0 {
		return
	}
	if tokens > 1 && outStride < rows {
		panic(fmt.Sprintf("quant: MatMulFloat: out stride %d is less than %d rows", outStride, rows))
	}
	if need := (tokens-1)*outStride + rows; len(out) < need {
		panic(fmt.Sprintf("quant: MatMulFloat: %d outputs, need %d", len(out), need))
	}
	r4 := 0
	if useAVX512 && cols%16 == 0 {
		r4 = rows &^ 3
		per := min(len(scratch)/cols&^3, r4)
		for r0 := 0; r0 < r4; r0 += per {
			nr := min(per, r4-r0)
			a := widenRows(t, w[r0*rb:(r0+nr)*rb], scratch[:nr*cols])
			for i := 0; i < nr; i += 4 {
				// The rows that come after these, the next block's or,
				// past the end, these again.
				pf := &w[r0*rb]
				if next := (r0 + nr + i) * rb; next < len(w) {
					pf = &w[next]
				}
				matMulF32TAVX512(&x[0], cols, &a[i*cols], cols, cols, &out[r0+i], outStride, tokens, pf)
			}
		}
	}
	if r4 < rows {
		matMulFloatGeneric(t, w[r4*rb:rows*rb], cols, x, tokens, out[r4:], outStride, scratch[:cols])
	}
}

// widenRows returns the float32 values of the float rows in src: src
// itself for F32, otherwise dst widened from it (len(dst) a multiple of 16
// where useAVX512 is set, as MatMulFloat's kernel path has it).
func widenRows(t Type, src []byte, dst []float32) []float32 {
	switch {
	case t == F32:
		return unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), len(src)/4)
	case useAVX512 && t == F16:
		widenF16AVX512((*uint16)(unsafe.Pointer(&src[0])), &dst[0], len(dst))
		return dst
	case useAVX512:
		widenBF16AVX512((*uint16)(unsafe.Pointer(&src[0])), &dst[0], len(dst))
		return dst
	}
	if err := Widen(t, src, dst); err != nil {
		panic(err) // MatMulFloat checked the type and sizes
	}
	return dst
}

// matMulFloatGeneric is MatMulFloat one row at a time, each widened into
// buf and dotted with every token.
func matMulFloatGeneric(t Type, w []byte, cols int, x []float32, tokens int, out []float32, outStride int, buf []float32) {
	rb := cols * t.BlockBytes()
	for r := 0; r < len(w)/rb; r++ {
		row := buf[:cols]
		dequantRow(t, w[r*rb:(r+1)*rb], row)
		for i := 0; i < tokens; i++ {
			out[i*outStride+r] = Dot(row, x[i*cols:(i+1)*cols])
		}
	}
}
