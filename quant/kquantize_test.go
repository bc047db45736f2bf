package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// kRoundTripBounds is the largest relative RMS error each K encoder may
// leave on Gaussian data, about 15% over what this seed measures. ggml's
// searching encoders do somewhat better.
var kRoundTripBounds = map[Type]float64{
	Q2_K: 3.8e-1, // measured 3.28e-1
	Q3_K: 1.8e-1, // measured 1.54e-1
	Q4_K: 9.0e-2, // measured 7.80e-2
	Q5_K: 4.4e-2, // measured 3.80e-2
	Q6_K: 2.2e-2, // measured 1.94e-2
}

func TestKQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, QK_K*64)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	// Edge blocks: all zero, one constant, one spike, all negative.
	clear(x[:QK_K])
	for i := QK_K; i < 2*QK_K; i++ {
		x[i] = 0.5
	}
	x[2*QK_K+7] = 100
	for i := 3 * QK_K; i < 4*QK_K; i++ {
		x[i] = -abs32(x[i])
	}
	for typ, bound := range kRoundTripBounds {
		q := mustQuantize(t, typ, x)
		y := make([]float32, len(x))
		if err := Dequantize(typ, q, y); err != nil {
			t.Fatal(err)
		}
		if y[0] != 0 || y[QK_K+3] < 0.45 || y[QK_K+3] > 0.55 || math.Abs(float64(y[2*QK_K+7])-100) > 2 {
			t.Errorf("%v: edge blocks decode to %g, %g, %g", typ, y[0], y[QK_K+3], y[2*QK_K+7])
		}
		var num, den float64
		for i := 4 * QK_K; i < len(x); i++ {
			d := float64(x[i]) - float64(y[i])
			num += d * d
			den += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(num / den)
		t.Logf("%v: relative RMS error %.3g (bound %.3g)", typ, rel, bound)
		if !(rel <= bound) {
			t.Errorf("%v: relative RMS error %.3g exceeds %.3g", typ, rel, bound)
		}
		// Non-finite input must not panic.
		bad := append([]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}, make([]float32, QK_K-3)...)
		mustQuantize(t, typ, bad)
	}
}
