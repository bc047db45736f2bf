package quant

import "fmt"

// CPU dot products for the inference engine. Batched prefill multiplies
// whole prompts with the MatMul kernels of matmul.go instead.
//
// Weights stay in their GGUF encoding. Activations are quantized once per
// matrix–vector product with QuantizeQ8_0, and the integer products of each
// block pair are scaled by the product of the two block scales, as in
// llama.cpp (Q8_0 is the vec_dot_type of Q4_0, Q8_0 and IQ4_NL). K-quant
// and IQ4_XS weights take Q8_K activations (kdot.go, iq4.go). Every other
// weight type goes through DotF32, which dequantizes a block at a time.
//
// The Q8_0 activation operand must hold codes in [-127, 127], as
// QuantizeQ8_0 always produces: the AVX2 kernels multiply with
// VPMADDUBSW after moving signs onto the activation side, which cannot
// represent +128.
//
// On amd64 with AVX2, FMA and F16C the kernels are assembly (with
// AVX512-VNNI variants of the MatVec kernels where the CPU has it);
// elsewhere, or when built with the purego tag, they are the Go code in
// dot_generic.go, about 20–30 times slower.
// Length mismatches are programming errors and panic, like the bounds
// checks they replace; the engine checks tensor types and shapes when it
// loads a model.

// DotQ4_0Q8_0 returns the dot product of nblocks Q4_0 blocks of w with
// nblocks Q8_0 blocks of x (32·nblocks elements each).
func DotQ4_0Q8_0(w, x []byte, nblocks int) float32 {
	checkDot("DotQ4_0Q8_0", len(w), q4_0Bytes, len(x), nblocks)
	if nblocks == 0 {
		return 0
	}
	if useAVX2 {
		return dotQ4_0Q8_0AVX2(&w[0], &x[0], nblocks)
	}
	return dotQ4_0Q8_0Generic(w, x, nblocks)
}

// DotQ8_0Q8_0 returns the dot product of nblocks Q8_0 blocks of w with
// nblocks Q8_0 blocks of x.
func DotQ8_0Q8_0(w, x []byte, nblocks int) float32 {
	checkDot("DotQ8_0Q8_0", len(w), q8_0Bytes, len(x), nblocks)
	if nblocks == 0 {
		return 0
	}
	if useAVX2 {
		return dotQ8_0Q8_0AVX2(&w[0], &x[0], nblocks)
	}
	return dotQ8_0Q8_0Generic(w, x, nblocks)
}

// MatVecQ4_0Q8_0 sets out[r] to the dot product of row r of w with x, for
// each of the len(out) rows. w holds the rows back to back, nblocks Q4_0
// blocks each, and x holds nblocks Q8_0 blocks. This is the decode-time
// matrix–vector product and the fastest way to run one: the kernel walks
// four rows at a time, so each activation block is loaded and prepared once
// per four rows, and prefetches the weights itself, since four short row
// streams defeat the hardware prefetcher. To split the work across threads,
// give each a range of rows: w[r0*rowBytes:], out[r0:r1]. Results are
// identical to DotQ4_0Q8_0 row by row up to float32 summation order.
func MatVecQ4_0Q8_0(w, x []byte, nblocks int, out []float32) {
	checkMatVec("MatVecQ4_0Q8_0", len(w), q4_0Bytes, len(x), nblocks, len(out))
	if nblocks == 0 {
		clear(out)
		return
	}
	if len(out) == 0 {
		return
	}
	switch {
	case useVNNI:
		matVecQ4_0Q8_0VNNI(&w[0], &x[0], nblocks, &out[0], len(out))
	case useAVX2:
		matVecQ4_0Q8_0AVX2(&w[0], &x[0], nblocks, &out[0], len(out))
	default:
		matVecQ4_0Q8_0Generic(w, x, nblocks, out)
	}
}

// MatVecQ8_0Q8_0 is MatVecQ4_0Q8_0 for Q8_0 weights (e.g. a Q8_0 token
// embedding used as the output head).
func MatVecQ8_0Q8_0(w, x []byte, nblocks int, out []float32) {
	checkMatVec("MatVecQ8_0Q8_0", len(w), q8_0Bytes, len(x), nblocks, len(out))
	if nblocks == 0 {
		clear(out)
		return
	}
	if len(out) == 0 {
		return
	}
	switch {
	case useVNNI:
		matVecQ8_0Q8_0VNNI(&w[0], &x[0], nblocks, &out[0], len(out))
	case useAVX2:
		matVecQ8_0Q8_0AVX2(&w[0], &x[0], nblocks, &out[0], len(out))
	default:
		matVecQ8_0Q8_0Generic(w, x, nblocks, out)
	}
}

// DotF32 returns the dot product of row, len(x) elements of type t, with x.
// It works for every type DequantizeSupported reports, dequantizing up to
// 256 elements at a time into a stack buffer; it is the path for weights
// that have no dedicated kernel (F32, F16, BF16, Q4_1, Q5_x), and the
// reference the K-quant kernels are tested against.
func DotF32(t Type, row []byte, x []float32) float32 {
	if !DequantizeSupported(t) {
		panic(fmt.Sprintf("quant: DotF32: unsupported type %v", t))
	}
	if err := checkRow(t, len(row), len(x)); err != nil {
		panic("quant: DotF32: " + err.Error())
	}
	if s, ok := dotRowAVX2(t, row, x); ok {
		return s
	}
	const chunk = 256 // a multiple of every block size
	var buf [chunk]float32
	ti, _ := t.info()
	var sum float32
	for off := 0; off < len(x); off += chunk {
		n := min(chunk, len(x)-off)
		b := off / ti.blockSize * ti.blockBytes
		dequantRow(t, row[b:b+n/ti.blockSize*ti.blockBytes], buf[:n])
		sum += Dot(buf[:n], x[off:off+n])
	}
	return sum
}

// Dot returns the dot product of a and b, which must have the same length.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("quant: Dot: lengths %d and %d differ", len(a), len(b)))
	}
	if len(a) == 0 {
		return 0
	}
	if useAVX2 {
		return dotF32AVX2(&a[0], &b[0], len(a))
	}
	return dotF32Generic(a, b)
}

// Axpy adds a·x to y element-wise; x and y must have the same length.
func Axpy(a float32, x, y []float32) {
	if len(x) != len(y) {
		panic(fmt.Sprintf("quant: Axpy: lengths %d and %d differ", len(x), len(y)))
	}
	if len(x) == 0 {
		return
	}
	if useAVX2 {
		axpyAVX2(a, &x[0], &y[0], len(x))
		return
	}
	axpyGeneric(a, x, y)
}

func checkDot(fn string, wlen, wblock, xlen, nblocks int) {
	if nblocks < 0 {
		panic(fmt.Sprintf("quant: %s: negative block count %d", fn, nblocks))
	}
	if wlen/wblock < nblocks {
		panic(fmt.Sprintf("quant: %s: weights have %d bytes, %d blocks need %d", fn, wlen, nblocks, nblocks*wblock))
	}
	if xlen/q8_0Bytes < nblocks {
		panic(fmt.Sprintf("quant: %s: activations have %d bytes, %d blocks need %d", fn, xlen, nblocks, nblocks*q8_0Bytes))
	}
}

func checkMatVec(fn string, wlen, wblock, xlen, nblocks, rows int) {
	checkDot(fn, wlen, wblock, xlen, nblocks)
	if nblocks > 0 && wlen/wblock/nblocks < rows {
		panic(fmt.Sprintf("quant: %s: weights have %d bytes, %d rows of %d blocks need %d", fn, wlen, rows, nblocks, rows*nblocks*wblock))
	}
}
