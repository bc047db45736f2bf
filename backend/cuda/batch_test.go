package cuda

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"gotok/backend"
	"gotok/backend/cuda/cu"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/sample"
)

// TestBatchedStep runs sequences together through Batched.Step, prompts
// entering in chunks while others decode, one prompt sharing another's
// prefix blocks, and compares every logits row with the same sequence run
// alone, token by token, through the decode graph: the batched step is
// the batched prefill's arithmetic (f16 activations), so the bound is
// prefillLogitsTol. Greedy rows are chosen on the device (rows_argmax),
// one sequence samples on the host.
func TestBatchedStep(t *testing.T) {
	skipWithoutGPU(t)
	t256 := synth.Presets["test-256"]
	hd64 := synth.Shape{Layers: 2, Dim: 256, Heads: 4, KVHeads: 1, FFN: 320, Vocab: 512, Context: 1024, RopeBase: 10000}
	opts := func(s synth.Shape, typ quant.Type) synth.Options {
		return synth.Options{Shape: s, Type: typ, EmbedType: synth.DefaultEmbedType(typ), Seed: 3}
	}
	for _, tc := range []struct {
		name string
		o    synth.Options
	}{
		{"tiny q8_0", opts(synth.Presets["tiny"], quant.Q8_0)},
		{"hd64 q4_0 untied", opts(hd64, quant.Q4_0)},
		{"test-256 q4_k_m-like", q4KMLike(t256, 3)},
		{"tiny f16", opts(synth.Presets["tiny"], quant.F16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := genModelWith(t, tc.o)
			g, err := New(m, Options{ContextLen: 512})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			bg, err := g.EnableBatching(2048, 4)
			if err != nil {
				t.Fatal(err)
			}
			batchedVsAlone(t, bg, m.Config.VocabSize)
			residentReused(t, bg, m.Config.VocabSize)
		})
	}
}

// residentReused runs a prompt alone (so its rows stay in the
// single-sequence cache, the pool's copy stale), then a second prompt that
// reuses its prefix blocks: the pool must be written back before they are
// read. Both are checked against the decode graph token by token.
func residentReused(t *testing.T, g *Batched, vocab int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	a := randPrompt(r, 40, vocab)
	b := append(append([]int32(nil), a[:36]...), randPrompt(r, 6, vocab)...)
	run := func(p []int32) ([]float32, *backend.Seq, int) {
		seq, reused := g.KV().NewSeq(p)
		if err := seq.Reserve(len(p) - reused); err != nil {
			t.Fatal(err)
		}
		st := []backend.SeqStep{{Seq: seq, Tokens: p[reused:], Logits: make([]float32, vocab)}}
		if err := g.Step(ctx, st); err != nil {
			t.Fatal(err)
		}
		return st[0].Logits, seq, reused
	}
	_, seqA, _ := run(a)
	got, seqB, reused := run(b)
	if reused != 32 {
		t.Errorf("second prompt reused %d tokens, want 32", reused)
	}
	var want []float32
	for p, tok := range b {
		l, err := g.Logits(ctx, tok, p)
		if err != nil {
			t.Fatal(err)
		}
		want = l
	}
	if e := relErr(got, f64s(want)); !(e <= prefillLogitsTol) {
		t.Errorf("after reusing a resident sequence's blocks: logits differ from the decode graph's by %.3g", e)
	}
	seqA.Free()
	seqB.Free()
}

func batchedVsAlone(t *testing.T, g *Batched, vocab int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	common := randPrompt(r, 150, vocab)
	prompts := [][]int32{
		randPrompt(r, 5, vocab),
		append(append([]int32(nil), common...), randPrompt(r, 20, vocab)...),
		randPrompt(r, 1, vocab),
		append(append([]int32(nil), common...), randPrompt(r, 3, vocab)...),
		randPrompt(r, 90, vocab),
		randPrompt(r, 33, vocab),
	}
	const steps = 10
	type live struct {
		seq    *backend.Seq
		prompt []int32
		fed    []int32 // every token that went in
		next   int32
		out    [][]float32
		s      *sample.Sampler
	}
	seqs := make([]*live, len(prompts))
	reused := 0
	for round := 0; ; round++ {
		var st []backend.SeqStep
		var who []*live
		for i := range seqs {
			if i > round {
				break
			}
			s := seqs[i]
			if s == nil {
				seq, n := g.KV().NewSeq(prompts[i])
				reused += n
				s = &live{seq: seq, prompt: prompts[i], fed: append([]int32(nil), prompts[i][:n]...)}
				if i == 2 {
					s.s, _ = sample.New(sample.Params{Temperature: 0.8, Seed: 9})
				}
				seqs[i] = s
			}
			if len(s.out) == steps {
				continue
			}
			var toks []int32
			if len(s.fed) < len(s.prompt) {
				toks = s.prompt[len(s.fed):min(len(s.fed)+64, len(s.prompt))]
			} else {
				toks = []int32{s.next}
			}
			if err := s.seq.Reserve(len(toks)); err != nil {
				t.Fatal(err)
			}
			e := backend.SeqStep{Seq: s.seq, Tokens: toks}
			if len(s.fed)+len(toks) >= len(s.prompt) {
				e.Logits, e.Sample, e.Sampler = make([]float32, vocab), true, s.s
			}
			s.fed = append(s.fed, toks...)
			st = append(st, e)
			who = append(who, s)
		}
		if len(st) == 0 {
			if round >= len(seqs) {
				break
			}
			continue
		}
		if err := g.Step(ctx, st); err != nil {
			t.Fatal(err)
		}
		for k, e := range st {
			if e.Logits == nil {
				continue
			}
			s := who[k]
			if s.s == nil && e.Next != int32(refArgmax(e.Logits)) {
				t.Errorf("device choice %d, argmax of the logits %d", e.Next, refArgmax(e.Logits))
			}
			s.out = append(s.out, e.Logits)
			s.next = e.Next
		}
	}
	if reused != 128 {
		t.Errorf("prefix cache reused %d tokens, want 128", reused)
	}
	worst := 0.0
	for i, s := range seqs {
		// Alone: the same tokens through the decode graph, one at a time.
		for p, tok := range s.fed {
			l, err := g.Logits(ctx, tok, p)
			if err != nil {
				t.Fatal(err)
			}
			k := p - (len(s.prompt) - 1)
			if k < 0 {
				continue
			}
			e := relErr(s.out[k], f64s(l))
			worst = max(worst, e)
			if !(e <= prefillLogitsTol) {
				t.Errorf("sequence %d, step %d: batched logits differ from alone by %.3g", i, k, e)
			}
		}
		s.seq.Free()
	}
	t.Logf("worst relative error %.3g", worst)
	if u := g.KV().Usage(); u.Held != 0 {
		t.Errorf("%d blocks held after every Free", u.Held)
	}
}

// TestBatchedSpeed times decode steps of 1, 8, 32 and 64 sequences at
// ~128 positions, with split-K and without, on $GOTOK_BENCH_BATCH: a synth
// preset, Q4_0 or (preset:q4_k_m) Q4_K_M-like.
func TestBatchedSpeed(t *testing.T) {
	spec := os.Getenv("GOTOK_BENCH_BATCH")
	if spec == "" {
		t.Skip("set GOTOK_BENCH_BATCH to a synth preset (llama-1b, llama-1b:q4_k_m, ...)")
	}
	skipWithoutGPU(t)
	m := synthSpec(t, spec)
	if m == nil {
		t.Fatalf("no synth preset %q", spec)
	}
	g, err := New(m, Options{ContextLen: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bg, err := g.EnableBatching(64*512, 64)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	vocab := m.Config.VocabSize
	const steps = 32
	for _, n := range []int{1, 8, 32, 64} {
		for _, split := range []bool{true, false} {
			bg.bt.noSplitK = !split
			for k, gr := range bg.bt.graphs {
				gr.Destroy()
				delete(bg.bt.graphs, k)
			}
			st := make([]backend.SeqStep, n)
			for i := range st {
				p := randPrompt(r, 128, vocab)
				seq, _ := bg.KV().NewSeq(p)
				if err := seq.Reserve(len(p) + steps + 1); err != nil {
					t.Fatal(err)
				}
				st[i] = backend.SeqStep{Seq: seq, Tokens: p, Sample: true}
			}
			if err := bg.Step(ctx, st); err != nil {
				t.Fatal(err)
			}
			var elapsed time.Duration
			for s := 0; s <= steps; s++ {
				for i := range st {
					st[i].Tokens = []int32{st[i].Next}
				}
				start := time.Now()
				if err := bg.Step(ctx, st); err != nil {
					t.Fatal(err)
				}
				if s > 0 { // the first captures the graph
					elapsed += time.Since(start)
				}
			}
			t.Logf("%s: %2d sequences, split-K %-5v: %7.2f ms a step, %8.0f tok/s", spec, n, split,
				float64(elapsed.Microseconds())/1000/steps, float64(n*steps)/elapsed.Seconds())
			if split && os.Getenv("GOTOK_BENCH_PROFILE") != "" {
				profilePass(t, bg, n)
			}
			for i := range st {
				st[i].Seq.Free()
			}
		}
	}
}

// profilePass times each kernel kind of the decode pass of n sequences
// that the last Step ran (its inputs still in din): a graph of that
// kernel's launches alone, replayed back to back between two events, as
// profileStep does for the single-sequence step.
func profilePass(t *testing.T, b *Batched, n int) {
	c := &b.cfg
	_, _, _, oOut, _, _ := b.bt.offsets(b.pre.chunk)
	maxRows := c.NumHeads / c.NumKVHeads
	keep := b.pre.l.keep
	defer func() { b.pre.l.keep = keep }()
	counts := map[string]int{}
	var order []string
	b.pre.l.keep = func(f *cu.Function) bool {
		if counts[f.Name] == 0 {
			order = append(order, f.Name)
		}
		counts[f.Name]++
		return false
	}
	if err := b.recordPass(n, n, maxRows, n, oOut); err != nil { // counts only: nothing is launched
		t.Fatal(err)
	}
	total := 0.0
	for _, name := range order {
		b.pre.l.keep = func(f *cu.Function) bool { return f.Name == name }
		us := graphMicros(t, b.c, b.stream, func() error { return b.recordPass(n, n, maxRows, n, oOut) })
		total += us
		t.Logf("  %-28s %3d× %8.1f µs a pass (%.2f µs each)", name, counts[name], us, us/float64(counts[name]))
	}
	t.Logf("  sum %.1f µs (%d sequences)", total, n)
}
