package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// MatMulFloatFast reports whether MatMulFloat has a kernel on this CPU
// (AVX-512 or AVX2). Without one, a batch does better with MatMulF32 on
// widened rows and transposed activations.
func MatMulFloatFast() bool { return useAVX512 || useAVX2 }

// MatMulFloatPanelRows is the weight rows MatMulFloat's kernel packs and
// multiplies at a time (three ZMM registers of a column): rows past a
// multiple of it cost as many as a whole panel.
const MatMulFloatPanelRows = 48

// MatMulFloatScratch is the scratch, in floats, that MatMulFloat needs for
// rows of cols elements.
func MatMulFloatScratch(cols int) int { return MatMulFloatPanelRows * cols }

// MatMulFloat computes rows weight rows of type t (F32, F16 or BF16; cols
// elements each, stored one after another in w) times tokens activation
// vectors (cols floats each, one after another in x): out[i*outStride+r] =
// row r · x[i*cols:(i+1)*cols]. Other elements of out are left untouched.
// scratch holds at least MatMulFloatScratch(cols) floats. w may go on past
// the rows, with the rows a caller multiplies next, which the kernel then
// prefetches.
//
// The AVX-512 kernel widens 48 rows at a time into a panel in scratch,
// transposed so that the 48 weights of a column are side by side, and
// multiplies it by every token: each token's value of a column, broadcast,
// times the column's three registers of weights. The 48 results of a token
// are then its accumulators' lanes in order, stored as they are, where a
// product along k, a row against a token, would end in a sum across the
// lanes of each accumulator. The activations need no transposition. While
// it multiplies, the kernel prefetches the two panels' rows that follow in
// w: a widening pass over rows not yet in cache waited on memory, and
// where the CPU backend's workers take one panel at a time, the next is
// often the other worker's and the one after it this worker's (two were
// ~2% faster than one in a SmolLM prefill). Where cols is not a
// multiple of 16 the Go code does the product a row at a time.
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
	case len(scratch) < MatMulFloatScratch(cols):
		panic(fmt.Sprintf("quant: MatMulFloat: %d floats of scratch, need %d", len(scratch), MatMulFloatScratch(cols)))
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
	if !MatMulFloatFast() || cols%16 != 0 {
		matMulFloatGeneric(t, w[:rows*rb], cols, x, tokens, out, outStride, scratch[:cols])
		return
	}
	if !useAVX512 {
		matMulFloatAVX2(t, w, cols, rows, x, tokens, out, outStride, scratch)
		return
	}
	p := scratch[:MatMulFloatPanelRows*cols]
	for r0 := 0; r0 < rows; r0 += MatMulFloatPanelRows {
		nr := min(MatMulFloatPanelRows, rows-r0)
		packPanel(t, w[r0*rb:(r0+nr)*rb], cols, p)
		next := panelNext(w, rb, r0, nr)
		mask := uint64(1)<<nr - 1
		matMulFloatPanelAVX512(&x[0], cols, &p[0], cols, &out[r0], outStride, tokens, mask,
			&next[0], (len(next)+63)/64)
	}
}

// panelRowsAVX2 is the rows of matMulFloatPanelAVX2's panel: three YMM
// registers of a column.
const panelRowsAVX2 = 24

// matMulFloatAVX2 is MatMulFloat on checked arguments with AVX2: the same
// scheme as the AVX-512 kernel's, on panels of 24 rows (eight rows at a
// time packed by the assembly, widened and transposed in registers; the
// rows of a last group of fewer in Go) and four tokens at a time, in
// chunks of panelColsAVX2 columns, each chunk's sums added to the last's.
// Against MatMulF32's 4×16 tiles on widened rows and transposed
// activations, it needs no transposition either way and keeps twelve
// accumulators (7 loads for 12 FMAs a step, where the tiles had 6 for 8).
func matMulFloatAVX2(t Type, w []byte, cols, rows int, x []float32, tokens int, out []float32, outStride int, scratch []float32) {
	rb, eb := cols*t.BlockBytes(), t.BlockBytes()
	kc := min(cols, panelColsAVX2)
	p, row := scratch[:panelRowsAVX2*kc], scratch[panelRowsAVX2*kc:][:kc]
	var mask [panelRowsAVX2]int32
	for r0 := 0; r0 < rows; r0 += panelRowsAVX2 {
		nr := min(panelRowsAVX2, rows-r0)
		for i := range mask {
			mask[i] = 0
			if i < nr {
				mask[i] = -1
			}
		}
		for k0 := 0; k0 < cols; k0 += kc {
			kn := min(kc, cols-k0)
			packChunkAVX2(t, w[r0*rb+k0*eb:], rb, nr, kn, p, row[:kn])
			matMulFloatPanelAVX2(&x[k0], cols, &p[0], kn, &out[r0], outStride, tokens, &mask[0], min(k0, 1))
		}
	}
}

// panelColsAVX2 is the columns of a chunk of matMulFloatAVX2's panel: 24
// rows of 1,024 floats are 96 KB, in L2 while the tokens pass over them
// four at a time. Whole rows of Llama-1B's down projection (8,192
// columns) made a panel of 768 KB, past a Zen 3's L2: 58 GFLOP/s a
// thread against 66-79 in chunks of 512 or 1,024 (96 rows by 128 tokens;
// at 2,048 columns every chunk size measured alike, 60-80).
const panelColsAVX2 = 1024

// packChunkAVX2 lays k columns of nr ≤ 24 rows of type t (at w, rb bytes
// apart; k a multiple of 8) into the panel p, eight rows at a time by the
// assembly, the rows of a last group of fewer through row, and zeros for
// the rows past nr.
func packChunkAVX2(t Type, w []byte, rb, nr, k int, p, row []float32) {
	eb := t.BlockBytes()
	for i := 0; i < panelRowsAVX2; i++ {
		switch {
		case i%8 == 0 && i+8 <= nr:
			src := unsafe.Pointer(&w[i*rb])
			switch t {
			case F32:
				pack8F32AVX2((*float32)(src), rb, &p[i], k)
			case F16:
				pack8F16AVX2((*uint16)(src), rb, &p[i], k)
			default:
				pack8BF16AVX2((*uint16)(src), rb, &p[i], k)
			}
			i += 7
		case i < nr:
			if err := Widen(t, w[i*rb:i*rb+k*eb], row); err != nil {
				panic(err) // a float type, whole rows: checked by MatMulFloat
			}
			col := p[i:]
			for l, v := range row {
				col[l*panelRowsAVX2] = v
			}
		default:
			for l := range k {
				p[l*panelRowsAVX2+i] = 0
			}
		}
	}
}

// panelNext is what a panel kernel prefetches while it multiplies rows
// [r0, r0+nr) of w (rb bytes each): the rows that follow, two panels of
// them up to len(w), or at its end these rows again.
func panelNext(w []byte, rb, r0, nr int) []byte {
	if end := (r0 + nr) * rb; end < len(w) {
		return w[end:min(end+2*MatMulFloatPanelRows*rb, len(w))]
	}
	return w[r0*rb : r0*rb+1]
}

// packPanel fills the panel p (MatMulFloatPanelRows × cols, column by column)
// with the float32 values of the rows in w, cols a multiple of 16, and
// zeros for rows past them. Whole blocks of 16 rows take the AVX-512 code.
func packPanel(t Type, w []byte, cols int, p []float32) {
	rb := cols * t.BlockBytes()
	rows := len(w) / rb
	for b := 0; b < MatMulFloatPanelRows; b += 16 {
		if b+16 <= rows {
			src := unsafe.Pointer(&w[b*rb])
			switch t {
			case F32:
				packF32PanelAVX512((*float32)(src), rb, &p[b], cols)
			case F16:
				packF16PanelAVX512((*uint16)(src), rb, &p[b], cols)
			default:
				packBF16PanelAVX512((*uint16)(src), rb, &p[b], cols)
			}
			continue
		}
		for l := 0; l < cols; l++ {
			col := p[l*MatMulFloatPanelRows+b:][:16]
			for i := range col {
				col[i] = 0
				if r := b + i; r < rows {
					col[i] = floatAt(t, w[r*rb:], l)
				}
			}
		}
	}
}

// floatAt returns element l of the float row w of type t.
func floatAt(t Type, w []byte, l int) float32 {
	switch t {
	case F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(w[4*l:]))
	case F16:
		return F16ToF32(binary.LittleEndian.Uint16(w[2*l:]))
	}
	return BF16ToF32(binary.LittleEndian.Uint16(w[2*l:]))
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

// MatMulBF16Fast reports whether MatMulBF16 has its AVX512_BF16 kernel;
// without it, callers take MatMulFloat.
func MatMulBF16Fast() bool { return useBF16 }

// ToBF16Pairs rounds x (an even count) to bfloat16 as F32ToBF16 does and
// packs each pair of elements into a word, the even one low: MatMulBF16's
// activations.
func ToBF16Pairs(x []float32, dst []uint32) {
	if len(x)%2 != 0 || len(dst) < len(x)/2 {
		panic(fmt.Sprintf("quant: ToBF16Pairs: %d values into %d words", len(x), len(dst)))
	}
	done := 0
	if useAVX512 {
		// The words are the elements' halves in order, low first.
		if done = len(x) &^ 15; done > 0 {
			toBF16AVX512(&x[0], (*uint16)(unsafe.Pointer(&dst[0])), done)
		}
	}
	for i := done / 2; i < len(x)/2; i++ {
		dst[i] = uint32(F32ToBF16(x[2*i])) | uint32(F32ToBF16(x[2*i+1]))<<16
	}
}

// MatMulBF16 is MatMulFloat for BF16 weights with the activations rounded
// to bfloat16 too (ToBF16Pairs: x holds tokens rows of cols/2 words), as
// llama.cpp multiplies BF16 weights: each step of the kernel takes a pair
// of columns with VDPBF16PS, two products a lane summed in float32, half
// the steps of MatMulFloat. The panel packs the rows' words as
// MatMulFloat's packs floats. cols is a multiple of 32; MatMulBF16Fast
// must be true.
func MatMulBF16(w []byte, cols, rows int, x []uint32, tokens int, out []float32, outStride int, scratch []float32) {
	if !useBF16 {
		panic("quant: MatMulBF16 without AVX512_BF16")
	}
	if cols <= 0 || cols%32 != 0 || rows < 0 || tokens < 0 {
		panic(fmt.Sprintf("quant: MatMulBF16: bad size %d rows × %d columns × %d tokens", rows, cols, tokens))
	}
	rb, k := 2*cols, cols/2
	switch {
	case len(w) < rows*rb:
		panic(fmt.Sprintf("quant: MatMulBF16: %d bytes of weights, %d rows of %d need %d", len(w), rows, rb, rows*rb))
	case len(x) < tokens*k:
		panic(fmt.Sprintf("quant: MatMulBF16: %d words of activations, %d tokens of %d need %d", len(x), tokens, k, tokens*k))
	case len(scratch) < MatMulFloatScratch(cols):
		panic(fmt.Sprintf("quant: MatMulBF16: %d floats of scratch, need %d", len(scratch), MatMulFloatScratch(cols)))
	}
	if rows == 0 || tokens == 0 {
		return
	}
	if tokens > 1 && outStride < rows {
		panic(fmt.Sprintf("quant: MatMulBF16: out stride %d is less than %d rows", outStride, rows))
	}
	if need := (tokens-1)*outStride + rows; len(out) < need {
		panic(fmt.Sprintf("quant: MatMulBF16: %d outputs, need %d", len(out), need))
	}
	p := unsafe.Slice((*uint32)(unsafe.Pointer(&scratch[0])), MatMulFloatPanelRows*k)
	for r0 := 0; r0 < rows; r0 += MatMulFloatPanelRows {
		nr := min(MatMulFloatPanelRows, rows-r0)
		packPairs(w[r0*rb:(r0+nr)*rb], k, p)
		next := panelNext(w, rb, r0, nr)
		mask := uint64(1)<<nr - 1
		matMulBF16PanelAVX512(&x[0], k, &p[0], k, &out[r0], outStride, tokens, mask, &next[0], (len(next)+63)/64)
	}
}

// DotBF16Pairs is the product of a BF16 row w (cols elements, a multiple
// of 32) with activations as bfloat16 pairs (ToBF16Pairs, cols/2 words):
// the decode step's twin of MatMulBF16, whose rounding it shares.
// MatMulBF16Fast must be true.
func DotBF16Pairs(w []byte, x []uint32) float32 {
	var out [1]float32
	MatVecBF16Pairs(w, x, out[:])
	return out[0]
}

// MatVecBF16Pairs sets out[r] to DotBF16Pairs of row r of w (len(out) BF16
// rows one after the other) with x: decode's product for BF16 weights,
// the row loop inside the kernel.
func MatVecBF16Pairs(w []byte, x []uint32, out []float32) {
	if len(out) == 0 {
		return
	}
	n := len(w) / 2 / len(out)
	if !useBF16 || n == 0 || n%32 != 0 || len(x) < n/2 || len(w) != 2*n*len(out) {
		panic(fmt.Sprintf("quant: MatVecBF16Pairs: %d bytes for %d rows by %d pairs", len(w), len(out), len(x)))
	}
	matVecBF16PairsAVX512((*uint16)(unsafe.Pointer(&w[0])), &x[0], n, &out[0], len(out))
}

// packPairs fills the panel p (MatMulFloatPanelRows × k words, column pair
// by column pair) with the 32-bit words of the rows in w (k words each, a
// multiple of 16), zeros past them: packPanel's transposition of F32 rows,
// applied to the words.
func packPairs(w []byte, k int, p []uint32) {
	rb := 4 * k
	rows := len(w) / rb
	pf := unsafe.Slice((*float32)(unsafe.Pointer(&p[0])), len(p))
	for b := 0; b < MatMulFloatPanelRows; b += 16 {
		if b+16 <= rows {
			packF32PanelAVX512((*float32)(unsafe.Pointer(&w[b*rb])), rb, &pf[b], k)
			continue
		}
		for l := 0; l < k; l++ {
			col := p[l*MatMulFloatPanelRows+b:][:16]
			for i := range col {
				col[i] = 0
				if r := b + i; r < rows {
					col[i] = binary.LittleEndian.Uint32(w[r*rb+4*l:])
				}
			}
		}
	}
}
