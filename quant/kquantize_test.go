package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// kRoundTripBounds is the largest relative RMS error each K encoder may
// leave on Gaussian data: 1% over what this seed measures, below what the
// plain range encoders before the search left (in brackets). On
// test-256's weights llama-quantize leaves 0.2964, 0.1509, 0.0713, 0.0361
// and 0.0177 (Q2_K…Q6_K), these encoders 0.2817, 0.1509, 0.0712, 0.0358
// and 0.0177.
var kRoundTripBounds = map[Type]float64{
	Q2_K: 0.2850, // measured 0.2822 (0.328)
	Q3_K: 0.1525, // measured 0.1507 (0.154)
	Q4_K: 0.0718, // measured 0.0710 (0.078)
	Q5_K: 0.0363, // measured 0.0359 (0.038)
	Q6_K: 0.0180, // measured 0.0178 (0.0194)
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
		t.Logf("%v: relative RMS error %.4g (bound %.4g)", typ, rel, bound)
		if !(rel <= bound) {
			t.Errorf("%v: relative RMS error %.3g exceeds %.3g", typ, rel, bound)
		}
		// Non-finite input must not panic.
		bad := append([]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}, make([]float32, QK_K-3)...)
		mustQuantize(t, typ, bad)
	}
}

// BenchmarkKQuantize encodes 64 Gaussian super-blocks' worth of rows a
// type: the scale search is most of gotok quantize's time for K-quants.
func BenchmarkKQuantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, QK_K*64)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, typ := range []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		dst := make([]byte, len(x)/QK_K*typ.BlockBytes())
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				quantizers[typ](x, dst)
			}
		})
	}
}
