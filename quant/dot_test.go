package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Every kernel is checked against a float64 dot product of the dequantized
// operands, for the generic Go code and (where the CPU has it) the assembly,
// on fresh random data of several lengths.

var blockCounts = []int{1, 2, 3, 5, 18, 48, 49}

// randQ4_0 returns n random Q4_0 blocks with scales of realistic size.
func randQ4_0(rng *rand.Rand, n int) []byte {
	b := make([]byte, n*q4_0Bytes)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	for i := 0; i < n; i++ {
		putF16(b[i*q4_0Bytes:], float32(rng.NormFloat64()*0.02))
	}
	return b
}

// randQ8_0 returns n random Q8_0 blocks; codes lie in [-127, 127] as the
// kernels require of activations.
func randQ8_0(rng *rand.Rand, n int) []byte {
	b := make([]byte, n*q8_0Bytes)
	for i := 0; i < n; i++ {
		putF16(b[i*q8_0Bytes:], float32(rng.NormFloat64()*0.05))
		for j := 2; j < q8_0Bytes; j++ {
			b[i*q8_0Bytes+j] = byte(rng.IntN(255) - 127)
		}
	}
	return b
}

// activations returns n random Gaussian values quantized to Q8_0.
func activations(rng *rand.Rand, nblocks int) []byte {
	x := make([]float32, 32*nblocks)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	q := make([]byte, nblocks*q8_0Bytes)
	QuantizeQ8_0(x, q)
	return q
}

func dequantAll(t testing.TB, typ Type, b []byte, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := Dequantize(typ, b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// refDot returns the float64 dot product of a and b and the sum of the
// magnitudes of its terms, which bounds the rounding error of any float32
// summation order.
func refDot(a, b []float32) (dot, mag float64) {
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		dot += p
		mag += math.Abs(p)
	}
	return dot, mag
}

// checkClose fails unless got is within float32 summation error of want:
// each partial sum may round once, so allow a few ulps of the magnitude.
func checkClose(t *testing.T, what string, got float32, want, mag float64) {
	t.Helper()
	if math.IsNaN(float64(got)) || math.Abs(float64(got)-want) > 2e-6*mag+1e-30 {
		t.Errorf("%s = %v, want %v (term magnitude %v)", what, got, want, mag)
	}
}

type dotImpl struct {
	name string
	f    func(w, x []byte, nblocks int) float32
}

func dotImpls(generic func(w, x []byte, nblocks int) float32, asm func(w, x *byte, nblocks int) float32) []dotImpl {
	impls := []dotImpl{{"generic", generic}}
	if useAVX2 {
		impls = append(impls, dotImpl{"avx2", func(w, x []byte, nb int) float32 { return asm(&w[0], &x[0], nb) }})
	}
	return impls
}

func TestDotQ4_0Q8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 21))
	for _, impl := range dotImpls(dotQ4_0Q8_0Generic, dotQ4_0Q8_0AVX2) {
		for _, nb := range blockCounts {
			for range 20 {
				w, x := randQ4_0(rng, nb), activations(rng, nb)
				want, mag := refDot(dequantAll(t, Q4_0, w, 32*nb), dequantAll(t, Q8_0, x, 32*nb))
				checkClose(t, fmt.Sprintf("%s DotQ4_0Q8_0(%d blocks)", impl.name, nb), impl.f(w, x, nb), want, mag)
			}
		}
	}
}

func TestDotQ8_0Q8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 23))
	for _, impl := range dotImpls(dotQ8_0Q8_0Generic, dotQ8_0Q8_0AVX2) {
		for _, nb := range blockCounts {
			for range 20 {
				w, x := randQ8_0(rng, nb), activations(rng, nb)
				// Weights may hold -128 (ggml never writes it, but the file
				// format allows it); the kernels must still be exact.
				w[2+rng.IntN(32)] = 0x80
				want, mag := refDot(dequantAll(t, Q8_0, w, 32*nb), dequantAll(t, Q8_0, x, 32*nb))
				checkClose(t, fmt.Sprintf("%s DotQ8_0Q8_0(%d blocks)", impl.name, nb), impl.f(w, x, nb), want, mag)
			}
		}
	}
}

// TestDotExtremes uses the largest codes on both sides, where VPMADDUBSW
// would saturate if the pairing of products were wrong.
func TestDotExtremes(t *testing.T) {
	const nb = 3
	w4 := make([]byte, nb*q4_0Bytes)
	w8 := make([]byte, nb*q8_0Bytes)
	x := make([]byte, nb*q8_0Bytes)
	for i := 0; i < nb; i++ {
		putF16(w4[i*q4_0Bytes:], 1)
		putF16(w8[i*q8_0Bytes:], 1)
		putF16(x[i*q8_0Bytes:], 1)
		for j := 0; j < 16; j++ {
			w4[i*q4_0Bytes+2+j] = 0x00 // all codes -8
		}
		for j := 0; j < 32; j++ {
			w8[i*q8_0Bytes+2+j] = 0x80 // -128
			x[i*q8_0Bytes+2+j] = 0x81  // -127
		}
	}
	want4 := float32(nb * 32 * 8 * 127)
	want8 := float32(nb * 32 * 128 * 127)
	for _, impl := range dotImpls(dotQ4_0Q8_0Generic, dotQ4_0Q8_0AVX2) {
		if got := impl.f(w4, x, nb); got != want4 {
			t.Errorf("%s: Q4_0 extremes = %v, want %v", impl.name, got, want4)
		}
	}
	for _, impl := range dotImpls(dotQ8_0Q8_0Generic, dotQ8_0Q8_0AVX2) {
		if got := impl.f(w8, x, nb); got != want8 {
			t.Errorf("%s: Q8_0 extremes = %v, want %v", impl.name, got, want8)
		}
	}
}

type matVecImpl struct {
	name string
	f    func(w, x []byte, nblocks int, out []float32)
}

func matVecImpls(generic func(w, x []byte, nblocks int, out []float32), avx2, vnni func(w, x *byte, nblocks int, out *float32, rows int)) []matVecImpl {
	impls := []matVecImpl{{"generic", generic}}
	wrap := func(asm func(w, x *byte, nblocks int, out *float32, rows int)) func(w, x []byte, nb int, out []float32) {
		return func(w, x []byte, nb int, out []float32) { asm(&w[0], &x[0], nb, &out[0], len(out)) }
	}
	if useAVX2 {
		impls = append(impls, matVecImpl{"avx2", wrap(avx2)})
	}
	if useVNNI {
		impls = append(impls, matVecImpl{"vnni", wrap(vnni)})
	}
	return impls
}

func TestMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 25))
	for _, c := range []struct {
		typ    Type
		bytes  int
		rand   func(*rand.Rand, int) []byte
		impls  []matVecImpl
		public func(w, x []byte, nblocks int, out []float32)
	}{
		{Q4_0, q4_0Bytes, randQ4_0, matVecImpls(matVecQ4_0Q8_0Generic, matVecQ4_0Q8_0AVX2, matVecQ4_0Q8_0VNNI), MatVecQ4_0Q8_0},
		{Q8_0, q8_0Bytes, randQ8_0, matVecImpls(matVecQ8_0Q8_0Generic, matVecQ8_0Q8_0AVX2, matVecQ8_0Q8_0VNNI), MatVecQ8_0Q8_0},
	} {
		impls := append(c.impls, matVecImpl{"public", c.public})
		for _, impl := range impls {
			for _, nb := range []int{1, 3, 18, 48} {
				for _, rows := range []int{1, 2, 7, 33} {
					w, x := c.rand(rng, nb*rows), activations(rng, nb)
					if c.typ == Q8_0 {
						// Weight codes may be -128 (see TestDotQ8_0Q8_0).
						for i := 0; i < nb*rows; i++ {
							w[i*q8_0Bytes+2+rng.IntN(32)] = 0x80
						}
					}
					out := make([]float32, rows+1)
					out[rows] = 42 // must stay untouched
					impl.f(w, x, nb, out[:rows])
					xf := dequantAll(t, Q8_0, x, 32*nb)
					for r := 0; r < rows; r++ {
						rb := nb * c.bytes
						want, mag := refDot(dequantAll(t, c.typ, w[r*rb:(r+1)*rb], 32*nb), xf)
						checkClose(t, fmt.Sprintf("%s %v MatVec(%d blocks, %d rows) row %d", impl.name, c.typ, nb, rows, r), out[r], want, mag)
					}
					if out[rows] != 42 {
						t.Errorf("%s %v MatVec wrote past its rows", impl.name, c.typ)
					}
				}
			}
		}
	}
}

func TestDotPublic(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 29))
	for _, nb := range blockCounts {
		w4, w8, x := randQ4_0(rng, nb), randQ8_0(rng, nb), activations(rng, nb)
		xf := dequantAll(t, Q8_0, x, 32*nb)
		want, mag := refDot(dequantAll(t, Q4_0, w4, 32*nb), xf)
		checkClose(t, "DotQ4_0Q8_0", DotQ4_0Q8_0(w4, x, nb), want, mag)
		want, mag = refDot(dequantAll(t, Q8_0, w8, 32*nb), xf)
		checkClose(t, "DotQ8_0Q8_0", DotQ8_0Q8_0(w8, x, nb), want, mag)
	}
	if DotQ4_0Q8_0(nil, nil, 0) != 0 || DotQ8_0Q8_0(nil, nil, 0) != 0 {
		t.Error("empty dot is not 0")
	}
}

// randRow returns n elements of type typ as random bytes with sane scales,
// or quantized random data for the types Quantize supports.
func randRow(t *testing.T, rng *rand.Rand, typ Type, n int) []byte {
	if QuantizedSupported(typ) {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return mustQuantize(t, typ, x)
	}
	size, _ := typ.RowBytes(uint64(n))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	// Overwrite the scale fields, which random bits could make NaN or Inf.
	bb := typ.BlockBytes()
	for off := 0; off < len(b); off += bb {
		blk := b[off : off+bb]
		scale := func(at int) { putF16(blk[at:], float32(rng.NormFloat64()*0.1)) }
		switch typ {
		case Q2_K:
			scale(80)
			scale(82)
		case Q3_K:
			scale(108)
		case Q4_K, Q5_K:
			scale(0)
			scale(2)
		case Q6_K:
			scale(208)
		case Q8_K:
			copy(blk, []byte{0x00, 0x00, 0x80, 0x3c}) // float32 1/64
		default:
			t.Fatalf("randRow: no scale layout for %v", typ)
		}
	}
	return b
}

func TestDotF32AllTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 31))
	for _, typ := range []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_K, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		for _, n := range []int{256, 512, 768, 1536, 32, 64, 576, 5, 300} {
			if n%typ.BlockSize() != 0 {
				continue
			}
			row := randRow(t, rng, typ, n)
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			want, mag := refDot(dequantAll(t, typ, row, n), x)
			checkClose(t, fmt.Sprintf("DotF32(%v, %d)", typ, n), DotF32(typ, row, x), want, mag)
		}
	}
}

func TestDotF32Allocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 33))
	row := randRow(t, rng, Q4_K, 1536)
	x := make([]float32, 1536)
	if n := testing.AllocsPerRun(10, func() { DotF32(Q4_K, row, x) }); n != 0 {
		t.Errorf("DotF32 allocates %v times per call", n)
	}
}

func TestDotAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 35))
	type impls struct {
		name string
		dot  func(a, b []float32) float32
		axpy func(a float32, x, y []float32)
	}
	all := []impls{{"generic", dotF32Generic, axpyGeneric}, {"public", Dot, Axpy}}
	if useAVX2 {
		all = append(all, impls{"avx2",
			func(a, b []float32) float32 { return dotF32AVX2(&a[0], &b[0], len(a)) },
			func(a float32, x, y []float32) { axpyAVX2(a, &x[0], &y[0], len(x)) }})
	}
	for _, im := range all {
		for n := 1; n <= 80; n++ {
			for _, size := range []int{n, n * 37} {
				a, b := make([]float32, size+1), make([]float32, size+1)
				for i := range a {
					a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				want, mag := refDot(a[:size], b[:size])
				checkClose(t, fmt.Sprintf("%s Dot(%d)", im.name, size), im.dot(a[:size], b[:size]), want, mag)

				alpha := float32(rng.NormFloat64())
				y := append([]float32(nil), b...)
				im.axpy(alpha, a[:size], y[:size])
				for i := 0; i < size; i++ {
					ref := float64(b[i]) + float64(alpha)*float64(a[i])
					if math.Abs(float64(y[i])-ref) > 1e-6*(math.Abs(float64(b[i]))+math.Abs(float64(alpha*a[i]))) {
						t.Fatalf("%s Axpy(%d)[%d] = %v, want %v", im.name, size, i, y[i], ref)
					}
				}
				if y[size] != b[size] {
					t.Fatalf("%s Axpy(%d) wrote past the end", im.name, size)
				}
			}
		}
	}
	if Dot(nil, nil) != 0 {
		t.Error("empty Dot is not 0")
	}
	Axpy(1, nil, nil)
}

func TestDotPanics(t *testing.T) {
	w, x := make([]byte, 2*q4_0Bytes), make([]byte, 2*q8_0Bytes)
	cases := map[string]func(){
		"DotQ4_0Q8_0 short weights":     func() { DotQ4_0Q8_0(w[:35], x, 2) },
		"DotQ4_0Q8_0 short activations": func() { DotQ4_0Q8_0(w, x[:67], 2) },
		"DotQ4_0Q8_0 negative":          func() { DotQ4_0Q8_0(w, x, -1) },
		"DotQ8_0Q8_0 short weights":     func() { DotQ8_0Q8_0(w, x, 2) },
		"MatVecQ4_0Q8_0 too many rows":  func() { MatVecQ4_0Q8_0(w, x, 1, make([]float32, 3)) },
		"MatVecQ8_0Q8_0 too many rows":  func() { MatVecQ8_0Q8_0(x, x, 2, make([]float32, 2)) },
		"DotF32 unsupported":            func() { DotF32(IQ2_XXS, make([]byte, 66), make([]float32, 256)) },
		"DotF32 wrong size":             func() { DotF32(Q4_0, w[:35], make([]float32, 64)) },
		"Dot lengths":                   func() { Dot(make([]float32, 3), make([]float32, 4)) },
		"Axpy lengths":                  func() { Axpy(1, make([]float32, 3), make([]float32, 2)) },
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

// Benchmarks report MB/s of weight bytes (activation bytes for
// QuantizeQ8_0). Rows of 576 and 1536 elements are SmolLM-135M's model and
// FFN widths.

var benchSink float32

func benchDot(b *testing.B, nb, wbytes int, f func(w, x []byte, nb int) float32, w, x []byte) {
	b.SetBytes(int64(nb * wbytes))
	for b.Loop() {
		benchSink += f(w, x, nb)
	}
}

func BenchmarkDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(40, 41))
	for _, n := range []int{576, 1536} {
		nb := n / 32
		w4, w8, x := randQ4_0(rng, nb), randQ8_0(rng, nb), activations(rng, nb)
		for _, impl := range dotImpls(dotQ4_0Q8_0Generic, dotQ4_0Q8_0AVX2) {
			b.Run(fmt.Sprintf("Q4_0/%s/n=%d", impl.name, n), func(b *testing.B) { benchDot(b, nb, q4_0Bytes, impl.f, w4, x) })
		}
		for _, impl := range dotImpls(dotQ8_0Q8_0Generic, dotQ8_0Q8_0AVX2) {
			b.Run(fmt.Sprintf("Q8_0/%s/n=%d", impl.name, n), func(b *testing.B) { benchDot(b, nb, q8_0Bytes, impl.f, w8, x) })
		}
	}
}

// BenchmarkMatVec multiplies SmolLM-135M-shaped matrices: the FFN gate
// (1536 rows of 576, 0.5 MB of Q4_0: fits L2), the FFN down projection
// (576 rows of 1536), the Q8_0 output head (49152 rows of 576, 30 MB), and
// 64 MB of Q4_0 rows of 576, twice a 32 MB L3, which streams from DRAM as a
// whole model's weights do.
func BenchmarkMatVec(b *testing.B) {
	rng := rand.New(rand.NewPCG(42, 43))
	for _, c := range []struct {
		name       string
		rows, cols int
		typ        Type
	}{
		{"gate", 1536, 576, Q4_0},
		{"down", 576, 1536, Q4_0},
		{"head", 49152, 576, Q8_0},
		{"dram", 64 << 20 / 324, 576, Q4_0},
	} {
		nb := c.cols / 32
		x := activations(rng, nb)
		out := make([]float32, c.rows)
		var w []byte
		var impls []matVecImpl
		if c.typ == Q4_0 {
			w, impls = randQ4_0(rng, nb*c.rows), matVecImpls(matVecQ4_0Q8_0Generic, matVecQ4_0Q8_0AVX2, matVecQ4_0Q8_0VNNI)
		} else {
			w, impls = randQ8_0(rng, nb*c.rows), matVecImpls(matVecQ8_0Q8_0Generic, matVecQ8_0Q8_0AVX2, matVecQ8_0Q8_0VNNI)
		}
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%v/%s/%s", c.typ, impl.name, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					impl.f(w, x, nb, out)
				}
			})
		}
	}
}

func BenchmarkQuantizeQ8_0(b *testing.B) {
	rng := rand.New(rand.NewPCG(46, 47))
	for _, n := range []int{576, 1536} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		dst := make([]byte, n/32*q8_0Bytes)
		for name, f := range q8Impls() {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(4 * n))
				for b.Loop() {
					f(x, dst)
				}
			})
		}
	}
}

func BenchmarkDotF32(b *testing.B) {
	rng := rand.New(rand.NewPCG(48, 49))
	for _, n := range []int{64, 576} {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		impls := map[string]func(a, b []float32) float32{"generic": dotF32Generic}
		if useAVX2 {
			impls["avx2"] = func(a, b []float32) float32 { return dotF32AVX2(&a[0], &b[0], len(a)) }
		}
		for name, f := range impls {
			b.Run(fmt.Sprintf("Dot/%s/n=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				for b.Loop() {
					benchSink += f(x, y)
				}
			})
		}
	}
	for _, typ := range []Type{Q4_K, Q6_K, F16} {
		row := make([]byte, 0)
		size, _ := typ.RowBytes(1536)
		row = append(row, make([]byte, size)...)
		x := make([]float32, 1536)
		b.Run(fmt.Sprintf("DotF32/%v/n=1536", typ), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				benchSink += DotF32(typ, row, x)
			}
		})
	}
}
