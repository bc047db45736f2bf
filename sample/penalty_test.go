package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refPenalized applies llama.cpp's penalties to a copy of l, straight from
// the list of all accepted tokens.
func refPenalized(l []float32, accepted []int32, p Params) []float32 {
	out := slices.Clone(l)
	repeat := p.RepeatPenalty != 0 && p.RepeatPenalty != 1
	if p.PenaltyLastN == 0 || (!repeat && p.FrequencyPenalty == 0 && p.PresencePenalty == 0) {
		return out
	}
	recent := accepted[max(0, len(accepted)-p.PenaltyLastN):]
	for tok := range out {
		count := 0
		for _, x := range recent {
			if int(x) == tok {
				count++
			}
		}
		if count == 0 {
			continue
		}
		v := out[tok]
		if repeat {
			if v > 0 {
				v = float32(v / p.RepeatPenalty)
			} else {
				v = float32(v * p.RepeatPenalty)
			}
		}
		sub := float32(float32(float32(count)*p.FrequencyPenalty) + p.PresencePenalty)
		out[tok] = float32(v - sub)
	}
	return out
}

func sameFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func randomPenalties(r *rand.Rand, p *Params) {
	switch r.IntN(4) {
	case 0:
		p.RepeatPenalty = 1
	case 1:
		p.RepeatPenalty = 0
	default:
		p.RepeatPenalty = float32(0.5 + r.Float64())
	}
	if r.IntN(2) == 0 {
		p.FrequencyPenalty = float32(r.Float64() - 0.3)
	}
	if r.IntN(2) == 0 {
		p.PresencePenalty = float32(r.Float64() - 0.3)
	}
	p.PenaltyLastN = r.IntN(20)
}

func TestPenalized(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		n := 1 + r.IntN(50)
		var p Params
		randomPenalties(r, &p)
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		accepted := make([]int32, r.IntN(40))
		for i := range accepted {
			accepted[i] = int32(r.IntN(n+4) - 2) // some out of the vocabulary
			s.Accept(accepted[i])
		}
		l := randomLogits(r, n, r.IntN(3) == 0)
		orig := slices.Clone(l)
		got := s.penalized(l)
		if want := refPenalized(l, accepted, p); !sameFloats(got, want) {
			t.Fatalf("params %+v, history %v:\nlogits    %v\npenalized %v\nwant      %v", p, accepted, l, got, want)
		}
		if !sameFloats(l, orig) {
			t.Fatal("penalized modified its input")
		}
	}
}

// A strong repeat penalty must steer greedy decoding away from the argmax
// once it has been emitted, and only then.
func TestRepeatPenaltySteersGreedy(t *testing.T) {
	l := []float32{1, 5, 4.5, -3}
	s, _ := New(Params{RepeatPenalty: 2, PenaltyLastN: 1})
	if got := s.Sample(l); got != 1 {
		t.Fatalf("first token %d, want 1", got)
	}
	s.Accept(1) // 5 -> 2.5
	if got := s.Sample(l); got != 2 {
		t.Fatalf("after accepting 1: token %d, want 2", got)
	}
	s.Accept(2) // history is now [2]: 1 is free again
	if got := s.Sample(l); got != 1 {
		t.Fatalf("after accepting 2: token %d, want 1", got)
	}
	// A negative logit is multiplied, so the penalty pushes it further down.
	neg := []float32{-1, -1.5}
	s, _ = New(Params{RepeatPenalty: 2, PenaltyLastN: 4})
	s.Accept(0) // -1 -> -2
	if got := s.Sample(neg); got != 1 {
		t.Fatalf("negative logits: token %d, want 1", got)
	}
}
