package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gotok/model/synth"
	"gotok/quant"
	"gotok/sample"
)

// samplerConfigs are the parameter sets the device chain is checked with:
// llama.cpp's defaults and each filter alone and together, in the regimes
// that take different paths through the kernel.
var samplerConfigs = []sample.Params{
	{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05},
	{Temperature: 1.5, TopK: 5},
	{Temperature: 0.5, TopK: 100, TopP: 0.5},
	{Temperature: 1, TopK: 1000, TopP: 0.99},
	{Temperature: 0.7, MinP: 0.1},
	{Temperature: 1, TopP: 0.9},
	{Temperature: 1.2, TopP: 0.7, MinP: 0.02},
	{Temperature: 1},
	{Temperature: 0.9, TopK: 3, MinP: 0.5},
}

// logitsCase returns n logits of a given character: flat, peaked, with
// ties, with NaN and infinities.
func logitsCase(r *rand.Rand, kind string, n int) []float32 {
	l := randFloats(r, n, 1)
	switch kind {
	case "peaked":
		for i := range l {
			l[i] *= 6
		}
	case "ties":
		for i := range l {
			l[i] = float32(math.Round(float64(l[i])*2) / 2)
		}
	case "nan-inf":
		for range n / 50 {
			l[r.IntN(n)] = float32(math.NaN())
			l[r.IntN(n)] = float32(math.Inf(-1))
		}
		l[r.IntN(n)] = 0
		l[r.IntN(n)] = float32(math.Copysign(0, -1))
	case "plus-inf":
		l[r.IntN(n)] = float32(math.Inf(1))
		l[r.IntN(n)] = float32(math.Inf(1))
	}
	return l
}

// TestSamplerKernel draws with the device chain from fresh logits and
// checks each token against package sample on the same logits and step.
// Steps whose candidates exceed the device's sort (flat logits with
// loose filters) come back as sampOverflow; every configuration must also
// have draws the device made itself.
func TestSamplerKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(7, 7))
	host, err := g.c.AllocHost(16)
	if err != nil {
		t.Fatal(err)
	}
	defer g.c.FreeHost(host)
	total, overflow := 0, 0
	for ci, p := range samplerConfigs {
		p.Seed = uint64(1000 + ci)
		for _, n := range []int{512, 49152} {
			own := 0
			for _, kind := range []string{"flat", "peaked", "ties", "nan-inf", "plus-inf"} {
				cpu, err := sample.New(p)
				if err != nil {
					t.Fatal(err)
				}
				for draw := 0; draw < 12; draw++ {
					l := logitsCase(r, kind, n)
					best := sample.Argmax(l)
					step := cpu.Step()
					want := cpu.Sample(l)
					words := make([]uint32, spWords)
					encodeParams(words, p, step, n)
					host.Uint32s()[0] = 0xfffffff0
					err := g.l.sample(sampleArgs{logits: g.floats(l, 0), n: n, params: g.int32s(i32s(words)...),
						best: g.int32s(best), hist: g.floats(nil, 2), counts: g.floats(nil, 1), result: host.Device})
					if err != nil {
						t.Fatal(err)
					}
					if err := g.c.SyncStream(g.l.stream); err != nil {
						t.Fatal(err)
					}
					got := int32(host.Uint32s()[0])
					total++
					if got == sampOverflow {
						overflow++
						continue
					}
					own++
					if got != want {
						t.Errorf("%+v n=%d %s draw %d: device token %d, sample's %d", p, n, kind, draw, got, want)
					}
				}
			}
			// With no filter every token is a candidate: past the
			// device's sort, every draw goes to the host.
			unfiltered := (p.TopK <= 0 || p.TopK >= n) && (p.TopP <= 0 || p.TopP >= 1) && p.MinP <= 0
			if own == 0 && !(unfiltered && n > sampCap) {
				t.Errorf("%+v n=%d: every draw went back to the host", p, n)
			}
		}
	}
	t.Logf("%d draws, %d agree with package sample, %d handed back to the host (too many candidates)", total, total-overflow, overflow)
}

// TestSampledDecodeAgrees decodes stories260K with the device's sampler
// chain, penalties included, and checks every token against package sample
// drawing from the same step's raw logits, for several parameter sets and
// seeds; now and then a token the device did not draw joins the history,
// which must then be uploaded again.
func TestSampledDecodeAgrees(t *testing.T) {
	skipWithoutGPU(t)
	m := stories260K(t)
	ctx := context.Background()
	g, err := New(m, Options{ContextLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	configs := append([]sample.Params{
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PenaltyLastN: 64},
		{Temperature: 1, RepeatPenalty: 1.3, FrequencyPenalty: 0.2, PresencePenalty: 0.3, PenaltyLastN: 16},
		{Temperature: 0, RepeatPenalty: 1.5, PenaltyLastN: 32},
		{Temperature: 0, PresencePenalty: -0.5, FrequencyPenalty: 0.4, PenaltyLastN: 8},
	}, samplerConfigs...)
	const steps = 120
	for ci, p := range configs {
		for _, seed := range []uint64{1, 42} {
			p.Seed = seed
			sg, err := sample.New(p)
			if err != nil {
				t.Fatal(err)
			}
			sc, _ := sample.New(p)
			tok := int32(1)
			sg.Accept(tok)
			sc.Accept(tok)
			same := 0
			for pos := 0; pos < steps; pos++ {
				next, err := g.Decode(ctx, tok, pos, sg)
				if err != nil {
					t.Fatal(err)
				}
				// The oracle: package sample on the step's raw logits,
				// recomputed by the greedy graph at the same position.
				raw, err := g.Logits(ctx, tok, pos)
				if err != nil {
					t.Fatal(err)
				}
				want := sc.Sample(raw)
				if next == want {
					same++
				} else {
					t.Errorf("config %d %+v: step %d: device token %d, sample's %d", ci, p, pos, next, want)
					next = want
				}
				sg.Accept(next)
				sc.Accept(next)
				if pos%25 == 24 {
					// A token the device did not draw (as a prompt would
					// add): the next step must upload the history again.
					extra := int32((pos * 7) % m.Config.VocabSize)
					sg.Accept(extra)
					sc.Accept(extra)
				}
				tok = next
			}
			if sg.Step() != sc.Step() {
				t.Errorf("config %d: the device path left the sampler at step %d, sample at %d", ci, sg.Step(), sc.Step())
			}
			t.Logf("config %d seed %d: %d of %d tokens agree", ci, seed, same, steps)
		}
	}
}

func TestEncodeParams(t *testing.T) {
	p := sample.Params{Temperature: 0.5, TopK: 70000, TopP: 1, MinP: 0.25, RepeatPenalty: 1, FrequencyPenalty: 0.5,
		PenaltyLastN: 9, Seed: 1<<40 + 3}
	w := make([]uint32, spWords)
	encodeParams(w, p, 1<<33+5, 49152)
	if w[0] != spDraw|spPenalty|spMinP {
		t.Errorf("flags %#x, want draw, penalty (no repeat), min-p, no top-p", w[0])
	}
	if w[1] != 0 {
		t.Errorf("top-k past the vocabulary is %d, want 0 (off)", w[1])
	}
	if got := math.Float64frombits(uint64(w[8]) | uint64(w[9])<<32); got != math.Log(0.25) {
		t.Errorf("log min-p %v, want %v", got, math.Log(0.25))
	}
	if seed, step := uint64(w[10])|uint64(w[11])<<32, uint64(w[12])|uint64(w[13])<<32; seed != p.Seed || step != 1<<33+5 {
		t.Errorf("seed %d step %d", seed, step)
	}
	if !deviceGreedy(nil) || !penaltiesOn(p) {
		t.Error("a nil sampler is greedy, and a frequency penalty is a penalty")
	}
}

// TestSampledRunAhead decodes with the sampler chain on the device, each
// step queued ahead and taken over by the next Decode, against a second
// engine whose every step is fed by the host (settle drops the queue): the
// same tokens and sampler steps, bit for bit, as both run the same kernels.
// The vocabulary (8192) is past what the device sorts, so loose chains
// hand steps back to the host; a token the device did not draw (accepted
// by the caller alone) must refuse the queued step.
func TestSampledRunAhead(t *testing.T) {
	skipWithoutGPU(t)
	shape := synth.Presets["tiny"]
	shape.Vocab = 8192
	m := genModel(t, shape, quant.Q4_0, 13)
	ctx := context.Background()
	var g, ref *Backend
	for _, e := range []**Backend{&g, &ref} {
		var err error
		if *e, err = New(m, Options{ContextLen: 160}); err != nil {
			t.Fatal(err)
		}
		defer (*e).Close()
	}
	configs := []sample.Params{
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PenaltyLastN: 64},
		{Temperature: 1.5}, // past 4096 candidates: the host draws
		{Temperature: 0, RepeatPenalty: 1.5, PenaltyLastN: 32}, // greedy with penalties
		{Temperature: 1, TopK: 100, PresencePenalty: 0.5, FrequencyPenalty: 0.1, PenaltyLastN: 16},
	}
	took, steps := 0, 0
	for ci, p := range configs {
		p.Seed = uint64(ci + 1)
		sg, _ := sample.New(p)
		sr, _ := sample.New(p)
		tok := int32(3)
		sg.Accept(tok)
		sr.Accept(tok)
		for pos := 0; pos < 150; pos++ {
			if g.ahead.ok && g.ahead.sampled && g.ahead.pos == pos {
				took++
			}
			steps++
			got, err := g.Decode(ctx, tok, pos, sg)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Decode(ctx, tok, pos, sr)
			if err != nil {
				t.Fatal(err)
			}
			if err := ref.settle(); err != nil {
				t.Fatal(err)
			}
			if got != want || sg.Step() != sr.Step() {
				t.Fatalf("config %d %+v: position %d: token %d at step %d, fed by the host %d at step %d", ci, p, pos, got, sg.Step(), want, sr.Step())
			}
			sg.Accept(got)
			sr.Accept(got)
			if pos%30 == 29 {
				extra := int32(pos*7) % int32(shape.Vocab)
				sg.Accept(extra)
				sr.Accept(extra)
			}
			tok = got
		}
	}
	t.Logf("%d of %d steps taken over from the queue; host draws: %v", took, steps, g.hs.fallback != nil)
	if took < steps/2 {
		t.Errorf("only %d of %d steps were taken over from the queue", took, steps)
	}
}
