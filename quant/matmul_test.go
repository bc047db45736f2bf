package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

type matMulImpl struct {
	name string
	f    func(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int)
}

// matMulImpls lists every MatMul implementation this machine can run,
// forced by path, and the public functions.
func matMulImpls() []matMulImpl {
	paths := []matMulPath{matMulGenericPath}
	if useAVX2 {
		paths = append(paths, matMulAVX2Path)
	}
	if useVNNI {
		paths = append(paths, matMulVNNIPath)
	}
	var impls []matMulImpl
	for _, p := range paths {
		impls = append(impls, matMulImpl{[]string{"generic", "avx2", "vnni"}[p],
			func(typ Type, w []byte, nb, rows int, x []byte, tokens int, out []float32, stride int) {
				matMul(typ, p, w, nb, rows, x, tokens, out, stride)
			}})
	}
	return append(impls, matMulImpl{"public", func(typ Type, w []byte, nb, rows int, x []byte, tokens int, out []float32, stride int) {
		switch typ {
		case Q4_0:
			MatMulQ4_0Q8_0(w, nb, rows, x, tokens, out, stride)
		case Q8_0:
			MatMulQ8_0Q8_0(w, nb, rows, x, tokens, out, stride)
		default:
			MatMulRowsQ8_0(typ, w, nb, rows, x, tokens, out, stride)
		}
	}})
}

// poison, a NaN, fills the whole output buffer before a MatMul: cells it
// must not touch have to keep it, and a cell it fails to set fails the
// comparison with the reference.
var poison = math.Float32frombits(0x7fc0dead)

// checkMatMulShape runs impl on one shape and compares every output cell with
// the float64 reference; every other float of the buffer, before, between
// and after the cells, must keep the poison value.
func checkMatMulShape(t *testing.T, rng *rand.Rand, impl matMulImpl, typ Type, w, x []byte, wf, xf [][]float32, nb, rows, tokens int) {
	t.Helper()
	stride := rows + rng.IntN(3)
	off := rng.IntN(5)
	buf := make([]float32, off+tokens*stride+3)
	for i := range buf {
		buf[i] = poison
	}
	impl.f(typ, w, nb, rows, x, tokens, buf[off:], stride)
	what := func() string {
		return fmt.Sprintf("%s %v MatMul(%d blocks, %d rows, %d tokens, stride %d)", impl.name, typ, nb, rows, tokens, stride)
	}
	for i, v := range buf {
		j := i - off
		tok, r := j/stride, j%stride
		if j < 0 || tok >= tokens || r >= rows {
			if math.Float32bits(v) != math.Float32bits(poison) {
				t.Fatalf("%s wrote %v at float %d, outside its cells", what(), v, i)
			}
			continue
		}
		want, mag := refDot(wf[r], xf[tok])
		// The min terms, m·(d(x)·Σy) a block, round more than the integer
		// sums (TestDotQ45Q8_0's bound).
		tol := 2e-6
		switch typ {
		case Q4_1, Q5_0, Q5_1, Q4_K, Q5_K:
			// TestKDotMatchesDequantized's bound for the K-quants.
			tol = 1e-5
		}
		if math.IsNaN(float64(v)) || math.Abs(float64(v)-want) > tol*mag+1e-30 {
			t.Fatalf("%s row %d token %d = %v, want %v (term magnitude %v)", what(), r, tok, v, want, mag)
		}
	}
}

// matMulTypes are the weight types of the MatMul kernels.
var matMulTypes = []Type{Q4_0, Q8_0, IQ4_NL, Q4_1, Q5_0, Q5_1}

// matMulOperands returns random weights and activations and their
// dequantized rows. Q8_0 weights get some -128 codes (see TestDotQ8_0Q8_0).
func matMulOperands(t *testing.T, rng *rand.Rand, typ Type, nb, rows, tokens int) (w, x []byte, wf, xf [][]float32) {
	switch typ {
	case Q4_0:
		w = randQ4_0(rng, nb*rows)
	case Q8_0:
		w = randQ8_0(rng, nb*rows)
		for i := 0; i < nb*rows; i++ {
			w[i*q8_0Bytes+2+rng.IntN(32)] = 0x80
		}
	default:
		w = randScaled(rng, typ, nb*rows)
	}
	x = activations(rng, nb*tokens)
	wrb := nb * typ.BlockBytes()
	for r := 0; r < rows; r++ {
		wf = append(wf, dequantAll(t, typ, w[r*wrb:(r+1)*wrb], 32*nb))
	}
	xrb := nb * q8_0Bytes
	for k := 0; k < tokens; k++ {
		xf = append(xf, dequantAll(t, Q8_0, x[k*xrb:(k+1)*xrb], 32*nb))
	}
	return w, x, wf, xf
}

// randScaled returns n blocks of IQ4_NL, Q4_1, Q5_0 or Q5_1 weights: random
// codes (and fifth bits), fp16 scales of realistic size and, for the types
// with one, mins.
func randScaled(rng *rand.Rand, typ Type, n int) []byte {
	bb := typ.BlockBytes()
	b := make([]byte, n*bb)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	for i := 0; i < n; i++ {
		putF16(b[i*bb:], float32(rng.NormFloat64()*0.02))
		if typ == Q4_1 || typ == Q5_1 {
			putF16(b[i*bb+2:], float32(rng.NormFloat64()*0.1))
		}
	}
	return b
}

func TestMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 51))
	// Rows and tokens around the tile sizes (16 or 8 rows, 8 or 4 tokens);
	// 64 blocks fill one packed chunk, 65 and 130 need two and three.
	rowCounts := []int{1, 5, 8, 15, 16, 17, 35}
	tokenCounts := []int{1, 2, 4, 7, 8, 9, 21}
	blocks := []int{1, 3, 18, 64, 65, 130}
	if testing.Short() {
		blocks = []int{1, 18, 65}
	}
	for _, typ := range matMulTypes {
		for _, nb := range blocks {
			for _, rows := range rowCounts {
				for _, tokens := range tokenCounts {
					w, x, wf, xf := matMulOperands(t, rng, typ, nb, rows, tokens)
					for _, impl := range matMulImpls() {
						checkMatMulShape(t, rng, impl, typ, w, x, wf, xf, nb, rows, tokens)
					}
				}
			}
		}
	}
}

// TestMatMulLongPrompt covers prompts longer than the activation table
// holds at once, so that the kernels run on several chunks of tokens.
func TestMatMulLongPrompt(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 53))
	for _, typ := range matMulTypes {
		for _, c := range []struct{ nb, rows, tokens int }{{64, 19, 75}, {130, 9, 70}, {33, 16, 131}} {
			w, x, wf, xf := matMulOperands(t, rng, typ, c.nb, c.rows, c.tokens)
			for _, impl := range matMulImpls() {
				checkMatMulShape(t, rng, impl, typ, w, x, wf, xf, c.nb, c.rows, c.tokens)
			}
		}
	}
}

// TestMatMulExtremes uses the largest codes on both sides, where the AVX2
// kernels' 16-bit partial sums would overflow if the bounds they rely on
// were wrong. The sums are exact, so the results must be too.
func TestMatMulExtremes(t *testing.T) {
	const nb, rows, tokens = 3, 18, 10
	for _, typ := range []Type{Q4_0, Q8_0} {
		for _, c := range []struct {
			wcode int // Q4_0 nibble or Q8_0 code
			y     int8
		}{{15, 127}, {15, -127}, {0, 127}, {0, -127}, {-128, -127}, {-128, 127}, {127, 127}} {
			if typ == Q4_0 && (c.wcode < 0 || c.wcode > 15) {
				continue
			}
			wb := typ.BlockBytes()
			w := make([]byte, nb*rows*wb)
			for i := 0; i < nb*rows; i++ {
				blk := w[i*wb : (i+1)*wb]
				putF16(blk, 1)
				for j := 2; j < wb; j++ {
					if typ == Q4_0 {
						blk[j] = byte(c.wcode | c.wcode<<4)
					} else {
						blk[j] = byte(int8(c.wcode))
					}
				}
			}
			x := make([]byte, nb*tokens*q8_0Bytes)
			for i := 0; i < nb*tokens; i++ {
				putF16(x[i*q8_0Bytes:], 1)
				for j := 2; j < q8_0Bytes; j++ {
					x[i*q8_0Bytes+j] = byte(c.y)
				}
			}
			wv := c.wcode
			if typ == Q4_0 {
				wv -= 8
			}
			want := float32(nb * 32 * wv * int(c.y))
			for _, impl := range matMulImpls() {
				out := make([]float32, rows*tokens)
				impl.f(typ, w, nb, rows, x, tokens, out, rows)
				for i, v := range out {
					if v != want {
						t.Fatalf("%s %v extremes (w %d, y %d): out[%d] = %v, want %v", impl.name, typ, c.wcode, c.y, i, v, want)
					}
				}
			}
		}
	}
}

func TestMatMulEmpty(t *testing.T) {
	out := []float32{1, 2, 3, 4, 5}
	for _, impl := range matMulImpls() {
		copy(out, []float32{1, 2, 3, 4, 5})
		impl.f(Q4_0, nil, 0, 2, nil, 2, out, 3)
		if want := []float32{0, 0, 3, 0, 0}; fmt.Sprint(out) != fmt.Sprint(want) {
			t.Errorf("%s: zero blocks gave %v, want %v", impl.name, out, want)
		}
		impl.f(Q4_0, nil, 4, 0, nil, 2, out, 3)
		impl.f(Q8_0, nil, 4, 2, nil, 0, out, 3)
		if want := []float32{0, 0, 3, 0, 0}; fmt.Sprint(out) != fmt.Sprint(want) {
			t.Errorf("%s: no rows or tokens changed out to %v", impl.name, out)
		}
	}
}

func TestMatMulPanics(t *testing.T) {
	w, x := make([]byte, 4*q4_0Bytes), make([]byte, 4*q8_0Bytes)
	cases := map[string]func(){
		"negative":       func() { MatMulQ4_0Q8_0(w, -1, 1, x, 1, make([]float32, 1), 1) },
		"short weights":  func() { MatMulQ4_0Q8_0(w, 2, 3, x, 1, make([]float32, 3), 3) },
		"short x":        func() { MatMulQ4_0Q8_0(w, 2, 2, x, 3, make([]float32, 6), 2) },
		"short out":      func() { MatMulQ4_0Q8_0(w, 2, 2, x, 2, make([]float32, 4), 3) },
		"stride < rows":  func() { MatMulQ4_0Q8_0(w, 2, 2, x, 2, make([]float32, 4), 1) },
		"Q8_0 short w":   func() { MatMulQ8_0Q8_0(w, 2, 2, x, 1, make([]float32, 2), 2) },
		"Q8_0 short out": func() { MatMulQ8_0Q8_0(x, 2, 2, x, 2, make([]float32, 3), 2) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "quant: ") {
					t.Errorf("%s: recovered %v, want a quant: panic", name, r)
				}
			}()
			f()
		}()
	}
}

// BenchmarkMatMul multiplies SmolLM-135M's FFN gate (1536 rows of 576) and
// down projection (576 rows of 1536) by a 128-token prompt on one thread,
// for each MatMul path, and reports multiply–accumulates per second.
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(54, 55))
	const tokens = 128
	for _, c := range []struct {
		name       string
		rows, cols int
	}{{"gate", 1536, 576}, {"down", 576, 1536}} {
		nb := c.cols / 32
		x := activations(rng, nb*tokens)
		out := make([]float32, c.rows*tokens)
		macs := float64(c.rows * c.cols * tokens)
		for _, typ := range matMulTypes {
			var w []byte
			switch typ {
			case Q4_0:
				w = randQ4_0(rng, nb*c.rows)
			case Q8_0:
				w = randQ8_0(rng, nb*c.rows)
			default:
				w = randScaled(rng, typ, nb*c.rows)
			}
			for _, impl := range matMulImpls() {
				if impl.name == "public" {
					continue
				}
				b.Run(fmt.Sprintf("%v/%s/%s", typ, impl.name, c.name), func(b *testing.B) {
					for b.Loop() {
						impl.f(typ, w, nb, c.rows, x, tokens, out, c.rows)
					}
					b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

func TestMatMulAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(56, 57))
	const nb, rows, tokens = 18, 40, 9
	w, x := randQ4_0(rng, nb*rows), activations(rng, nb*tokens)
	out := make([]float32, rows*tokens)
	if n := testing.AllocsPerRun(10, func() { MatMulQ4_0Q8_0(w, nb, rows, x, tokens, out, rows) }); n != 0 {
		t.Errorf("MatMulQ4_0Q8_0 allocates %v times per call", n)
	}
}

// MatMulKQ8_K's batched products (on VNNI machines the tiled kernels,
// one super-block a chunk) against the float64 reference, with rows and
// tokens around the tile sizes, several super-blocks, tokens past the 512
// the table holds at once, and the weights' codes, scales and mins all at
// their top. With AVX2 the K-quants' own tiled kernels (matMulKAVX2), which
// machines without VNNI take, are checked too.
func TestMatMulKQ8_KBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(56, 57))
	impls := []matMulImpl{{"public", func(typ Type, w []byte, nb, rows int, x []byte, tokens int, out []float32, stride int) {
		MatMulKQ8_K(typ, w, nb, rows, x, tokens, out, stride)
	}}}
	if useAVX2 {
		impls = append(impls, matMulImpl{"avx2", matMulKAVX2})
	}
	type shape struct {
		nb, rows, tokens int
		fill             byte
	}
	var shapes []shape
	for _, nb := range []int{1, 3} {
		for _, rows := range []int{1, 5, 15, 16, 17, 35} {
			for _, tokens := range []int{2, 7, 8, 9, 21} {
				shapes = append(shapes, shape{nb, rows, tokens, 0})
			}
		}
	}
	shapes = append(shapes, shape{2, 19, 520, 0}, shape{2, 16, 9, 0xff}, shape{3, 7, 10, 0xff})
	// Q4_K's and Q6_K's packed tiles (matMulKX8): groups of eight rows
	// past one buffer of them, super-blocks past one buffer's, the rows
	// and tokens left over; and the int16 sums at their largest, every
	// code 15 (Q4_K) or 63 (Q6_K) against every activation 127.
	shapes = append(shapes, shape{5, 40, 32, 0}, shape{5, 43, 33, 0}, shape{9, 75, 35, 0}, shape{5, 43, 33, 0xff})
	extreme := func(c shape) bool { return c.fill == 0xff && c.nb == 5 }
	for _, typ := range []Type{IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		for _, c := range shapes {
			var w []byte
			if typ == IQ4_XS {
				w = randIQ4(rng, IQ4_XS, c.nb*c.rows, 0.002)
			} else {
				w = randK(rng, typ, c.nb*c.rows, c.fill)
			}
			x, _ := randQ8K(t, rng, c.nb*c.tokens, 1)
			if extreme(c) {
				xs := make([]float32, QK_K*c.nb*c.tokens)
				for i := range xs {
					xs[i] = 1 // a block of equal values quantizes to 127s
				}
				QuantizeQ8_K(xs, x)
			}
			wrb, xrb := c.nb*typ.BlockBytes(), c.nb*Q8KBytes
			var wf, xf [][]float32
			for r := 0; r < c.rows; r++ {
				wf = append(wf, dequantAll(t, typ, w[r*wrb:(r+1)*wrb], QK_K*c.nb))
			}
			for k := 0; k < c.tokens; k++ {
				xf = append(xf, dequantAll(t, Q8_K, x[k*xrb:(k+1)*xrb], QK_K*c.nb))
			}
			for _, impl := range impls {
				if impl.name == "avx2" && typ == IQ4_XS {
					continue
				}
				checkMatMulShape(t, rng, impl, typ, w, x, wf, xf, c.nb, c.rows, c.tokens)
			}
		}
	}
}
