package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ5_0ToQ8_0 checks that the re-encoded blocks hold the same values,
// bit for bit, and that a destination of the wrong size is refused.
func TestQ5_0ToQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(80, 80))
	x := make([]float32, 32*9)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	src := make([]byte, 9*q5_0Bytes)
	if err := Quantize(Q5_0, x, src); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 9*q8_0Bytes)
	if err := Q5_0ToQ8_0(src, dst); err != nil {
		t.Fatal(err)
	}
	want, got := make([]float32, len(x)), make([]float32, len(x))
	Dequantize(Q5_0, src, want)
	Dequantize(Q8_0, dst, got)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d = %v, want %v", i, got[i], want[i])
		}
	}
	if err := Q5_0ToQ8_0(make([]byte, 22), make([]byte, 33)); err == nil {
		t.Error("a short destination was accepted")
	}
}

// TestMinToQ8_0 checks that each re-encoded block plus its min holds the
// block's values, that a dot product through the split equals the
// type's own within float rounding, and that wrong sizes are refused.
func TestMinToQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 81))
	const rows, nb = 3, 5
	for _, typ := range []Type{Q4_1, Q5_1} {
		x := make([]float32, 32*rows*nb)
		for i := range x {
			x[i] = float32(r.NormFloat64()) + 0.5
		}
		src := make([]byte, rows*nb*typ.BlockBytes())
		if err := Quantize(typ, x, src); err != nil {
			t.Fatal(err)
		}
		dst, mins := make([]byte, rows*nb*q8_0Bytes), make([]float32, rows*nb)
		if err := MinToQ8_0(typ, src, rows, dst, mins); err != nil {
			t.Fatal(err)
		}
		want, codes := make([]float32, len(x)), make([]float32, len(x))
		Dequantize(typ, src, want)
		Dequantize(Q8_0, dst, codes)
		for i := range want {
			row, blk := i/(32*nb), i/32%nb
			if got := codes[i] + mins[blk*rows+row]; got != want[i] {
				t.Fatalf("%s: element %d = %v + %v, want %v", typ, i, codes[i], mins[blk*rows+row], want[i])
			}
		}
		// A row's dot product with activations: the Q8_0 part plus Σ m·s.
		act := make([]float32, 32*nb)
		for i := range act {
			act[i] = float32(r.NormFloat64())
		}
		xq := make([]byte, nb*q8_0Bytes)
		if err := Quantize(Q8_0, act, xq); err != nil {
			t.Fatal(err)
		}
		sums := make([]float32, nb)
		Q8_0BlockSums(xq, sums)
		rb := nb * typ.BlockBytes()
		for row := 0; row < rows; row++ {
			got := DotQ8_0Q8_0(dst[row*nb*q8_0Bytes:(row+1)*nb*q8_0Bytes], xq, nb)
			for b := 0; b < nb; b++ {
				got += mins[b*rows+row] * sums[b]
			}
			var ref float32
			if typ == Q4_1 {
				ref = DotQ4_1Q8_0(src[row*rb:(row+1)*rb], xq, nb)
			} else {
				ref = DotQ5_1Q8_0(src[row*rb:(row+1)*rb], xq, nb)
			}
			if d := math.Abs(float64(got - ref)); d > 1e-4*(1+math.Abs(float64(ref))) {
				t.Errorf("%s row %d: split dot %v, want %v", typ, row, got, ref)
			}
		}
	}
	if err := MinToQ8_0(Q5_0, make([]byte, 22), 1, make([]byte, 34), make([]float32, 1)); err == nil {
		t.Error("Q5_0 was accepted")
	}
	if err := MinToQ8_0(Q4_1, make([]byte, 40), 1, make([]byte, 34), make([]float32, 2)); err == nil {
		t.Error("a short destination was accepted")
	}
	if err := MinToQ8_0(Q4_1, make([]byte, 40), 3, make([]byte, 68), make([]float32, 2)); err == nil {
		t.Error("blocks that do not split into the rows were accepted")
	}
}

// TestSpreadBits checks every byte: bit i lands in bit 0 of byte i.
func TestSpreadBits(t *testing.T) {
	for b := 0; b < 256; b++ {
		got := spreadBits(byte(b))
		for i := 0; i < 8; i++ {
			if want := uint64(b>>i&1) << (8 * i); got&(0xFF<<(8*i)) != want {
				t.Fatalf("spreadBits(%#x) = %#x: byte %d wrong", b, got, i)
			}
		}
	}
}
