package quant

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// Each test builds blocks byte by byte and states the floats they decode to,
// worked out by hand from ggml's layouts. Legacy formats use two blocks and
// the K-quants put their block after an all-zero one, so block strides are
// checked too. fp16 constants: 0x3c00 = 1, 0x3800 = 0.5, 0x3400 = 0.25,
// 0x3000 = 0.125, 0xbc00 = -1, 0xc000 = -2, 0x4000 = 2.

func checkDequant(t *testing.T, typ Type, src []byte, want []float32) {
	t.Helper()
	got := make([]float32, len(want))
	for i := range got {
		got[i] = float32(math.NaN()) // poison
	}
	if err := Dequantize(typ, src, got); err != nil {
		t.Fatalf("Dequantize(%v): %v", typ, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%v element %d = %v, want %v", typ, i, got[i], want[i])
		}
	}
}

// nibblePattern is 16 bytes with low nibble j and high nibble 15-j.
var nibblePattern = []byte{0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func rep(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func TestDequantizeFloats(t *testing.T) {
	checkDequant(t, F32, []byte{0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x80, 0x7f},
		[]float32{1.5, -2, float32(math.Inf(1))})
	checkDequant(t, F16, []byte{0x00, 0x3c, 0x00, 0xc0, 0x55, 0x35, 0x01, 0x00, 0xff, 0x7b, 0x00, 0xfc},
		[]float32{1, -2, 0.333251953125, 0x1p-24, 65504, float32(math.Inf(-1))})
	checkDequant(t, BF16, []byte{0x80, 0x3f, 0x40, 0xc0, 0x49, 0x40},
		[]float32{1, -3, 3.140625})
}

func TestDequantizeQ4_0(t *testing.T) {
	src := cat(
		[]byte{0x00, 0x38}, nibblePattern, // d = 0.5, codes j and 15-j
		[]byte{0x00, 0xc0}, rep(0x8f, 16), // d = -2, low codes 15, high codes 8
	)
	want := []float32{
		// (j-8)·0.5
		-4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5,
		// (15-j-8)·0.5
		3.5, 3, 2.5, 2, 1.5, 1, 0.5, 0, -0.5, -1, -1.5, -2, -2.5, -3, -3.5, -4,
		// (15-8)·-2, then (8-8)·-2
		-14, -14, -14, -14, -14, -14, -14, -14, -14, -14, -14, -14, -14, -14, -14, -14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	checkDequant(t, Q4_0, src, want)
}

func TestDequantizeQ4_1(t *testing.T) {
	src := cat(
		[]byte{0x00, 0x34, 0x00, 0xbc}, nibblePattern, // d = 0.25, m = -1
		[]byte{0x00, 0x3c, 0x00, 0x40}, rep(0x21, 16), // d = 1, m = 2, codes 1 and 2
	)
	want := []float32{
		// j·0.25 - 1
		-1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75,
		// (15-j)·0.25 - 1
		2.75, 2.5, 2.25, 2, 1.75, 1.5, 1.25, 1, 0.75, 0.5, 0.25, 0, -0.25, -0.5, -0.75, -1,
		3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
		4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
	}
	checkDequant(t, Q4_1, src, want)
}

func TestDequantizeQ5_0(t *testing.T) {
	// qh = 0x80018001: fifth bits of elements 0, 15, 16 and 31.
	src := cat(
		[]byte{0x00, 0x3c, 0x01, 0x80, 0x01, 0x80}, nibblePattern, // d = 1
		[]byte{0x00, 0x38, 0xff, 0xff, 0xff, 0xff}, rep(0xff, 16), // d = 0.5, all codes 31
	)
	want := []float32{
		// (j | fifth bit) - 16
		0, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, 15,
		15, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -14, -15, 0,
		// (31-16)·0.5
		7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5,
		7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5,
	}
	checkDequant(t, Q5_0, src, want)
}

func TestDequantizeQ5_1(t *testing.T) {
	src := cat(
		[]byte{0x00, 0x38, 0x00, 0x40, 0x01, 0x80, 0x01, 0x80}, nibblePattern, // d = 0.5, m = 2
		[]byte{0x00, 0x3c, 0x00, 0xbc, 0x00, 0x00, 0x00, 0x00}, rep(0x00, 16), // d = 1, m = -1, codes 0
	)
	want := []float32{
		// code·0.5 + 2; codes 16, 1..14, 31 then 31, 14..1, 16
		10, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5, 8, 8.5, 9, 17.5,
		17.5, 9, 8.5, 8, 7.5, 7, 6.5, 6, 5.5, 5, 4.5, 4, 3.5, 3, 2.5, 10,
		-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
		-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	}
	checkDequant(t, Q5_1, src, want)
}

func TestDequantizeQ8_0(t *testing.T) {
	qs := make([]byte, 32)
	for j := range qs {
		qs[j] = byte(8*j - 128) // int8 8j-128: -128, -120, ..., 120
	}
	src := cat(
		[]byte{0x00, 0x30}, qs, // d = 0.125, so element j is j-16
		[]byte{0x00, 0xc0}, rep(0x7f, 32), // d = -2, codes 127
	)
	want := make([]float32, 64)
	for j := 0; j < 32; j++ {
		want[j] = float32(j - 16)
		want[32+j] = -254
	}
	checkDequant(t, Q8_0, src, want)
}

func TestDequantizeQ8_K(t *testing.T) {
	qs := make([]byte, 256)
	for j := range qs {
		qs[j] = byte(j) // int8: 0..127, then -128..-1
	}
	src := cat([]byte{0x00, 0x00, 0x00, 0x3f}, qs, rep(0xaa, 32)) // d = 0.5 (float32); bsums ignored
	want := make([]float32, 256)
	for j := range want {
		want[j] = float32(int8(j)) * 0.5
	}
	want[1], want[128], want[255] = 0.5, -64, -0.5 // spelled out
	checkDequant(t, Q8_K, src, want)
}

// superBlock returns a zero super-block followed by b, and the expected
// values: 256 zeros then want.
func superBlock(b []byte, want []float32) ([]byte, []float32) {
	return cat(make([]byte, len(b)), b), append(make([]float32, 256), want...)
}

func TestDequantizeQ2_K(t *testing.T) {
	// scales[i]: scale i (low nibble), min 15-i (high nibble).
	scales := make([]byte, 16)
	for i := range scales {
		scales[i] = byte(i) | byte(15-i)<<4
	}
	// Every code byte 0b11_10_01_00: element e's code is (e%128)/32 ...
	qs := rep(0xe4, 64)
	// ... except bytes 5 and 51, 0b00_01_10_11: codes 3, 2, 1, 0.
	qs[5], qs[51] = 0x1b, 0x1b
	b := cat(scales, qs, []byte{0x00, 0x3c, 0x00, 0x38}) // d = 1, dmin = 0.5
	want := make([]float32, 256)
	for e := range want {
		i, j := e/16, (e%128)/32
		want[e] = float32(i*j) - 0.5*float32(15-i)
	}
	// qs[5] holds elements 5, 37, 69, 101; qs[51] = qs[32+19] holds 147,
	// 179, 211, 243. value = i·code - 0.5·(15-i) with i = e/16:
	want[5] = 0*3 - 7.5
	want[37] = 2*2 - 6.5
	want[69] = 4*1 - 5.5
	want[101] = 6*0 - 4.5
	want[147] = 9*3 - 3
	want[179] = 11*2 - 2
	want[211] = 13*1 - 1
	want[243] = 15*0 - 0
	// Spot checks of the pattern: e=36 (i=2, code 1), e=200 (i=12, code 2).
	if want[36] != -4.5 || want[200] != 22.5 || want[255] != 45 {
		t.Fatal("pattern formula disagrees with the hand values")
	}
	src, all := superBlock(b, want)
	checkDequant(t, Q2_K, src, all)
}

func TestDequantizeQ3_K(t *testing.T) {
	// hmask: bytes 0-15 have bits 0-3 set (high bits of the first 128
	// elements' first 16 of each 32), bytes 16-31 bits 4-7. Byte 7 lacks
	// bit 2, which clears the high bit of element 64+7 = 71.
	hmask := cat(rep(0x0f, 16), rep(0xf0, 16))
	hmask[7] = 0x0b
	qs := rep(0xe4, 64) // low bits (e%128)/32 ...
	qs[53] = 0x1b       // ... except byte 32+21: elements 149, 181, 213, 245 get 3, 2, 1, 0
	// Scales (6-bit, stored +32). Low nibbles from bytes 0-7, top bits from
	// bytes 8-11; worked out, scale−32 for sub-blocks 0..15 is
	// -31 19 -27 23 -7 11 -19 31 2 -12 -26 24 26 -20 -18 16.
	scales := []byte{0x21, 0x43, 0x65, 0x87, 0xa9, 0xcb, 0xed, 0x0f, 0xe4, 0x1b, 0x00, 0xff}
	sc := []float32{-31, 19, -27, 23, -7, 11, -19, 31, 2, -12, -26, 24, 26, -20, -18, 16}
	b := cat(hmask, qs, scales, []byte{0x00, 0x38}) // d = 0.5
	want := make([]float32, 256)
	for e := range want {
		h, j, sub := e/128, (e%128)/32, (e%32)/16
		q := float32(j)
		if sub != h { // high bit clear: code is 4 lower
			q -= 4
		}
		want[e] = 0.5 * sc[e/16] * q
	}
	want[71] = 0.5 * -7 * (2 - 4)
	want[149] = 0.5 * -12 * 3
	want[181] = 0.5 * 24 * 2
	want[213] = 0.5 * -20 * 1
	want[245] = 0.5 * 16 * 0
	// Spot checks: e=20 (sub-block 1, high bit clear), e=127, e=180.
	if want[20] != -38 || want[127] != -15.5 || want[180] != 12 || want[71] != 7 {
		t.Fatal("pattern formula disagrees with the hand values")
	}
	src, all := superBlock(b, want)
	checkDequant(t, Q3_K, src, all)
}

// q4KTestScales packs scales 1 2 3 4 17 35 5 55 and mins 5 6 7 8 2 20 38 56
// (sub-blocks 4-7 take their top two bits from the top bits of bytes 0-7).
var (
	q4KTestScales = []byte{0x41, 0x82, 0x03, 0xc4, 0x05, 0x46, 0x87, 0xc8, 0x21, 0x43, 0x65, 0x87}
	q4KScale      = []float32{1, 2, 3, 4, 17, 35, 5, 55}
	q4KMin        = []float32{5, 6, 7, 8, 2, 20, 38, 56}
)

// q4KTestCodes is 128 bytes with low nibble k%16 and high nibble 15-k%16,
// and q4KWant the Q4_K values they give with d = 0.5, dmin = 0.25.
func q4KTestCodes() []byte {
	qs := make([]byte, 128)
	for k := range qs {
		qs[k] = byte(k%16) | byte(15-k%16)<<4
	}
	return qs
}

func q4KWant() []float32 {
	want := make([]float32, 256)
	for e := range want {
		r, l := e%64, e%32
		q := float32(l % 16)
		if r >= 32 {
			q = float32(15 - l%16)
		}
		want[e] = 0.5*q4KScale[e/32]*q - 0.25*q4KMin[e/32]
	}
	return want
}

func TestDequantizeQ4_K(t *testing.T) {
	b := cat([]byte{0x00, 0x38, 0x00, 0x34}, q4KTestScales, q4KTestCodes())
	want := q4KWant()
	spot := map[int]float32{0: -1.25, 5: 1.25, 40: 5.5, 81: -0.25, 127: -2, 131: 25, 170: 82.5, 223: 28, 225: 371, 255: -14}
	for e, v := range spot {
		if want[e] != v {
			t.Fatalf("pattern formula gives %v at %d, hand value %v", want[e], e, v)
		}
	}
	src, all := superBlock(b, want)
	checkDequant(t, Q4_K, src, all)
}

func TestDequantizeQ5_K(t *testing.T) {
	// Fifth bits: qh[l] bit s belongs to element 32s+l.
	qh := make([]byte, 32)
	qh[1] = 0x80  // element 225
	qh[3] = 0x10  // element 131
	qh[31] = 0x01 // element 31
	qh[8] = 0x02  // element 40
	b := cat([]byte{0x00, 0x38, 0x00, 0x34}, q4KTestScales, qh, q4KTestCodes())
	want := q4KWant()
	want[225] = 0.5*55*(14+16) - 14
	want[131] = 0.5*17*(3+16) - 0.5
	want[31] = 0.5*1*(15+16) - 1.25
	want[40] = 0.5*2*(7+16) - 1.5
	if want[225] != 811 || want[131] != 161 || want[31] != 14.25 || want[40] != 21.5 || want[97] != 26 {
		t.Fatal("hand values disagree")
	}
	src, all := superBlock(b, want)
	checkDequant(t, Q5_K, src, all)
}

func TestDequantizeQ6_K(t *testing.T) {
	ql := rep(0x21, 128) // low nibble 1, high nibble 2
	qh := rep(0xe4, 64)  // top bits 0, 1, 2, 3 for quarters t = 0..3
	ql[101] = 0xf0       // ql[64+32+5]: elements 165 (low nibble 0) and 229 (high nibble 15)
	qh[39] = 0x1b        // qh[32+7]: elements 135, 167, 199, 231 get top bits 3, 2, 1, 0
	// scales 1, -2, 3, -4, ..., 15, -16 as int8
	scales := []byte{0x01, 0xfe, 0x03, 0xfc, 0x05, 0xfa, 0x07, 0xf8, 0x09, 0xf6, 0x0b, 0xf4, 0x0d, 0xf2, 0x0f, 0xf0}
	b := cat(ql, qh, scales, []byte{0x00, 0x34}) // d = 0.25
	// With the pattern bytes, quarter t's code−32 is -31, -15, 2, 18.
	qq := []float32{1 - 32, 1 + 16 - 32, 2 + 32 - 32, 2 + 48 - 32}
	want := make([]float32, 256)
	for e := range want {
		i := e / 16
		sc := float32(i + 1)
		if i%2 == 1 {
			sc = -sc
		}
		want[e] = 0.25 * sc * qq[(e%128)/32]
	}
	want[165] = 0.25 * 11 * (0 + 16 - 32)
	want[229] = 0.25 * 15 * (15 + 48 - 32)
	want[135] = 0.25 * 9 * (1 + 48 - 32)
	want[167] = 0.25 * 11 * (1 + 32 - 32)
	want[199] = 0.25 * 13 * (2 + 16 - 32)
	want[231] = 0.25 * 15 * (2 - 32)
	if want[0] != -7.75 || want[20] != 15.5 || want[127] != -36 || want[165] != -44 || want[229] != 116.25 || want[199] != -45.5 {
		t.Fatal("hand values disagree")
	}
	src, all := superBlock(b, want)
	checkDequant(t, Q6_K, src, all)
}

func TestDequantizeErrors(t *testing.T) {
	dst := make([]float32, 32)
	cases := []struct {
		typ  Type
		src  []byte
		dst  []float32
		want string
	}{
		{IQ2_XXS, make([]byte, 66), make([]float32, 256), "unsupported"},
		{Type(99), nil, nil, "unsupported"},
		{Q4_0, make([]byte, 17), dst, "take 18 bytes"},
		{Q4_0, make([]byte, 19), dst, "take 18 bytes"},
		{Q4_0, make([]byte, 18), dst[:31], "multiple"},
		{Q4_K, make([]byte, 144), dst, "multiple"},
		{F16, make([]byte, 3), dst[:1], "take 2 bytes"},
	}
	for _, c := range cases {
		err := Dequantize(c.typ, c.src, c.dst)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Dequantize(%v, %d bytes, %d values) = %v, want error containing %q", c.typ, len(c.src), len(c.dst), err, c.want)
		}
	}
	for _, typ := range []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_K, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS} {
		if !DequantizeSupported(typ) {
			t.Errorf("DequantizeSupported(%v) = false", typ)
		}
	}
	if err := Dequantize(Q4_0, nil, nil); err != nil {
		t.Errorf("empty Dequantize: %v", err)
	}
}
