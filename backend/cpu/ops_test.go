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
