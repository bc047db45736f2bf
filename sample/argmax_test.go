package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomLogits returns n logits with deliberate ties and, when special is
// set, NaN and infinities mixed in.
func randomLogits(r *rand.Rand, n int, special bool) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 3)
		if i > 0 && r.IntN(10) == 0 {
			l[i] = l[r.IntN(i)] // a tie
		}
		if special {
			switch r.IntN(20) {
			case 0, 1:
				l[i] = float32(math.NaN())
			case 2:
				l[i] = float32(math.Inf(-1))
			case 3:
				if r.IntN(4) == 0 {
					l[i] = float32(math.Inf(1))
				}
			}
		}
	}
	return l
}

func refArgmax(l []float32) int32 {
	best := int32(-1)
	for i, v := range l {
		if math.IsNaN(float64(v)) {
			continue
		}
		if best < 0 || v > l[best] {
			best = int32(i)
		}
	}
	return best
}

func TestArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		l := randomLogits(r, 1+r.IntN(200), r.IntN(2) == 0)
		got, want := Argmax(l), refArgmax(l)
		if got != want {
			t.Fatalf("Argmax(%v) = %d, want %d", l, got, want)
		}
		if got >= 0 && math.IsNaN(float64(l[got])) {
			t.Fatalf("Argmax chose NaN at %d", got)
		}
	}
}

func TestArgmaxEdges(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		l    []float32
		want int32
	}{
		{nil, -1},
		{[]float32{nan, nan}, -1},
		{[]float32{nan, -inf, -inf}, 1},
		{[]float32{nan, 1, 3, 3, nan}, 2},
		{[]float32{1, inf, nan, inf}, 1},
		{[]float32{-2, -1, -1}, 1},
	} {
		if got := Argmax(c.l); got != c.want {
			t.Errorf("Argmax(%v) = %d, want %d", c.l, got, c.want)
		}
	}
}
