package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustQuantize(t *testing.T, typ Type, src []float32) []byte {
	t.Helper()
	n, err := typ.RowBytes(uint64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	dst := bytes.Repeat([]byte{0xa5}, int(n)) // poison
	if err := Quantize(typ, src, dst); err != nil {
		t.Fatalf("Quantize(%v): %v", typ, err)
	}
	return dst
}

func checkQuant(t *testing.T, typ Type, src []float32, want []byte) {
	t.Helper()
	if got := mustQuantize(t, typ, src); !bytes.Equal(got, want) {
		t.Errorf("Quantize(%v)\n got % x\nwant % x", typ, got, want)
	}
}

func TestQuantizeFloats(t *testing.T) {
	nan := float32(math.NaN())
	src := []float32{1, -2, 0.33333334, 65520, 1e-8, 0x1p-24, nan}
	checkQuant(t, F16, src, []byte{0x00, 0x3c, 0x00, 0xc0, 0x55, 0x35, 0x00, 0x7c, 0x00, 0x00, 0x01, 0x00, 0x00, 0x7e})
	checkQuant(t, BF16, []float32{1, -3, math.Pi, 1.00390625, 1.01171875}, []byte{0x80, 0x3f, 0x40, 0xc0, 0x49, 0x40, 0x80, 0x3f, 0x82, 0x3f})
	checkQuant(t, F32, []float32{1.5, -2}, []byte{0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0})
}

func TestQuantizeQ4_0(t *testing.T) {
	// x_j = j/4 - 4: the largest magnitude is x_0 = -4, so d = -4/-8 = 0.5
	// and the code is trunc(2·x_j + 8.5) = floor((j+1)/2), capped at 15.
	x := make([]float32, 64)
	for j := 0; j < 32; j++ {
		x[j] = float32(j)/4 - 4
	}
	// Second block all zero: d = 0/-8 = -0 (fp16 0x8000, as ggml writes
	// it), id = 0, every code trunc(8.5) = 8.
	want := cat(
		[]byte{0x00, 0x38, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8},
		[]byte{0x00, 0x80}, rep(0x88, 16),
	)
	checkQuant(t, Q4_0, x, want)
}

func TestQuantizeQ4_1(t *testing.T) {
	// min -2 (x_0), max 13 (x_1), others -2 + j/4: d = 15/15 = 1, m = -2,
	// code trunc(x+2 + 0.5): 0, 15, then floor((j+2)/4).
	x := make([]float32, 32)
	for j := range x {
		x[j] = -2 + float32(j)/4
	}
	x[0], x[1] = -2, 13
	want := []byte{0x00, 0x3c, 0x00, 0xc0,
		0x40, 0x4f, 0x51, 0x51, 0x51, 0x51, 0x62, 0x62, 0x62, 0x62, 0x73, 0x73, 0x73, 0x73, 0x84, 0x84}
	checkQuant(t, Q4_1, x, want)
}

func TestQuantizeQ5_0(t *testing.T) {
	// x_j = j/2 - 8: max magnitude x_0 = -8, d = 0.5, code trunc(j-16+16.5) = j.
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j)/2 - 8
	}
	want := []byte{0x00, 0x38, 0x00, 0x00, 0xff, 0xff, // qh: codes 16..31 have the fifth bit
		0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	checkQuant(t, Q5_0, x, want)
}

func TestQuantizeQ5_1(t *testing.T) {
	// x_j = j/2 - 1: min -1, max 14.5, d = 15.5/31 = 0.5, code j.
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j)/2 - 1
	}
	want := []byte{0x00, 0x38, 0x00, 0xbc, 0x00, 0x00, 0xff, 0xff,
		0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	checkQuant(t, Q5_1, x, want)
}

// q8TieBlock has amax 127, so d = 1 and id = 1, and holds the values whose
// rounding tells roundf (half away from zero) from round-half-even.
var q8TieBlock = [32]float32{127, 2.5, -2.5, 0.5, -0.5, 1.5, -126.5, 0.49999997, -0.49999997, 3.5}

var q8TieWant = cat([]byte{0x00, 0x3c}, []byte{0x7f, 0x03, 0xfd, 0x01, 0xff, 0x02, 0x81, 0x00, 0x00, 0x04}, make([]byte, 22))

func TestQuantizeQ8_0(t *testing.T) {
	x := make([]float32, 64)
	copy(x, q8TieBlock[:])
	// Second block all zero: d = 0, codes 0.
	checkQuant(t, Q8_0, x, cat(q8TieWant, make([]byte, 34)))
}

// q8Impls are the implementations of QuantizeQ8_0 on this machine.
func q8Impls() map[string]func(x []float32, dst []byte) {
	m := map[string]func(x []float32, dst []byte){"generic": quantQ8_0}
	if useAVX2 {
		m["avx2"] = func(x []float32, dst []byte) { quantizeQ8_0AVX2(&x[0], &dst[0], len(x)/32) }
	}
	return m
}

func TestQuantizeQ8_0Fast(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// Blocks: random normals at several scales, the tie block, zeros,
	// subnormal-sized values, and codes that land exactly on .5 after
	// scaling (x = (k+0.5)·d with d a power of two, amax 127·d).
	var x []float32
	for _, scale := range []float64{1, 1e-3, 1e3, 1e-30, 1e30} {
		for range 40 {
			for range 32 {
				x = append(x, float32(rng.NormFloat64()*scale))
			}
		}
	}
	x = append(x, q8TieBlock[:]...)
	x = append(x, make([]float32, 32)...)
	for range 20 {
		d := float32(math.Ldexp(1, rng.IntN(20)-10))
		x = append(x, 127*d)
		for range 31 {
			x = append(x, (float32(rng.IntN(254)-127)+0.5)*d)
		}
	}
	want := mustQuantize(t, Q8_0, x)
	for name, f := range q8Impls() {
		got := make([]byte, len(want))
		f(x, got)
		if !bytes.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: byte %d (block %d) = %#x, want %#x", name, i, i/34, got[i], want[i])
				}
			}
		}
	}
	got := make([]byte, len(want))
	QuantizeQ8_0(x, got)
	if !bytes.Equal(got, want) {
		t.Error("QuantizeQ8_0 differs from Quantize(Q8_0)")
	}
	for b := 0; b < len(got)/34; b++ {
		for _, c := range got[b*34+2 : b*34+34] {
			if int8(c) == -128 {
				t.Fatalf("block %d has code -128", b)
			}
		}
	}
}

// TestRoundHalfAwayTrick checks the identity the assembly quantizer rounds
// with: trunc(v + copysign(0.49999997, v)) == roundf(v). It was checked for
// all 2.2e9 float32 values with |v| <= 128 when written; the test covers the
// 64 floats on each side of every tie k+0.5 and of every integer, where a
// wrong identity would fail, plus random values.
func TestRoundHalfAwayTrick(t *testing.T) {
	c := math.Float32frombits(0x3effffff)
	check := func(v float32) {
		cc := c
		if math.Signbit(float64(v)) {
			cc = -c
		}
		if got, want := int32(float32(v+cc)), int32(math.Round(float64(v))); got != want {
			t.Fatalf("trick rounds %v (%#08x) to %d, roundf to %d", v, math.Float32bits(v), got, want)
		}
	}
	for k := -256; k <= 256; k++ {
		center := math.Float32bits(float32(k) / 2)
		for d := uint32(0); d <= 64; d++ {
			for _, b := range []uint32{center + d, center - d} {
				if v := math.Float32frombits(b); !math.IsNaN(float64(v)) && math.Abs(float64(v)) <= 128 {
					check(v)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for range 100000 {
		check(float32(rng.Float64()*256 - 128))
		check(float32(math.Ldexp(rng.Float64(), -rng.IntN(30))))
	}
}

func TestRoundInt8(t *testing.T) {
	cases := map[float32]int8{0.5: 1, -0.5: -1, 1.5: 2, 2.5: 3, -2.5: -3, 0.49999997: 0, -0.49999997: 0,
		126.5: 127, -126.5: -127, 127.4: 127, 200: 127, -200: -128, 0: 0}
	for v, want := range cases {
		if got := roundInt8(v); got != want {
			t.Errorf("roundInt8(%v) = %d, want %d", v, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100000 {
		v := float32(rng.Float64()*255 - 127.5)
		if got, want := roundInt8(v), int8(math.Round(float64(v))); got != want {
			t.Fatalf("roundInt8(%v) = %d, want %d", v, got, want)
		}
	}
}

// roundTripBounds is the largest relative RMS error ‖x−x̂‖/‖x‖ each
// quantizer may leave on Gaussian data: about 15% over what this test's
// seed measures (F16 2.06e-4, BF16 1.66e-3, Q8_0 5.36e-3, Q5_0 4.28e-2,
// Q5_1 3.74e-2, Q4_0 8.61e-2, Q4_1 7.77e-2). A layout or rounding bug
// moves these by far more.
var roundTripBounds = map[Type]float64{
	F32:  0,
	F16:  2.4e-4,
	BF16: 1.9e-3,
	Q8_0: 6.2e-3,
	Q5_0: 4.9e-2,
	Q5_1: 4.3e-2,
	Q4_0: 9.9e-2,
	Q4_1: 8.9e-2,
}

func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, 32*1024)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for typ, bound := range roundTripBounds {
		q := mustQuantize(t, typ, x)
		y := make([]float32, len(x))
		if err := Dequantize(typ, q, y); err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for i := range x {
			d := float64(x[i]) - float64(y[i])
			num += d * d
			den += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(num / den)
		t.Logf("%v: relative RMS error %.3g (bound %.3g)", typ, rel, bound)
		if !(rel <= bound) {
			t.Errorf("%v: relative RMS error %.3g exceeds %.3g", typ, rel, bound)
		}
	}
}

// TestQuantizeFixedPoint checks that values already on a block's grid come
// back with the same bytes: the quantizers must recover the scale and every
// code exactly.
func TestQuantizeFixedPoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	// scales with few mantissa bits so that m + q·d is exact in float32
	scale := func() uint16 { return F32ToF16(float32(math.Ldexp(float64(1+rng.IntN(8)), -rng.IntN(12)))) }
	put := func(b []byte, h uint16) { b[0], b[1] = byte(h), byte(h>>8) }
	for range 200 {
		var b []byte
		var typ Type
		switch rng.IntN(5) {
		case 0: // Q4_0 with at least one code 0 (value -8d, the largest magnitude)
			typ, b = Q4_0, make([]byte, 18)
			put(b, scale())
			for j := 2; j < 18; j++ {
				b[j] = byte(rng.IntN(256))
			}
			b[2+rng.IntN(16)] &= 0xf0
		case 1: // Q5_0 with a code 0
			typ, b = Q5_0, make([]byte, 22)
			put(b, scale())
			for j := 2; j < 22; j++ {
				b[j] = byte(rng.IntN(256))
			}
			b[6] &= 0xf0
			b[2] &^= 1
		case 2: // Q8_0 with a code ±127 and positive d
			typ, b = Q8_0, make([]byte, 34)
			put(b, scale())
			for j := 2; j < 34; j++ {
				b[j] = byte(rng.IntN(255) - 127)
			}
			b[2+rng.IntN(32)] = []byte{0x7f, 0x81}[rng.IntN(2)]
		case 3: // Q4_1 with codes 0 and 15
			typ, b = Q4_1, make([]byte, 20)
			put(b, scale())
			put(b[2:], F32ToF16(float32(-rng.IntN(8)))) // never -0: min would come back +0
			for j := 4; j < 20; j++ {
				b[j] = byte(rng.IntN(256))
			}
			b[4], b[5] = 0x00, 0xff
		case 4: // Q5_1 with codes 0 and 31
			typ, b = Q5_1, make([]byte, 24)
			put(b, scale())
			put(b[2:], F32ToF16(float32(rng.IntN(8))))
			for j := 4; j < 24; j++ {
				b[j] = byte(rng.IntN(256))
			}
			b[4] = b[4]&^3 | 2 // element 0's fifth bit clear, element 1's set
			b[8], b[9] = 0xf0, 0x0f
		}
		x := make([]float32, 32)
		if err := Dequantize(typ, b, x); err != nil {
			t.Fatal(err)
		}
		if got := mustQuantize(t, typ, x); !bytes.Equal(got, b) {
			t.Fatalf("%v: requantized % x\nfrom % x", typ, got, b)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	cases := []struct {
		typ  Type
		n    int
		dst  int
		want string
	}{
		{IQ2_XS, 256, 74, "unsupported"},
		{IQ3_S, 256, 110, "unsupported"},
		{Type(77), 1, 1, "unsupported"},
		{Q4_0, 32, 17, "take 18 bytes"},
		{Q8_0, 33, 34, "multiple"},
		{F16, 2, 5, "take 4 bytes"},
	}
	for _, c := range cases {
		err := Quantize(c.typ, make([]float32, c.n), make([]byte, c.dst))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Quantize(%v, %d, %d bytes) = %v, want error containing %q", c.typ, c.n, c.dst, err, c.want)
		}
	}
	for _, typ := range []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0} {
		if !QuantizedSupported(typ) {
			t.Errorf("QuantizedSupported(%v) = false", typ)
		}
	}
	// Non-finite input must not panic and must keep codes in their fields.
	x := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	x = append(x, make([]float32, 29)...)
	for typ := range roundTripBounds {
		n, _ := typ.RowBytes(32)
		if err := Quantize(typ, x, make([]byte, n)); err != nil {
			t.Errorf("%v: %v", typ, err)
		}
	}
}

func TestQuantizeQ8_0Panics(t *testing.T) {
	for _, c := range []struct{ n, dst int }{{31, 34}, {64, 67}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "QuantizeQ8_0") {
					t.Errorf("QuantizeQ8_0(%d values, %d bytes): recovered %v", c.n, c.dst, r)
				}
			}()
			QuantizeQ8_0(make([]float32, c.n), make([]byte, c.dst))
		}()
	}
}

// TestQuantizeParallel: inputs large enough for Quantize to encode in
// parts on several goroutines give the bytes of one encoder call.
func TestQuantizeParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 3*parallelMin+QK_K*7)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, typ := range []Type{Q4_0, Q4_K, Q6_K, IQ4_XS} {
		n := len(x) / typ.BlockSize() * typ.BlockBytes()
		got, want := make([]byte, n), make([]byte, n)
		if err := Quantize(typ, x, got); err != nil {
			t.Fatal(err)
		}
		quantizers[typ](x, want)
		if !bytes.Equal(got, want) {
			t.Errorf("%v: Quantize in parts differs from one encoder call", typ)
		}
	}
}
