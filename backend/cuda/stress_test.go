package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"gotok/backend/cpu"
	"gotok/model"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/sample"
)

// stressParams are the sampler settings the stress test draws with: the
// device chain with and without penalties, and greedy with penalties.
var stressParams = []sample.Params{
	{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 7},
	{Temperature: 1, RepeatPenalty: 1.3, FrequencyPenalty: 0.2, PresencePenalty: 0.3, PenaltyLastN: 16, Seed: 8},
	{Temperature: 0, RepeatPenalty: 1.5, PenaltyLastN: 32},
	{Temperature: 0.7, TopK: 5, Seed: 9},
}

// stress drives one CUDA engine with a seeded random mix of what callers
// do and checks every result against the CPU engine fed the same tokens.
type stress struct {
	t    *testing.T
	ctx  context.Context
	r    *rand.Rand
	g    *Backend
	c    *cpu.Backend
	cfg  model.Config
	tol  float64 // bound on the logits' relative error, GPU step against CPU
	ptol float64 // the same after a batched prefill

	hist []int32 // the tokens in both caches, positions 0…len-1
	next int32   // the token the last operation chose: fed back, it takes over a step queued ahead

	// The samplers of a sampled run, in lockstep: sg drives the device,
	// sc the CPU engine; both accepted the tokens in acc.
	p      sample.Params
	sg, sc *sample.Sampler
	acc    []int32

	// Operations by kind; decodes whose step was queued ahead (taken over
	// unless a sampler's history differs); disagreements with the CPU
	// engine that rounding explains.
	ops, tookOver, ties map[string]int
}

func (s *stress) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("after %d operations: %s", s.total(), fmt.Sprintf(format, args...))
}

func (s *stress) total() int {
	n := 0
	for _, v := range s.ops {
		n += v
	}
	return n
}

// position picks where the next operation of n tokens starts: mostly the
// end of the history, sometimes an earlier position (a new prompt sharing
// a prefix), and always room for n tokens.
func (s *stress) position(n int) int {
	pos := len(s.hist)
	if s.r.IntN(8) == 0 || pos+n > s.g.ctxLen {
		pos = s.r.IntN(min(len(s.hist), s.g.ctxLen-n) + 1)
	}
	return pos
}

// input is the token to decode: mostly the one the last operation chose.
func (s *stress) input() int32 {
	if s.r.IntN(5) == 0 || s.next < 0 {
		return int32(s.r.IntN(s.cfg.VocabSize))
	}
	return s.next
}

// newSamplers starts a sampled run with p over the history.
func (s *stress) newSamplers(p sample.Params) {
	s.p = p
	s.sg, _ = sample.New(p)
	s.sc, _ = sample.New(p)
	s.acc = s.acc[:0]
	for _, t := range s.hist {
		s.accept(t)
	}
}

func (s *stress) accept(t int32) {
	s.sg.Accept(t)
	s.sc.Accept(t)
	s.acc = append(s.acc, t)
}

// samplerAt is a sampler for p that has accepted acc and drawn step times.
func samplerAt(p sample.Params, acc []int32, step uint64) *sample.Sampler {
	x, _ := sample.New(p)
	for _, t := range acc {
		x.Accept(t)
	}
	for x.Step() < step {
		x.Advance()
	}
	return x
}

// setHistory truncates the history to pos and appends toks; a sampled run
// that cannot forget what it accepted starts over.
func (s *stress) setHistory(pos int, toks []int32) {
	if pos < len(s.hist) && s.sg != nil {
		s.hist = s.hist[:pos]
		s.newSamplers(s.p)
	}
	s.hist = append(s.hist[:pos], toks...)
	if s.sg != nil {
		for _, t := range toks {
			s.accept(t)
		}
	}
}

// checkLogits compares the device's logits with the CPU engine's.
func (s *stress) checkLogits(what string, got, want []float32, tol float64) {
	s.t.Helper()
	if e := relErr(got, f64s(want)); !(e <= tol) {
		s.fatalf("%s: logits relative error %.3g > %.1g", what, e, tol)
	}
}

// verifyStep is the check when the device chose another token than the CPU
// engine: it runs the step at pos again alone and requires the device's
// token to be its own logits' choice, exactly (the argmax, or the draw of
// a sampler at the step's state), and those logits to agree with the
// CPU's within the bound. The CPU engine rounds activations to Q8_0, so
// the two engines' logits differ by a few percent: a near-tie, or a draw
// near the boundary between two candidates of a flat distribution, may go
// either way, and the two checks together are what a correct engine
// guarantees.
func (s *stress) verifyStep(kind, what string, tok int32, pos int, got int32, cpuLogits []float32, draw *sample.Sampler) {
	s.t.Helper()
	raw, err := s.g.Logits(s.ctx, tok, pos)
	if err != nil {
		s.fatalf("%s: %v", what, err)
	}
	s.checkLogits(what+" (again alone)", raw, cpuLogits, s.tol)
	want := int32(refArgmax(raw))
	if draw != nil {
		want = draw.Sample(raw)
	}
	if got != want {
		s.fatalf("%s: the device chose %d, its own logits %d", what, got, want)
	}
	s.ties[kind]++
}

func (s *stress) prefill() {
	n := 1 + s.r.IntN([]int{3, 64, 300}[s.r.IntN(3)])
	n = min(n, s.g.ctxLen)
	pos := s.position(n)
	toks := randPrompt(s.r, n, s.cfg.VocabSize)
	what := fmt.Sprintf("prefill of %d at %d", n, pos)
	last := pos + n - 1
	s.setHistory(pos, toks)
	want, err := s.c.Forward(s.ctx, toks, pos)
	if err != nil {
		s.fatalf("%s: cpu: %v", what, err)
	}
	if s.sg != nil && s.r.IntN(2) == 0 {
		what = "sampled " + what
		s.ops["sampled prefill"]++
		before := samplerAt(s.p, s.acc, s.sc.Step())
		got, err := s.g.Prefill(s.ctx, toks, pos, s.sg)
		if err != nil {
			s.fatalf("%s: %v", what, err)
		}
		ref := s.sc.Sample(want)
		switch {
		case s.g.batchedPrefill(n) && !deviceGreedy(s.sg):
			// The host drew from the batched prefill's logits.
			raw, err := s.g.readLogits(last)
			if err != nil {
				s.fatalf("%s: %v", what, err)
			}
			s.checkLogits(what, raw, want, s.ptol)
			if mine := before.Sample(raw); got != mine {
				s.fatalf("%s: the device chose %d, a draw from its logits %d", what, got, mine)
			}
			if got != ref {
				s.ties["sampled prefill"]++
			}
		case got != ref:
			s.verifyStep("sampled prefill", what, toks[n-1], last, got, want, before)
		}
		s.next = got
		return
	}
	s.ops["prefill"]++
	got, err := s.g.Prefill(s.ctx, toks, pos, nil)
	if err != nil {
		s.fatalf("%s: %v", what, err)
	}
	if s.g.batchedPrefill(n) {
		// The batched path leaves the last position's logits in place.
		raw, err := s.g.readLogits(last)
		if err != nil {
			s.fatalf("%s: %v", what, err)
		}
		s.checkLogits(what, raw, want, s.ptol)
		if raw[got] != raw[refArgmax(raw)] {
			s.fatalf("%s: the device chose %d, the argmax of its logits is %d", what, got, refArgmax(raw))
		}
	} else if got != int32(refArgmax(want)) {
		s.verifyStep("prefill", what, toks[n-1], last, got, want, nil)
	}
	s.next = got
}

func (s *stress) decode(sampled bool) {
	pos := s.position(1)
	tok := s.input()
	what := fmt.Sprintf("decode of %d at %d", tok, pos)
	a := s.g.ahead
	queued := a.ok && a.pos == pos && a.token == tok && a.sampled == sampled && (!sampled || a.params == s.p && a.step == s.sg.Step())
	s.setHistory(pos, []int32{tok})
	want, err := s.c.Forward(s.ctx, []int32{tok}, pos)
	if err != nil {
		s.fatalf("%s: cpu: %v", what, err)
	}
	kind := "greedy decode"
	var sg *sample.Sampler
	if sampled {
		kind, sg = "sampled decode", s.sg
	}
	s.ops[kind]++
	if queued {
		s.tookOver[kind]++
	}
	var before *sample.Sampler
	if sampled {
		before = samplerAt(s.p, s.acc, s.sc.Step())
	}
	got, err := s.g.Decode(s.ctx, tok, pos, sg)
	if err != nil {
		s.fatalf("%s: %v", what, err)
	}
	ref := int32(refArgmax(want))
	if sampled {
		ref = s.sc.Sample(want)
	}
	switch {
	case got != ref:
		s.verifyStep(kind, what, tok, pos, got, want, before)
	case !sampled && s.r.IntN(4) == 0:
		// Check the logits of a step that agreed too, now and then:
		// this gives up the step queued ahead.
		raw, err := s.g.Logits(s.ctx, tok, pos)
		if err != nil {
			s.fatalf("%s: %v", what, err)
		}
		s.checkLogits(what, raw, want, s.tol)
	}
	s.next = got
}

func (s *stress) logits() {
	pos := s.position(1)
	tok := s.input()
	what := fmt.Sprintf("logits of %d at %d", tok, pos)
	s.ops["logits"]++
	s.setHistory(pos, []int32{tok})
	want, err := s.c.Logits(s.ctx, tok, pos)
	if err != nil {
		s.fatalf("%s: cpu: %v", what, err)
	}
	got, err := s.g.Logits(s.ctx, tok, pos)
	if err != nil {
		s.fatalf("%s: %v", what, err)
	}
	s.checkLogits(what, got, want, s.tol)
	s.next = int32(refArgmax(got))
}

// TestInterleavedOpsMatchCPU drives the CUDA engine with a seeded random
// mix of what callers do — batched and token-by-token prefills, greedy and
// sampled decoding (taking over the step queued ahead, or feeding another
// token), Logits, sampled prompts, rewinds to earlier positions — across
// every context tier (contexts to 1024), and checks each result against
// the CPU engine fed the same tokens. GOTOK_STRESS_OPS sets the number of
// operations per model (default 3000).
func TestInterleavedOpsMatchCPU(t *testing.T) {
	skipWithoutGPU(t)
	ops := 3000
	if v := os.Getenv("GOTOK_STRESS_OPS"); v != "" {
		var err error
		if ops, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	hd64 := synth.Shape{Layers: 2, Dim: 256, Heads: 4, KVHeads: 1, FFN: 320, Vocab: 512, Context: 1024, RopeBase: 10000}
	for _, tc := range []struct {
		name      string
		shape     synth.Shape
		typ       quant.Type
		seed      uint64
		tol, ptol float64
	}{
		{"tiny q8_0", synth.Presets["tiny"], quant.Q8_0, 31, 5e-2, 6e-2},
		{"hd64 q4_0 untied", hd64, quant.Q4_0, 32, 5e-2, 6e-2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := genModel(t, tc.shape, tc.typ, tc.seed)
			const ctxLen = 1024
			g, err := New(m, Options{ContextLen: ctxLen})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			c, err := cpu.New(m, cpu.Options{ContextLen: ctxLen, KVType: quant.F16})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := &stress{t: t, ctx: context.Background(), r: rand.New(rand.NewPCG(tc.seed, 99)), g: g, c: c, cfg: m.Config,
				tol: tc.tol, ptol: tc.ptol, next: -1,
				ops: map[string]int{}, tookOver: map[string]int{}, ties: map[string]int{}}
			for range ops {
				switch k := s.r.IntN(20); {
				case k < 5:
					s.prefill()
				case k < 11:
					s.decode(false)
				case k < 16:
					if s.sg == nil || s.r.IntN(10) == 0 {
						s.newSamplers(stressParams[s.r.IntN(len(stressParams))])
					}
					s.decode(true)
				case k < 19:
					s.logits()
				default:
					s.sg = nil // the sampled run ends
				}
			}
			t.Logf("operations %v; steps taken over from the queue %v; near-ties and boundary draws %v", s.ops, s.tookOver, s.ties)
			if ops >= 1000 && (s.tookOver["greedy decode"] == 0 || s.tookOver["sampled decode"] == 0) {
				t.Errorf("no step was taken over from the queue: %v", s.tookOver)
			}
		})
	}
}
