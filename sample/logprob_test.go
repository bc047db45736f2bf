package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestLogSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for range 500 {
		l := randomLogits(r, 1+r.IntN(300), r.IntN(3) == 0)
		s := NewLogSoftmax(l)
		// Reference: float64 softmax over the non-NaN logits, with +Inf
		// logits sharing the mass.
		m := math.Inf(-1)
		for _, x := range l {
			if x == x {
				m = math.Max(m, float64(x))
			}
		}
		z := 0.0
		for _, x := range l {
			if x == x {
				z += math.Exp(refShift(float64(x), m))
			}
		}
		sum := 0.0
		for _, x := range l {
			if x != x {
				continue
			}
			want := refShift(float64(x), m) - math.Log(z)
			got := float64(s.Logprob(x))
			if math.IsInf(want, -1) != math.IsInf(got, -1) || !math.IsInf(want, -1) && math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("logprob of %v = %v, want %v (logits %v)", x, got, want, l)
			}
			if got > 0 {
				t.Fatalf("logprob %v > 0", got)
			}
			sum += math.Exp(got)
		}
		if z > 0 && math.Abs(sum-1) > 1e-4 {
			t.Fatalf("probabilities sum to %v", sum)
		}
	}
	if s := NewLogSoftmax([]float32{float32(math.NaN())}); !math.IsNaN(float64(s.Logprob(0))) {
		t.Error("all-NaN logits give a number")
	}
}

func refShift(x, m float64) float64 {
	if x == m {
		return 0
	}
	return x - m
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for range 500 {
		l := randomLogits(r, 1+r.IntN(100), r.IntN(2) == 0)
		k := r.IntN(25)
		got := TopK(l, k)
		want := refOrder(l)
		want = want[:min(k, len(want))]
		if len(got) != len(want) {
			t.Fatalf("TopK(%d) gave %d ids, want %d", k, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("TopK(%d) = %v, want %v", k, got, want)
			}
		}
	}
}
