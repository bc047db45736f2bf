package cpu

import (
	"math"
	"testing"
)

// geluTanhGLU against the formula in float64.
func TestGeluTanhGLU(t *testing.T) {
	n := 1000
	g, u, dst := make([]float32, n), make([]float32, n), make([]float32, n)
	want := make([]float64, n)
	for i := range g {
		g[i] = float32(i-n/2) / 50 // -10 … 10, 0 included
		u[i] = 1 + float32(i%7)/3
		x := float64(g[i])
		want[i] = 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * float64(u[i])
	}
	geluTanhGLU(dst, g, u)
	for i := range dst {
		if d := math.Abs(float64(dst[i]) - want[i]); d > 1e-6*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("x = %g: got %g, want %g", float64(i-n/2)/50, dst[i], want[i])
		}
	}
}

// softcap against c·tanh(x/c) in float64, out to where tanh saturates.
func TestSoftcap(t *testing.T) {
	for _, c := range []float32{1.5, 30, 50} {
		x := make([]float32, 2001)
		for i := range x {
			x[i] = float32(i-1000) * c / 50 // −20c … 20c
		}
		want := make([]float64, len(x))
		for i, v := range x {
			want[i] = float64(c) * math.Tanh(float64(v)/float64(c))
		}
		softcap(x, c)
		for i, v := range x {
			if d := math.Abs(float64(v) - want[i]); d > 1e-6*float64(c) {
				t.Fatalf("c = %g, x = %g: got %g, want %g", c, float64(i-1000)*float64(c)/50, v, want[i])
			}
		}
	}
}
