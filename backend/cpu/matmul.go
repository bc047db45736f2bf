package cpu

import (
	"unsafe"

	"gotok/model"
	"gotok/quant"
)

// activations is a batch of T input vectors for the matrix products, in
// float32 and, for weights with an 8-bit dot product, quantized to Q8_0
// (Q4_0, Q8_0, IQ4_NL weights) or Q8_K (K-quant, IQ4_XS weights) once for
// every product that reads them.
// bytes is the batch's buffers as allocated so far.
func (a *activations) bytes() int64 {
	return 4*int64(cap(a.f32)+cap(a.f32T)+cap(a.bf16)) + int64(cap(a.q8)+cap(a.q8k))
}

type activations struct {
	t    int
	n    int       // vector length
	f32  []float32 // t × n
	q8   []byte    // t × n/32 Q8_0 blocks, valid when quantized
	q8k  []byte    // t × n/256 Q8_K blocks, allocated on first use
	q8ok bool      // false once f32 changes: the quantized forms are stale
	// Which forms the batch has been quantized to since q8ok was last
	// cleared.
	hasQ8, hasQ8K bool
	// f32T is the batch transposed, n × tPad (tokens zero-padded to a
	// multiple of 16), for the float weights' tiled products where there
	// is no quant.MatMulFloat kernel; hasT says it is current (cleared
	// with q8ok).
	f32T []float32
	hasT bool
	// bf16 is the batch rounded to bfloat16 pairs (quant.ToBF16Pairs), t ×
	// n/2 words, for BF16 weights' products where quant.MatMulBF16 has a
	// kernel; hasBF16 says it is current (cleared with q8ok).
	bf16    []uint32
	hasBF16 bool
}

// bf16Pairs fills bf16 from f32.
func (a *activations) bf16Pairs() {
	a.fresh()
	if a.hasBF16 {
		return
	}
	if cap(a.bf16) < a.t*a.n/2 {
		a.bf16 = make([]uint32, a.t*a.n/2)
	}
	a.bf16 = a.bf16[:a.t*a.n/2]
	quant.ToBF16Pairs(a.f32[:a.t*a.n], a.bf16)
	a.hasBF16 = true
}

// takesBF16Pairs reports whether a product of w takes its activations as
// bfloat16 pairs (quant.MatMulBF16 for a batch, quant.DotBF16Pairs a row
// at a time): BF16 weights, rows of whole 32-element blocks and the CPU's
// AVX512_BF16. The activations are then rounded to bfloat16 as llama.cpp
// rounds them for BF16 weights, in prefill and decode alike.
func takesBF16Pairs(w *model.Tensor) bool {
	return w.Type == quant.BF16 && w.Cols%32 == 0 && quant.MatMulBF16Fast()
}

// bf16Tiled reports whether a product of w with a batch of tokens takes
// quant.MatMulBF16.
func bf16Tiled(w *model.Tensor, tokens int) bool { return floatTiled(w, tokens) && takesBF16Pairs(w) }

// tPad is the batch's token count rounded up to MatMulF32's 16-column tiles.
func (a *activations) tPad() int { return (a.t + 15) &^ 15 }

// transpose fills f32T from f32.
func (a *activations) transpose() {
	a.fresh()
	if a.hasT {
		return
	}
	tp := a.tPad()
	if cap(a.f32T) < a.n*tp {
		a.f32T = make([]float32, a.n*tp)
	}
	a.f32T = a.f32T[:a.n*tp]
	clear(a.f32T)
	for t := 0; t < a.t; t++ {
		for i, v := range a.row(t) {
			a.f32T[i*tp+t] = v
		}
	}
	a.hasT = true
}

// floatTiled reports whether a product of float weights w with a batch of
// tokens runs as tiled matrix products (floatRowsTiled): F32, F16 and BF16
// weights, from tiledMinTokens tokens.
func floatTiled(w *model.Tensor, tokens int) bool {
	return tokens >= tiledMinTokens && (w.Type == quant.F32 || w.Type == quant.F16 || w.Type == quant.BF16)
}

// tiledMinTokens is the batch from which float weights are widened once per
// four rows and multiplied by all its tokens, rather than dotted with each
// token in turn.
const tiledMinTokens = 8

func (a *activations) row(t int) []float32 { return a.f32[t*a.n : (t+1)*a.n] }

func (a *activations) q8row(t int) []byte {
	rb := a.n / 32 * quant.Q8_0.BlockBytes()
	return a.q8[t*rb : (t+1)*rb]
}

// needsQ8 reports whether weights of type t are multiplied against Q8_0
// activations.
func needsQ8(t quant.Type) bool {
	switch t {
	case quant.Q4_0, quant.Q8_0, quant.IQ4_NL, quant.Q4_1, quant.Q5_0, quant.Q5_1:
		return true
	}
	return false
}

func (a *activations) q8krow(t int) []byte {
	rb := a.n / quant.QK_K * quant.Q8KBytes
	return a.q8k[t*rb : (t+1)*rb]
}

// usesQ8K reports whether weights w (K-quants, IQ4_XS) are multiplied
// against Q8_K activations by quant.MatMulKQ8_K.
func usesQ8K(w *model.Tensor) bool {
	return w.Cols%quant.QK_K == 0 && quant.KDot(w.Type) != nil
}

// fresh forgets stale quantized forms once the float values have changed.
func (a *activations) fresh() {
	if !a.q8ok {
		a.hasQ8, a.hasQ8K, a.hasT, a.hasBF16 = false, false, false, false
		a.q8ok = true
	}
}

func (a *activations) quantize() {
	a.fresh()
	if a.hasQ8 {
		return
	}
	rb := a.n / 32 * quant.Q8_0.BlockBytes()
	for t := 0; t < a.t; t++ {
		quant.QuantizeQ8_0(a.row(t), a.q8[t*rb:(t+1)*rb])
	}
	a.hasQ8 = true
}

// quantizeK quantizes the batch to Q8_K; n must be a multiple of 256.
func (a *activations) quantizeK() {
	a.fresh()
	if a.hasQ8K {
		return
	}
	rb := a.n / quant.QK_K * quant.Q8KBytes
	if rows := len(a.f32) / a.n; len(a.q8k) < rows*rb {
		a.q8k = make([]byte, rows*rb)
	}
	for t := 0; t < a.t; t++ {
		quant.QuantizeQ8_K(a.row(t), a.q8krow(t))
	}
	a.hasQ8K = true
}

// product is one weight matrix applied to a shared input batch: out[t] (a
// row of stride outStride starting at outOff) = W · x[t].
type product struct {
	w         *model.Tensor
	out       []float32
	outStride int
	outOff    int
}

// kQuantGrain is the fewest rows a worker's range of a K-quant batch
// product takes: each range builds its table of the tokens' block sums
// (quant.MatMulKQ8_K), which at 48-row ranges was 15-20% of a prefill on
// the test-256 shape.
const kQuantGrain = 128

// matmul computes every product over the batch in one parallel region:
// their rows are concatenated and split across the workers, so Q, K and V
// (or gate and up) cost one synchronization, and each weight row is read
// once for all T tokens.
func (b *Backend) matmul(x *activations, ps ...product) {
	total, grain := 0, 16
	for _, p := range ps {
		switch {
		case needsQ8(p.w.Type):
			x.quantize()
		case usesQ8K(p.w):
			x.quantizeK()
			if x.t > 1 {
				grain = max(grain, kQuantGrain)
			}
		case takesBF16Pairs(p.w):
			x.bf16Pairs()
			if floatTiled(p.w, x.t) {
				grain = quant.MatMulFloatPanelRows
			}
		case !floatTiled(p.w, x.t):
		case quant.MatMulFloatFast():
			// Ranges of whole panels: a range of 64 rows was a full
			// panel and one of 16 rows, a third of it wasted.
			grain = quant.MatMulFloatPanelRows
		default:
			x.transpose()
		}
		total += p.w.Rows
	}
	if len(b.tiles) < b.pool.workers {
		b.tiles = make([]tileScratch, b.pool.workers)
	}
	b.pool.parallelFor(total, grain, func(worker, lo, hi int) {
		base := 0
		for _, p := range ps {
			rlo, rhi := max(lo-base, 0), min(hi-base, p.w.Rows)
			if rlo < rhi {
				matRows(x, p, rlo, rhi, &b.tiles[worker]) // a worker's ranges run one at a time
			}
			base += p.w.Rows
		}
	})
}

// tileScratch is a worker's scratch for the tiled products: the widened
// rows and results of floatRowsTiled, the re-encoded rows of q8ViaRows.
// It is grown as needed and kept: allocated each call (eight calls a
// worker a product) they were ~200 MB of garbage a SmolLM prefill batch,
// and a bench's first repetitions ran at half speed.
type tileScratch struct {
	f []float32
	b []byte
}

// floats returns n floats of sc.
func (sc *tileScratch) floats(n int) []float32 {
	if len(sc.f) < n {
		sc.f = make([]float32, n)
	}
	return sc.f[:n]
}

// bytes returns n bytes of sc.
func (sc *tileScratch) bytes(n int) []byte {
	if len(sc.b) < n {
		sc.b = make([]byte, n)
	}
	return sc.b[:n]
}

// matRows computes rows [lo, hi) of one product for every token; sc is
// the calling worker's scratch.
func matRows(x *activations, p product, lo, hi int, sc *tileScratch) {
	w := p.w
	rb := w.RowBytes()
	out := func(t, r int) *float32 { return &p.out[t*p.outStride+p.outOff+r] }
	if floatTiled(w, x.t) {
		floatRowsTiled(x, p, lo, hi, sc)
		return
	}
	if x.t == 1 && (w.Type == quant.F16 || w.Type == quant.BF16 && !takesBF16Pairs(w)) {
		// decode: the row loop in the kernel
		quant.MatVecHalf(w.Type, w.Data[lo*rb:hi*rb], x.row(0), p.out[p.outOff+lo:p.outOff+hi])
		return
	}
	switch w.Type {
	case quant.Q4_0:
		q8Rows(x, p, lo, hi, quant.MatVecQ4_0Q8_0, quant.MatMulQ4_0Q8_0)
	case quant.Q8_0:
		q8Rows(x, p, lo, hi, quant.MatVecQ8_0Q8_0, quant.MatMulQ8_0Q8_0)
	case quant.Q5_0, quant.Q4_1, quant.Q5_1:
		if x.t > 1 && !quant.MatMulRowsTiled(w.Type) {
			q8ViaRows(x, p, lo, hi, sc)
			return
		}
		fallthrough
	case quant.IQ4_NL:
		nb := w.Cols / 32
		if x.t == 1 { // decode: the row loop in the kernel
			quant.MatVecRowsQ8_0(w.Type, w.Data[lo*rb:hi*rb], x.q8row(0), nb, p.out[p.outOff+lo:p.outOff+hi])
			return
		}
		quant.MatMulRowsQ8_0(w.Type, w.Data[lo*rb:hi*rb], nb, hi-lo, x.q8, x.t, p.out[p.outOff+lo:], p.outStride)
	case quant.F32:
		for r := lo; r < hi; r++ {
			row := f32s(w.Data[r*rb : (r+1)*rb])
			for t := 0; t < x.t; t++ {
				*out(t, r) = quant.Dot(row, x.row(t))
			}
		}
	default:
		if usesQ8K(w) {
			quant.MatMulKQ8_K(w.Type, w.Data[lo*rb:hi*rb], w.Cols/quant.QK_K, hi-lo,
				x.q8k[:x.t*x.n/quant.QK_K*quant.Q8KBytes], x.t, p.out[p.outOff+lo:], p.outStride)
			return
		}
		if takesBF16Pairs(w) {
			if x.t == 1 { // decode: the row loop in the kernel
				quant.MatVecBF16Pairs(w.Data[lo*rb:hi*rb], x.bf16[:x.n/2], p.out[p.outOff+lo:p.outOff+hi])
				return
			}
			for r := lo; r < hi; r++ {
				row := w.Data[r*rb : (r+1)*rb]
				for t := 0; t < x.t; t++ {
					*out(t, r) = quant.DotBF16Pairs(row, x.bf16[t*x.n/2:(t+1)*x.n/2])
				}
			}
			return
		}
		for r := lo; r < hi; r++ {
			row := w.Data[r*rb : (r+1)*rb]
			for t := 0; t < x.t; t++ {
				*out(t, r) = quant.DotF32(w.Type, row, x.row(t))
			}
		}
	}
}

// tileTokens is the tokens one tiled product takes: their transposed
// activations (cols × 64 floats, 512 KB at 2048 columns) stay in L2 while
// four weight rows sweep them.
const tileTokens = 64

// floatTileRows is the weight rows floatRowsTiled widens at a time: each
// token's results for them are then one 64-byte line of the output.
const floatTileRows = 16

// floatRowsTiled computes rows [lo, hi) of a product of float weights with
// a batch (x transposed): floatTileRows rows at a time are widened to
// float32 once and multiplied by every token with MatMulF32's 4×16 tiles,
// where the row-by-token dot products would widen each row once per token.
// The tile's results go out a token at a time, the rows of one token side
// by side: written a row at a time, every result was a store to another
// line of the output (a fifth of an F16 prefill's time).
//
// With AVX-512, quant.MatMulFloat does it all: it widens a panel of rows
// at a time, multiplies it by the tokens as they are (not transposed) and
// writes the results in place.
func floatRowsTiled(x *activations, p product, lo, hi int, sc *tileScratch) {
	w := p.w
	n, rb, tp := w.Cols, w.RowBytes(), x.tPad()
	if bf16Tiled(w, x.t) {
		quant.MatMulBF16(w.Data[lo*rb:], n, hi-lo, x.bf16, x.t, p.out[p.outOff+lo:], p.outStride,
			sc.floats(quant.MatMulFloatScratch(n)))
		return
	}
	if quant.MatMulFloatFast() {
		// The rows past hi go too, for the kernel to prefetch.
		quant.MatMulFloat(w.Type, w.Data[lo*rb:], n, hi-lo, x.f32[:x.t*n], x.t,
			p.out[p.outOff+lo:], p.outStride, sc.floats(quant.MatMulFloatScratch(n)))
		return
	}
	buf := sc.floats(floatTileRows * (n + tileTokens))
	a, c := buf[:floatTileRows*n], buf[floatTileRows*n:]
	for r0 := lo; r0 < hi; r0 += floatTileRows {
		m := min(floatTileRows, hi-r0)
		a := a
		if w.Type == quant.F32 {
			a = f32s(w.Data[r0*rb : (r0+m)*rb]) // already float32: no copy
		} else {
			for i := 0; i < m; i++ {
				if err := quant.Widen(w.Type, w.Data[(r0+i)*rb:(r0+i+1)*rb], a[i*n:(i+1)*n]); err != nil {
					panic(err) // floatTiled admits float types only
				}
			}
		}
		for t0 := 0; t0 < x.t; t0 += tileTokens {
			tn := min(tileTokens, tp-t0)
			quant.MatMulF32(m, tn, n, a, n, x.f32T[t0:], tp, c, tileTokens, false)
			for t := t0; t < min(t0+tileTokens, x.t); t++ {
				o := p.out[t*p.outStride+p.outOff+r0:][:m]
				for i := range o {
					o[i] = c[i*tileTokens+t-t0]
				}
			}
		}
	}
}

// viaChunkRows is how many rows q8ViaRows re-encodes at a time: 64 rows of
// 8192 columns are 557 KB of Q8_0.
const viaChunkRows = 64

// q8ViaRows computes rows [lo, hi) of a batched product of Q5_0, Q4_1 or
// Q5_1 weights where quant has no tiled product for them (no
// AVX512-VNNI): a chunk of rows at a time is re-encoded as Q8_0 and
// multiplied by the tiled Q8_0 kernel, which reads each weight block once
// for all the tokens. Q5_0's blocks hold the same values as Q8_0
// (quant.Q5_0ToQ8_0). Q4_1's and Q5_1's values d·q + m do not: they split
// into Q8_0 blocks of d and q and the blocks' mins (quant.MinToQ8_0), and
// the mins' part, Σ m·s over the activation blocks' sums s, is added as a
// float product (k = the row's blocks, 1/32 of the multiply–adds).
func q8ViaRows(x *activations, p product, lo, hi int, sc *tileScratch) {
	w := p.w
	rb, nb := w.RowBytes(), w.Cols/32
	chunk := min(viaChunkRows, hi-lo)
	buf := sc.bytes(chunk * nb * quant.Q8_0.BlockBytes())
	withMins := w.Type != quant.Q5_0
	var sums, mins []float32
	if withMins {
		f := sc.floats(x.t*nb + chunk*nb)
		sums, mins = f[:x.t*nb], f[x.t*nb:]
		quant.Q8_0BlockSums(x.q8[:x.t*nb*quant.Q8_0.BlockBytes()], sums)
	}
	for r0 := lo; r0 < hi; r0 += viaChunkRows {
		n := min(viaChunkRows, hi-r0)
		q8, src := buf[:n*nb*quant.Q8_0.BlockBytes()], w.Data[r0*rb:(r0+n)*rb]
		var err error
		if withMins {
			err = quant.MinToQ8_0(w.Type, src, n, q8, mins[:n*nb])
		} else {
			err = quant.Q5_0ToQ8_0(src, q8)
		}
		if err != nil {
			panic(err) // whole rows of whole blocks: sizes always match
		}
		out := p.out[p.outOff+r0:]
		quant.MatMulQ8_0Q8_0(q8, nb, n, x.q8, x.t, out, p.outStride)
		if withMins {
			quant.MatMulF32(x.t, n, nb, sums, nb, mins[:n*nb], n, out, p.outStride, true)
		}
	}
}

// q8Rows computes rows [lo, hi) for weights with an 8-bit kernel: one
// token (decode) as a matrix–vector product, a batch (prefill) as a
// matrix–matrix product, which loads each weight block once for all tokens.
func q8Rows(x *activations, p product, lo, hi int,
	matVec func(w, x []byte, nblocks int, out []float32),
	matMul func(w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int)) {
	w := p.w
	rb := w.RowBytes()
	nb := w.Cols / 32
	if x.t == 1 {
		matVec(w.Data[lo*rb:hi*rb], x.q8row(0), nb, p.out[p.outOff+lo:p.outOff+hi])
		return
	}
	matMul(w.Data[lo*rb:hi*rb], nb, hi-lo, x.q8, x.t, p.out[p.outOff+lo:], p.outStride)
}

// f32s views little-endian F32 tensor bytes as floats. GGUF tensor data is
// aligned (32 bytes at least), so the view is aligned too.
func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
