package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestResidualFixedPoint checks the host's side of the fixed-point
// residual stream: converting and back is within half a step (2^-31) of
// the value, rounding goes to even at ties, and sums of fixed-point values
// are exact whatever their order.
func TestResidualFixedPoint(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	f := randFloats(r, 1000, 100)
	f = append(f, 0, -0.0, 1, -1, 65535.99, -65535.99, 0x1p-31, 3*0x1p-31, -3*0x1p-31)
	q := residualFixed(f)
	back := residualF32(residualBytes(q))
	for i, v := range f {
		// The fixed value itself is within half a step; float32 rounding
		// of it then adds at most half a float32 ulp.
		d := math.Abs(float64(q[i])/(1<<resFrac) - float64(v))
		if d > 0x1p-31 {
			t.Errorf("%v: fixed point %d is %g off", v, q[i], d)
		}
		ulp := float64(math.Nextafter32(float32(math.Abs(float64(v))), float32(math.Inf(1)))) - math.Abs(float64(v))
		if e := math.Abs(float64(back[i]) - float64(v)); e > 0x1p-31+ulp/2 {
			t.Errorf("%v: back as %v, %g off", v, back[i], e)
		}
	}
	// Ties: 2^-31 is half a step and rounds to 0 (even); 3·2^-31 to 2 steps.
	n := len(f)
	if q[n-3] != 0 || q[n-2] != 2 || q[n-1] != -2 {
		t.Errorf("ties rounded to %d, %d, %d; want 0, 2, -2", q[n-3], q[n-2], q[n-1])
	}
	var fwd, rev int64
	for i := range q {
		fwd += q[i]
		rev += q[len(q)-1-i]
	}
	if fwd != rev {
		t.Errorf("sums differ by order: %d, %d", fwd, rev)
	}
}
