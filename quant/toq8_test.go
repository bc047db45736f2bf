package quant

import (
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
