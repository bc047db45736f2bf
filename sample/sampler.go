package sample

import (
	"math"
	"slices"
)

// Sampler runs the sampler chain for one sequence: it owns the penalty
// history, the step counter that indexes the random stream, and scratch
// buffers reused across calls. It is not safe for concurrent use.
type Sampler struct {
	p    Params
	hist history
	step uint64

	scratch []float32   // penalized logits
	cands   []candidate // candidates of the current step
	weights []float64   // their exp weights
}

// New returns a sampler for p, or the error from p.Validate.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{p: p, hist: newHistory(p.PenaltyLastN)}, nil
}

// Params returns the sampler's parameters.
func (s *Sampler) Params() Params { return s.p }

// Accept records tok in the penalty history, which keeps the last
// PenaltyLastN tokens. Callers accept the prompt's tokens and then each
// sampled token; Sample does not accept on its own.
func (s *Sampler) Accept(tok int32) { s.hist.add(tok) }

// Recent returns a copy of the penalty history, oldest first.
func (s *Sampler) Recent() []int32 { return s.hist.tokens() }

// Step returns the number of Sample calls since New or Reset; the next call
// draws Uniform(Seed, Step()).
func (s *Sampler) Step() uint64 { return s.step }

// Advance returns Step() and then increments it, for a backend that draws
// on its own device with Uniform(Params().Seed, step) instead of calling
// Sample, so that the two stay on the same random stream.
func (s *Sampler) Advance() uint64 {
	step := s.step
	s.step++
	return step
}

// Reset clears the history and the step counter, as for a new sequence.
func (s *Sampler) Reset() {
	s.hist.reset()
	s.step = 0
}

// Sample picks a token from logits with the chain described in the package
// documentation and advances the step. It never modifies logits. It returns
// -1, which callers must treat as an error, only when there is nothing to pick:
// logits is empty or every (penalized) logit is NaN.
func (s *Sampler) Sample(logits []float32) int32 {
	step := s.Advance()
	l := s.penalized(logits)
	if s.p.Greedy() {
		return Argmax(l)
	}
	c := s.filter(l)
	if len(c) == 0 {
		return -1
	}
	return s.draw(c, Uniform(s.p.Seed, step))
}

// filter returns the candidates that survive top-k, top-p and min-p, in
// candidate order.
func (s *Sampler) filter(l []float32) []candidate {
	p := s.p
	if p.TopK > 0 && p.TopK < len(l) {
		s.cands = appendTopK(s.cands, l, p.TopK)
		if len(s.cands) == 0 {
			return nil
		}
		c := s.cands
		if p.topPOn() {
			c, _ = s.cutTopP(c, c[0].logit, 0)
		}
		if p.minPOn() {
			c = c[:countMinP(c, c[0].logit, p.MinP)]
		}
		return c
	}

	// Top-k is off, so every token is a candidate. Top-p and min-p each keep
	// a prefix of the candidate order, all tokens whose shift is above some
	// floor, so only that prefix is collected and sorted.
	first := Argmax(l)
	if first < 0 {
		return nil
	}
	m := l[first]
	minFloor := math.Inf(-1)
	if p.minPOn() {
		minFloor = math.Log(float64(p.MinP))
	}
	if !p.topPOn() {
		s.cands = appendSorted(s.cands, l, m, minFloor)
		return s.cands
	}
	z, topFloor := topPFloor(l, m, p.TopP)
	if topFloor > minFloor {
		s.cands = appendSorted(s.cands, l, m, topFloor)
		if c, reached := s.cutTopP(s.cands, m, z); reached {
			return c
		}
		// Rounding put the top-p boundary just past the floor: take all.
	}
	s.cands = appendSorted(s.cands, l, m, minFloor)
	c, _ := s.cutTopP(s.cands, m, z)
	return c
}

// topPFloor returns top-p's normalizer z, the sum of exp(shift) over all
// non-NaN logits in id order, and a floor such that the tokens whose shift
// is at least floor hold a little more than top of the mass; -Inf if that
// needs every token. A histogram of the mass by whole units of shift finds it
// in the same pass.
func topPFloor(l []float32, m float32, top float32) (z, floor float64) {
	var mass [64]float64 // mass[b]: tokens with shift in (-(b+1), -b]
	for _, x := range l {
		if x != x {
			continue
		}
		d := shift(x, m)
		e := math.Exp(d)
		z += e
		if d > -64 {
			mass[int(-d)] += e
		}
	}
	want := float64(top) * z * (1 + 1e-9) // a margin for rounding
	cum := 0.0
	for b, w := range mass {
		cum += w
		if cum >= want {
			return z, -float64(b + 1)
		}
	}
	return z, math.Inf(-1)
}

// appendSorted appends the candidates of logits whose shift from m is at
// least floor to dst, in candidate order.
func appendSorted(dst []candidate, logits []float32, m float32, floor float64) []candidate {
	dst = dst[:0]
	for i, l := range logits {
		if l == l && shift(l, m) >= floor {
			dst = append(dst, candidate{l, int32(i)})
		}
	}
	slices.SortFunc(dst, compareCandidates)
	return dst
}

// cutTopP returns the shortest prefix of c whose probability reaches TopP,
// normalizing by z, or by c's own sum when z is 0, and whether it was
// reached; if not, it returns all of c.
func (s *Sampler) cutTopP(c []candidate, m float32, z float64) ([]candidate, bool) {
	top := float64(s.p.TopP)
	if z == 0 {
		s.weights, z = expShifts(s.weights, c, m, 1)
		cum := 0.0
		for i, w := range s.weights {
			cum += w / z
			if cum >= top {
				return c[:i+1], true
			}
		}
		return c, false
	}
	cum := 0.0
	for i, x := range c {
		cum += math.Exp(shift(x.logit, m)) / z
		if cum >= top {
			return c[:i+1], true
		}
	}
	return c, false
}

// countMinP returns how many of the sorted candidates c min-p keeps: those
// whose probability is at least MinP times the largest one's, whose logit is
// m. Like llama.cpp it compares logits, not probabilities: shift >= log(MinP).
// The first candidate always stays, since its shift is 0 and log(MinP) <= 0.
func countMinP(c []candidate, m float32, minP float32) int {
	floor := math.Log(float64(minP))
	for i, x := range c {
		if shift(x.logit, m) < floor {
			return i
		}
	}
	return len(c)
}

// draw inverts the CDF of the tempered softmax over c at u.
func (s *Sampler) draw(c []candidate, u float32) int32 {
	var z float64
	s.weights, z = expShifts(s.weights, c, c[0].logit, float64(s.p.Temperature))
	x := float64(u) * z
	cum := 0.0
	for i, w := range s.weights {
		cum += w
		if x < cum {
			return c[i].id
		}
	}
	// Unreachable: the last cum equals z bit for bit, z >= 1 (the first
	// weight is exp(0)), and u <= 1-2^-24, so x < z.
	return c[0].id
}
