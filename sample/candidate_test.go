package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// refOrder returns the ids of the non-NaN logits in candidate order, by a
// full sort.
func refOrder(l []float32) []int32 {
	var ids []int32
	for i, v := range l {
		if !math.IsNaN(float64(v)) {
			ids = append(ids, int32(i))
		}
	}
	sort.Slice(ids, func(a, b int) bool {
		la, lb := l[ids[a]], l[ids[b]]
		if la != lb {
			return la > lb
		}
		return ids[a] < ids[b]
	})
	return ids
}

func TestAppendTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var buf []candidate
	for range 3000 {
		n := 1 + r.IntN(300)
		l := randomLogits(r, n, r.IntN(2) == 0)
		if r.IntN(4) == 0 { // sorted input: every logit enters the heap
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		}
		k := 1 + r.IntN(n+3)
		buf = appendTopK(buf, l, k)
		want := refOrder(l)
		want = want[:min(k, len(want))]
		if len(buf) != len(want) {
			t.Fatalf("k=%d of %d: got %d candidates, want %d", k, n, len(buf), len(want))
		}
		for i, c := range buf {
			if c.id != want[i] || math.Float32bits(c.logit) != math.Float32bits(l[c.id]) {
				t.Fatalf("k=%d of %d: candidate %d is %+v, want id %d (logits %v)", k, n, i, c, want[i], l)
			}
		}
	}
}

func TestMinP(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 1000 {
		l := randomLogits(r, 1+r.IntN(100), r.IntN(4) == 0)
		m := l[Argmax(l)]
		minP := float32(r.Float64())
		all := appendTopK(nil, l, len(l))
		counted := all[:countMinP(all, m, minP)]
		collected := appendSorted(nil, l, m, math.Log(float64(minP)))
		for _, kept := range [][]candidate{counted, collected} {
			in := map[int32]bool{}
			for _, x := range kept {
				in[x.id] = true
			}
			for i, v := range l {
				// p_i / p_max against min-p, away from the boundary.
				ratio := math.Exp(float64(v) - float64(m))
				if v == m {
					ratio = 1
				}
				if ratio > float64(minP)*(1+1e-9) && !in[int32(i)] {
					t.Fatalf("min-p %v dropped token %d with p/p_max %v", minP, i, ratio)
				}
				if (math.IsNaN(ratio) || ratio < float64(minP)*(1-1e-9)) && in[int32(i)] {
					t.Fatalf("min-p %v kept token %d with p/p_max %v", minP, i, ratio)
				}
			}
		}
		if !slices.Equal(counted, collected) {
			t.Fatalf("min-p %v: countMinP kept %v, appendSorted %v", minP, counted, collected)
		}
	}
}

func TestTopPFloor(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for range 1000 {
		l := randomLogits(r, 1+r.IntN(500), r.IntN(4) == 0)
		for i := range l {
			l[i] *= float32(1 + 4*r.Float64()) // spread shifts over many buckets
		}
		first := Argmax(l)
		if first < 0 {
			continue
		}
		m := l[first]
		top := float32(r.Float64())
		z, floor := topPFloor(l, m, top)
		massFrom := func(f float64) (mass float64) {
			for _, x := range appendSorted(nil, l, m, f) {
				mass += refWeights(l, []int32{int32(first), x.id}, 1)[1]
			}
			return mass
		}
		if all := massFrom(math.Inf(-1)); math.Abs(all-z) > 1e-9*z {
			t.Fatalf("z = %v, want %v", z, all)
		}
		if math.IsInf(floor, -1) {
			if massFrom(-64) >= float64(top)*z*(1+1e-6) {
				t.Fatalf("top %v: floor -Inf, but shifts >= -64 hold enough", top)
			}
			continue
		}
		if got := massFrom(floor); got < float64(top)*z {
			t.Fatalf("top %v: shifts >= %v hold %v of %v", top, floor, got, z)
		}
		if floor < -1 && massFrom(floor+1) >= float64(top)*z*(1+1e-6) {
			t.Fatalf("top %v: floor %v is lower than needed", top, floor)
		}
	}
}
