package sample

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistory(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 5, 64} {
		s, err := New(Params{PenaltyLastN: n})
		if err != nil {
			t.Fatal(err)
		}
		var all []int32
		for i := range 300 {
			if i == 150 {
				s.Reset()
				all = nil
			}
			tok := int32(r.IntN(12) - 1) // includes -1: recorded, never penalized
			s.Accept(tok)
			all = append(all, tok)
			want := all[max(0, len(all)-n):]
			if got := s.Recent(); !slices.Equal(got, want) {
				t.Fatalf("n=%d after %d tokens: Recent() = %v, want %v", n, len(all), got, want)
			}
			counts := map[int32]int32{}
			for _, x := range want {
				counts[x]++
			}
			if len(counts) != len(s.hist.counts) {
				t.Fatalf("n=%d: counts %v, want %v", n, s.hist.counts, counts)
			}
			for k, v := range counts {
				if s.hist.counts[k] != v {
					t.Fatalf("n=%d: counts %v, want %v", n, s.hist.counts, counts)
				}
			}
		}
	}
}

func TestRecentIsACopy(t *testing.T) {
	s, _ := New(Params{PenaltyLastN: 4})
	s.Accept(7)
	s.Recent()[0] = 99
	if got := s.Recent(); got[0] != 7 {
		t.Errorf("changing Recent's result changed the history: %v", got)
	}
}
