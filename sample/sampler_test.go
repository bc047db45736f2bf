package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refWeights returns exp((l-m)/temp) for ids in candidate order, m being the
// first one's logit, with the documented meaning of infinite logits.
func refWeights(l []float32, ids []int32, temp float64) []float64 {
	m := l[ids[0]]
	w := make([]float64, len(ids))
	for i, id := range ids {
		switch v := l[id]; {
		case v == m:
			w[i] = 1
		case math.IsInf(float64(m), 1):
			w[i] = 0
		default:
			w[i] = math.Exp((float64(v) - float64(m)) / temp)
		}
	}
	return w
}

// refKept returns, in candidate order, the tokens of penalized logits l that
// survive top-k, top-p and min-p, by full sort and float64 softmax. slack > 0
// keeps the boundary cases, slack < 0 drops them, so a sampler that rounds
// differently from this reference must land between the two.
func refKept(l []float32, p Params, slack float64) []int32 {
	ids := refOrder(l)
	if p.TopK > 0 && p.TopK < len(l) {
		ids = ids[:min(p.TopK, len(ids))]
	}
	if len(ids) == 0 {
		return nil
	}
	if p.TopP > 0 && p.TopP < 1 {
		w := refWeights(l, ids, 1)
		z := 0.0
		for _, x := range w {
			z += x
		}
		cum := 0.0
		for i, x := range w {
			cum += x / z
			if cum >= float64(p.TopP)+slack {
				ids = ids[:i+1]
				break
			}
		}
	}
	if p.MinP > 0 {
		w := refWeights(l, ids, 1) // w[i] is p_i / p_max
		var kept []int32
		for i, id := range ids {
			if w[i] >= float64(p.MinP)*(1-slack) {
				kept = append(kept, id)
			}
		}
		ids = kept
	}
	return ids
}

// refDraw inverts the tempered CDF over ids at u. It reports the draw as
// ambiguous when u lands within rounding distance of a boundary.
func refDraw(l []float32, ids []int32, temp float64, u float32) (tok int32, ambiguous bool) {
	w := refWeights(l, ids, temp)
	z := 0.0
	for _, x := range w {
		z += x
	}
	x := float64(u) * z
	tok = -1
	cum := 0.0
	for i, wi := range w {
		cum += wi
		if math.Abs(x-cum) < 1e-9*z {
			ambiguous = true
		}
		if tok < 0 && x < cum {
			tok = ids[i]
		}
	}
	return tok, ambiguous
}

func randomParams(r *rand.Rand) Params {
	p := Params{Temperature: float32(0.05 + 2*r.Float64()), Seed: r.Uint64()}
	switch r.IntN(4) {
	case 0:
		p.TopK = 0
	case 1:
		p.TopK = 1 + r.IntN(5)
	default:
		p.TopK = 1 + r.IntN(500)
	}
	switch r.IntN(4) {
	case 0:
		p.TopP = 0
	case 1:
		p.TopP = 1
	default:
		p.TopP = float32(0.3 + 0.69*r.Float64())
	}
	if r.IntN(2) == 0 {
		p.MinP = float32(0.3 * r.Float64())
	}
	randomPenalties(r, &p)
	return p
}

func contains(ids []int32, tok int32) bool { return slices.Contains(ids, tok) }

// TestSampleMatchesReference runs the whole chain on random logits and
// parameters against the reference: the token must lie in the reference's
// kept set, and must be the reference's exact choice unless the draw sits on
// a rounding boundary.
func TestSampleMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	cases, compared := 0, 0
	for range 1500 {
		p := randomParams(r)
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + r.IntN(400)
		var accepted []int32
		for range r.IntN(30) {
			tok := int32(r.IntN(n))
			accepted = append(accepted, tok)
			s.Accept(tok)
		}
		special := r.IntN(4) == 0
		for step := range 4 {
			if step == 3 {
				n = 1 + r.IntN(400) // scratch buffers must follow a new size
			}
			l := randomLogits(r, n, special)
			pen := refPenalized(l, accepted, p)
			tight, loose := refKept(pen, p, -1e-9), refKept(pen, p, 1e-9)
			u := Uniform(p.Seed, s.Step())
			got := s.Sample(l)
			cases++
			if len(loose) == 0 {
				if got != -1 {
					t.Fatalf("params %+v: nothing to pick, got %d", p, got)
				}
				continue
			}
			if !contains(loose, got) {
				t.Fatalf("params %+v, n=%d: picked %d outside the kept set %v", p, n, got, loose)
			}
			if slices.Equal(tight, loose) {
				want, ambiguous := refDraw(pen, tight, float64(p.Temperature), u)
				if !ambiguous {
					compared++
					if got != want {
						t.Fatalf("params %+v, n=%d, u=%v: picked %d, reference %d (set %v)", p, n, u, got, want, tight)
					}
				}
			}
			accepted = append(accepted, got)
			s.Accept(got)
		}
	}
	if compared < cases*9/10 {
		t.Errorf("only %d of %d draws were compared exactly", compared, cases)
	}
}

// TestFiltersKeepTheirSets checks each filter alone against its own
// definition, at a high temperature so that the draws explore the set.
func TestFiltersKeepTheirSets(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const n = 300
	for _, c := range []struct {
		name string
		p    Params
		// in reports whether token i may be picked given probabilities sorted
		// descending (rank is i's position, probs are the full softmax).
		in func(rank int, sorted []float64) bool
	}{
		{"top-k", Params{TopK: 7}, func(rank int, _ []float64) bool { return rank < 7 }},
		{"top-p", Params{TopP: 0.6}, func(rank int, sorted []float64) bool {
			before := 0.0 // mass ahead of this token: it is kept iff that is below p
			for _, q := range sorted[:rank] {
				before += q
			}
			return before < 0.6+1e-9
		}},
		{"min-p", Params{MinP: 0.2}, func(rank int, sorted []float64) bool {
			return sorted[rank] >= 0.2*sorted[0]*(1-1e-9)
		}},
	} {
		seen := map[int32]bool{}
		for trial := range 40 {
			l := make([]float32, n)
			for i := range l {
				l[i] = float32(r.NormFloat64() * 1.5)
			}
			order := refOrder(l)
			rank := make([]int, n)
			for i, id := range order {
				rank[id] = i
			}
			w := refWeights(l, order, 1)
			z := 0.0
			for _, x := range w {
				z += x
			}
			for i := range w {
				w[i] /= z
			}
			p := c.p
			p.Temperature = 3
			p.Seed = uint64(trial)
			s, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			for range 200 {
				tok := s.Sample(l)
				if tok < 0 || tok >= n || !c.in(rank[tok], w) {
					t.Fatalf("%s: picked token %d of rank %d", c.name, tok, rank[max(tok, 0)])
				}
				seen[int32(rank[tok])] = true
			}
		}
		if len(seen) < 3 {
			t.Errorf("%s: only ranks %v were ever picked", c.name, seen)
		}
	}
}

func TestTinyTemperatureIsGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	compared := 0
	for range 500 {
		p := randomParams(r)
		p.Temperature = 1e-6
		g := p
		g.Temperature = 0
		s, _ := New(p)
		sg, _ := New(g)
		n := 2 + r.IntN(300)
		for range r.IntN(10) {
			tok := int32(r.IntN(n))
			s.Accept(tok)
			sg.Accept(tok)
		}
		l := randomLogits(r, n, false)
		pen := s.penalized(l)
		if order := refOrder(pen); pen[order[0]] == pen[order[1]] {
			continue // a tie at the top: sampling may pick either
		}
		compared++
		if got, want := s.Sample(l), sg.Sample(l); got != want {
			t.Fatalf("params %+v: temperature 1e-6 picked %d, greedy %d", p, got, want)
		}
	}
	if compared < 400 {
		t.Errorf("only %d cases compared", compared)
	}
}

func sampleRun(p Params, logits [][]float32) []int32 {
	s, _ := New(p)
	var out []int32
	for _, l := range logits {
		tok := s.Sample(l)
		s.Accept(tok)
		out = append(out, tok)
	}
	return out
}

func TestSeeds(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	logits := make([][]float32, 64)
	for i := range logits {
		logits[i] = randomLogits(r, 1000, false)
		for j := range logits[i] {
			logits[i][j] /= 3 // flat enough that every draw matters
		}
	}
	p := DefaultParams()
	p.TopK = 0
	p.Seed = 1
	a, b := sampleRun(p, logits), sampleRun(p, logits)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different tokens:\n%v\n%v", a, b)
	}
	p.Seed = 2
	c := sampleRun(p, logits)
	differ := 0
	for i := range a {
		if a[i] != c[i] {
			differ++
		}
	}
	if differ < len(a)/2 {
		t.Errorf("seeds 1 and 2 differ at only %d of %d tokens", differ, len(a))
	}

	// Reset starts the same stream again.
	s, _ := New(p)
	first := []int32{s.Sample(logits[0]), s.Sample(logits[1])}
	if s.Step() != 2 {
		t.Errorf("Step() = %d after two samples, want 2", s.Step())
	}
	if got := s.Advance(); got != 2 || s.Step() != 3 {
		t.Errorf("Advance() = %d and then Step() = %d, want 2 and 3", got, s.Step())
	}
	s.Accept(5)
	s.Reset()
	if s.Step() != 0 || len(s.Recent()) != 0 {
		t.Errorf("after Reset: Step %d, Recent %v", s.Step(), s.Recent())
	}
	if again := []int32{s.Sample(logits[0]), s.Sample(logits[1])}; !slices.Equal(first, again) {
		t.Errorf("after Reset: %v, want %v", again, first)
	}
}

// chiSquare compares counts with n draws from the distribution probs.
func chiSquare(counts map[int32]int, probs map[int32]float64, n int) float64 {
	chi := 0.0
	for tok, q := range probs {
		e := q * float64(n)
		d := float64(counts[tok]) - e
		chi += d * d / e
	}
	return chi
}

func TestFrequenciesMatchSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	const n = 40000
	for _, p := range []Params{
		{Temperature: 0.9, Seed: 1},
		{Temperature: 1.3, TopK: 6, TopP: 0.9, MinP: 0.05, Seed: 2},
		{Temperature: 0.5, TopP: 0.95, MinP: 0.02, Seed: 3},
	} {
		l := make([]float32, 8)
		for i := range l {
			l[i] = float32(r.NormFloat64())
		}
		kept := refKept(l, p, 0)
		w := refWeights(l, kept, float64(p.Temperature))
		z := 0.0
		for _, x := range w {
			z += x
		}
		probs := map[int32]float64{}
		for i, id := range kept {
			probs[id] = w[i] / z
		}
		s, _ := New(p)
		counts := map[int32]int{}
		for range n {
			tok := s.Sample(l)
			if _, ok := probs[tok]; !ok {
				t.Fatalf("params %+v: picked %d outside %v", p, tok, kept)
			}
			counts[tok]++
		}
		// df <= 7: the 1e-6 tail of chi-square(7) is about 38.
		if chi := chiSquare(counts, probs, n); chi > 40 {
			t.Errorf("params %+v: chi-square %.1f > 40 (counts %v, probs %v)", p, chi, counts, probs)
		}
	}
}

func TestSpecialLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for range 2000 {
		p := randomParams(r)
		if r.IntN(4) == 0 {
			p.Temperature = 0
		}
		s, _ := New(p)
		n := 1 + r.IntN(60)
		for range r.IntN(10) {
			s.Accept(int32(r.IntN(n)))
		}
		l := randomLogits(r, n, true)
		pen := slices.Clone(s.penalized(l))
		got := s.Sample(l)
		if Argmax(pen) < 0 {
			if got != -1 {
				t.Fatalf("all NaN: got %d, want -1", got)
			}
			continue
		}
		if got < 0 || int(got) >= n || math.IsNaN(float64(pen[got])) {
			t.Fatalf("params %+v, logits %v: picked %d", p, pen, got)
		}
		if slices.Contains(pen, float32(math.Inf(1))) && !math.IsInf(float64(pen[got]), 1) {
			t.Fatalf("params %+v, logits %v: picked %d over +Inf", p, pen, got)
		}
	}

	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, temp := range []float32{0, 1} {
		s, _ := New(Params{Temperature: temp, TopK: 2, TopP: 0.5, MinP: 0.1})
		if got := s.Sample(nil); got != -1 {
			t.Errorf("temperature %v, no logits: got %d, want -1", temp, got)
		}
		if got := s.Sample([]float32{nan, nan}); got != -1 {
			t.Errorf("temperature %v, all NaN: got %d, want -1", temp, got)
		}
		if got := s.Sample([]float32{-inf, nan, -inf}); got != 0 && got != 2 {
			t.Errorf("temperature %v, all -Inf or NaN: got %d, want 0 or 2", temp, got)
		}
		if s.Step() != 3 {
			t.Errorf("Step() = %d after 3 samples, want 3", s.Step())
		}
	}
}

func TestSampleKeepsLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for range 200 {
		p := randomParams(r)
		p.RepeatPenalty, p.PenaltyLastN = 1.3, 8
		s, _ := New(p)
		l := randomLogits(r, 100, true)
		for i := range 8 {
			s.Accept(int32(i * 7))
		}
		orig := slices.Clone(l)
		s.Sample(l)
		if !sameFloats(l, orig) {
			t.Fatal("Sample modified its logits")
		}
	}
}

func benchLogits(n int) []float32 {
	r := rand.New(rand.NewPCG(1, 1))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	return l
}

// BenchmarkSample times one token at SmolLM's vocabulary size, 49152.
func BenchmarkSample(b *testing.B) {
	l := benchLogits(49152)
	withRepeat := DefaultParams()
	withRepeat.RepeatPenalty = 1.1
	noTopK := DefaultParams()
	noTopK.TopK = 0
	fullSort := noTopK
	fullSort.MinP = 0
	greedy := DefaultParams()
	greedy.Temperature = 0
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"default", DefaultParams()},
		{"default+repeat1.1", withRepeat},
		{"greedy", greedy},
		{"topk0", noTopK},
		{"topk0-minp0", fullSort},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := New(c.p)
			for i := range 64 {
				s.Accept(int32(i * 701))
			}
			for b.Loop() {
				s.Sample(l)
			}
		})
	}
	// Normal logits with sd 2 are flatter than a language model's: top-p
	// 0.95 then keeps thousands of tokens to sort. With a few clear
	// favourites, as a trained model usually has, little is sorted and the
	// cost is top-p's normalizer: one exp per vocabulary entry.
	peaked := slices.Clone(l)
	for i := range 20 {
		peaked[i*2000] += 12
	}
	b.Run("topk0-minp0-peaked", func(b *testing.B) {
		s, _ := New(fullSort)
		for b.Loop() {
			s.Sample(peaked)
		}
	})
}

func BenchmarkArgmax(b *testing.B) {
	l := benchLogits(49152)
	for b.Loop() {
		Argmax(l)
	}
}

// TestDrawIntervalsAreHalfOpen pins the boundary convention a GPU twin must
// copy: token i owns [cum_{i-1}, cum_i), so a draw exactly on a boundary goes
// to the later token.
func TestDrawIntervalsAreHalfOpen(t *testing.T) {
	const seed = 21486860 // Uniform(seed, 0) is exactly 0.5
	if u := Uniform(seed, 0); u != 0.5 {
		t.Fatalf("Uniform(%d, 0) = %v, want 0.5", seed, u)
	}
	s, _ := New(Params{Temperature: 1, Seed: seed})
	if got := s.Sample([]float32{3, 3}); got != 1 {
		t.Errorf("two equal logits at u = 0.5: picked %d, want 1", got)
	}
}
