package quant

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// halfValue decodes binary16 bits from the IEEE definition, independently of
// F16ToF32's bit manipulation.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	man := float64(h & 0x3ff)
	switch {
	case exp == 0x1f && man == 0:
		return math.Inf(int(sign))
	case exp == 0x1f:
		return math.NaN()
	case exp == 0:
		return sign * man * math.Ldexp(1, -24)
	}
	return sign * (1 + man/1024) * math.Ldexp(1, exp-15)
}

func TestF16ToF32AllValues(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got, want := F16ToF32(h), halfValue(h)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != (h&0x8000 != 0) {
			t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, got, want)
		}
		if back := F32ToF16(got); back != h {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

// nearestHalf rounds f to binary16 by searching the ordered table of all
// non-negative halves for the two neighbours of |f| (ties to the even bit
// pattern), the definition F32ToF16 must meet.
func nearestHalf(f float32, table []float64) uint16 {
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	a := math.Abs(float64(f))
	// table[i] is the value of bits i for i < 0x7c00, and table[0x7c00] is
	// 65536: the value Inf stands in for when rounding.
	i := sort.SearchFloat64s(table, a) // first index with table[i] >= a
	if i < len(table) && table[i] == a {
		return sign | uint16(i)
	}
	if i >= len(table) {
		return sign | 0x7c00
	}
	lo, hi := table[i-1], table[i]
	switch {
	case a-lo < hi-a:
		return sign | uint16(i-1)
	case a-lo > hi-a:
		return sign | uint16(i)
	case (i-1)%2 == 0:
		return sign | uint16(i-1)
	}
	return sign | uint16(i)
}

func TestF32ToF16Rounding(t *testing.T) {
	table := make([]float64, 0x7c01)
	for i := range 0x7c00 {
		table[i] = halfValue(uint16(i))
	}
	table[0x7c00] = 65536
	check := func(f float32) {
		t.Helper()
		if got, want := F32ToF16(f), nearestHalf(f, table); got != want {
			t.Fatalf("F32ToF16(%v = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	edges := []float32{
		0, float32(math.Copysign(0, -1)), 1, -2, 65504, 65519.996, 65520, 65536, 1e10,
		float32(math.Inf(1)), float32(math.Inf(-1)),
		1 + 1.0/2048, 1 + 3.0/2048, 1 + 1.0/2048 + 1.0/(1<<20), // ties and just past a tie
		0x1p-24, 0x1p-25, 0x3p-25, 0x1p-25 + 0x1p-40, 0x1p-26, 0x1.ff8p-15, 0x1.ffcp-15, 0x1.ffep-15,
		math.SmallestNonzeroFloat32, math.MaxFloat32,
	}
	for _, f := range edges {
		check(f)
		check(-f)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		// Random bit patterns cover every exponent; scaled normals cover
		// the half range densely.
		if f := math.Float32frombits(rng.Uint32()); !math.IsNaN(float64(f)) {
			check(f)
		}
		check(float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-28)))
	}
}

func TestF32ToF16NaN(t *testing.T) {
	for _, bits := range []uint32{0x7fc00000, 0x7f800001, 0xffc00000, 0x7fffffff} {
		got := F32ToF16(math.Float32frombits(bits))
		want := uint16(bits>>16)&0x8000 | 0x7e00
		if got != want {
			t.Errorf("F32ToF16(%#08x) = %#04x, want %#04x", bits, got, want)
		}
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		bits uint32 // float32 input
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0xc0400000, 0xc040}, // -3
		{0x40490fdb, 0x4049}, // pi: lower half 0x0fdb rounds down
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // just past a tie
		{0x7f7fffff, 0x7f80}, // MaxFloat32 rounds to Inf
		{0x00000001, 0x0000}, // subnormals are rounded, not flushed
		{0x00018000, 0x0002},
		{0x7fc00001, 0x7fc0}, // quiet NaN
		{0x7f800001, 0x7fc0}, // signaling NaN is quieted
		{0xff812345, 0xffc1},
		{0x7f800000, 0x7f80}, // Inf
	}
	for _, c := range cases {
		if got := F32ToBF16(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", c.bits, got, c.want)
		}
	}
	for i := 0; i < 1<<16; i++ {
		f := BF16ToF32(uint16(i))
		if math.Float32bits(f) != uint32(i)<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %#08x", i, math.Float32bits(f))
		}
		if !math.IsNaN(float64(f)) && F32ToBF16(f) != uint16(i) {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x", i, F32ToBF16(f))
		}
	}
	// Random finite floats: the result is the nearer of the two bfloat16
	// neighbours, ties to even.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		u := rng.Uint32()
		if u&0x7fffffff >= 0x7f800000 {
			continue
		}
		f := math.Float32frombits(u)
		lo := uint16(u >> 16)
		hi := lo + 1
		dlo := math.Abs(float64(f) - float64(BF16ToF32(lo)))
		dhi := math.Abs(float64(BF16ToF32(hi)) - float64(f))
		if hi&0x7fff == 0x7f80 {
			dhi = math.Abs(math.Ldexp(float64(math.Copysign(1, float64(f))), 128) - float64(f))
		}
		want := lo
		if dhi < dlo || dhi == dlo && lo&1 == 1 {
			want = hi
		}
		if got := F32ToBF16(f); got != want {
			t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", u, got, want)
		}
	}
}
