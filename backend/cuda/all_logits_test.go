package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gotok/backend"
	"gotok/model"
	"gotok/model/synth"
	"gotok/quant"
)

// TestPlanPasses checks how a batched step is cut into passes (no GPU):
// every entry's tokens in order, each pass within the chunk, the head
// rows and the rows of every token's logits, head rows only for the last
// token of an entry that wants them and never for one that wants every
// token's logits (whose last row gives them), and a pass closed only
// when the next part would not fit it.
func TestPlanPasses(t *testing.T) {
	toks := func(n int) []int32 { return make([]int32, n) }
	logits := []float32{}
	for _, tc := range []struct {
		name                  string
		steps                 []backend.SeqStep
		chunk, maxOut, allMax int
		want                  [][]passEntry
	}{
		{"decodes", []backend.SeqStep{{Tokens: toks(1), Sample: true}, {Tokens: toks(1), Logits: logits}, {Tokens: toks(1), Sample: true}},
			512, 2, 64, [][]passEntry{{{0, 0, 1, true, false}, {1, 0, 1, true, false}}, {{2, 0, 1, true, false}}}},
		{"prompt past the chunk", []backend.SeqStep{{Tokens: toks(10), Sample: true}, {Tokens: toks(1), Sample: true}},
			4, 4, 64, [][]passEntry{{{0, 0, 4, false, false}}, {{0, 4, 4, false, false}}, {{0, 8, 2, true, false}, {1, 0, 1, true, false}}}},
		{"every token's logits in pieces", []backend.SeqStep{
			{Tokens: toks(100), AllLogits: logits, Logits: logits},
			{Tokens: toks(30), Sample: true},
			{Tokens: toks(50), AllLogits: logits, Sample: true},
			{Tokens: toks(1), Sample: true},
		}, 512, 4, 64, [][]passEntry{
			{{0, 0, 64, false, true}},
			{{0, 64, 36, false, true}, {1, 0, 30, true, false}, {2, 0, 28, false, true}},
			{{2, 28, 22, false, true}, {3, 0, 1, true, false}},
		}},
		{"every token's logits past the chunk", []backend.SeqStep{{Tokens: toks(10), AllLogits: logits}, {Tokens: toks(3), AllLogits: logits}},
			4, 1, 6, [][]passEntry{{{0, 0, 4, false, true}}, {{0, 4, 4, false, true}}, {{0, 8, 2, false, true}, {1, 0, 2, false, true}},
				{{1, 2, 1, false, true}}}},
		{"every token's logits past the head rows", []backend.SeqStep{{Tokens: toks(10), AllLogits: logits}, {Tokens: toks(3), AllLogits: logits}},
			8, 1, 6, [][]passEntry{{{0, 0, 6, false, true}}, {{0, 6, 4, false, true}, {1, 0, 2, false, true}}, {{1, 2, 1, false, true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planPasses(tc.steps, tc.chunk, tc.maxOut, tc.allMax)
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("passes %v, want %v", got, tc.want)
			}
			checkPasses(t, tc.steps, got, tc.chunk, tc.maxOut, tc.allMax)
		})
	}
	// Random steps: the rules hold.
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		steps := make([]backend.SeqStep, 1+r.IntN(6))
		for i := range steps {
			st := &steps[i]
			st.Tokens = toks(1 + r.IntN(150))
			st.Sample = r.IntN(2) == 0
			if r.IntN(3) == 0 {
				st.Logits = logits
			}
			if r.IntN(3) == 0 {
				st.AllLogits = logits
			}
		}
		chunk, maxOut, allMax := 1+r.IntN(128), 1+r.IntN(4), 1+r.IntN(64)
		checkPasses(t, steps, planPasses(steps, chunk, maxOut, allMax), chunk, maxOut, allMax)
	}
}

func checkPasses(t *testing.T, steps []backend.SeqStep, passes [][]passEntry, chunk, maxOut, allMax int) {
	t.Helper()
	next := make([]int, len(steps)) // each entry's next token to place
	entry := 0
	for pi, pass := range passes {
		if len(pass) == 0 {
			t.Fatalf("pass %d is empty", pi)
		}
		n, outs, alls := 0, 0, 0
		for _, pe := range pass {
			st := &steps[pe.entry]
			if pe.entry < entry || pe.from != next[pe.entry] || pe.n <= 0 || pe.from+pe.n > len(st.Tokens) {
				t.Fatalf("pass %d: part %+v out of order (entry %d, next token %d of %d)", pi, pe, entry, next[pe.entry], len(st.Tokens))
			}
			entry, next[pe.entry] = pe.entry, pe.from+pe.n
			last := pe.from+pe.n == len(st.Tokens)
			all := st.AllLogits != nil
			if wantOut := !all && last && (st.Sample || st.Logits != nil); pe.out != wantOut || pe.all != all {
				t.Fatalf("pass %d: part %+v of an entry with Sample %v, Logits %v, AllLogits %v", pi, pe, st.Sample, st.Logits != nil, all)
			}
			n += pe.n
			if pe.out {
				outs++
			}
			if pe.all {
				alls += pe.n
			}
		}
		if n > chunk || outs > maxOut || alls > allMax {
			t.Fatalf("pass %d: %d tokens (chunk %d), %d head rows (%d), %d rows of every token's logits (%d)", pi, n, chunk, outs, maxOut, alls, allMax)
		}
		if pi+1 < len(passes) {
			// A pass closes when the next part cannot join it: no room for
			// a token, or a part that would take a head row with none left.
			pe := passes[pi+1][0]
			st := &steps[pe.entry]
			k := min(len(st.Tokens)-pe.from, chunk-n)
			if pe.all {
				k = min(k, allMax-alls)
			}
			wantsOut := !pe.all && pe.from+k == len(st.Tokens) && (st.Sample || st.Logits != nil)
			if k > 0 && !(wantsOut && outs == maxOut) {
				t.Fatalf("pass %d closed with %d tokens, %d head rows, %d rows of every token's logits, while %+v (of %d tokens) could join it",
					pi, n, outs, alls, pe, len(st.Tokens))
			}
		}
	}
	for i, st := range steps {
		if next[i] != len(st.Tokens) {
			t.Fatalf("entry %d: %d of %d tokens placed", i, next[i], len(st.Tokens))
		}
	}
}

// forwardAllTol bounds ForwardAll's rows against the decode graph's
// logits: the batched prefill's arithmetic (prefillLogitsTol), and the
// head too a gemm on f16 activations, as the batched step's is.
const forwardAllTol = prefillLogitsTol

// stepLogits runs tokens from position 0 through the decode graph a token
// at a time and returns each position's logits.
func stepLogits(t *testing.T, g *Backend, tokens []int32) [][]float32 {
	t.Helper()
	out := make([][]float32, len(tokens))
	for i, tok := range tokens {
		if _, err := g.step(tok, i); err != nil {
			t.Fatal(err)
		}
		l, err := g.readLogits(i)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = l
	}
	return out
}

// compareRows checks rows of vocab logits (got, from position pos0) with
// want's rows at the same positions.
func compareRows(t *testing.T, what string, got []float32, pos0, vocab int, want [][]float32, tol float64) float64 {
	t.Helper()
	worst := 0.0
	for j := range len(got) / vocab {
		e := relErr(got[j*vocab:(j+1)*vocab], f64s(want[pos0+j]))
		if !(e <= tol) {
			t.Errorf("%s: position %d: logits relative error %.3g (bound %.0e)", what, pos0+j, e, tol)
			return e
		}
		worst = max(worst, e)
	}
	return worst
}

// TestForwardAll runs ForwardAll against the decode graph a token at a
// time: a prompt in one call (100 tokens: in prefill chunks of 64 and 36,
// or in one chunk whose rows go through the head 64 and 36 at a time), a
// continuation after a Prefill, and inputs of one and two tokens (the
// decode steps); models with a logit multiplier (Granite) and a final
// soft-cap (Gemma 2, Gemma 3), and a Q6_K head (a typed gemm). After each
// call the backend must be where Prefill leaves it: the last position's
// logits readable, and the next token's logits those of the decode graph
// after the same tokens.
func TestForwardAll(t *testing.T) {
	skipWithoutGPU(t)
	tiny, t256 := synth.Presets["tiny"], synth.Presets["test-256"]
	arch := func(s synth.Shape, a string) synth.Shape {
		s.Arch = a
		return s
	}
	opts := func(s synth.Shape, typ quant.Type) synth.Options {
		return synth.Options{Shape: s, Type: typ, EmbedType: synth.DefaultEmbedType(typ), Seed: 5}
	}
	for _, tc := range []struct {
		name  string
		o     synth.Options
		chunk int
	}{
		{"tiny q8_0 chunks of 64", opts(tiny, quant.Q8_0), 64},
		{"tiny q8_0 one chunk", opts(tiny, quant.Q8_0), 512},
		{"hd64 q4_0 untied", opts(synth.Shape{Layers: 2, Dim: 256, Heads: 4, KVHeads: 1, FFN: 320, Vocab: 512, Context: 1024,
			RopeBase: 10000}, quant.Q4_0), 64},
		{"granite q8_0", opts(arch(tiny, "granite"), quant.Q8_0), 64},
		{"gemma2 f16", opts(arch(tiny, "gemma2"), quant.F16), 512},
		{"gemma3 q8_0", opts(arch(tiny, "gemma3"), quant.Q8_0), 64},
		{"test-256 q4_0 + q6_k head", q4_0Like(t256, 5), 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := genModelWith(t, tc.o)
			g, err := New(m, Options{ContextLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if g.pre == nil || !g.headGemm() {
				t.Fatalf("no batched prefill with the head's gemm: %q", g.prefillUnsupported())
			}
			g.pre.chunk = min(tc.chunk, g.pre.chunk)
			forwardAllVsSteps(t, g, m)
		})
	}
}

func forwardAllVsSteps(t *testing.T, g *Backend, m *model.Model) {
	t.Helper()
	ctx := context.Background()
	vocab := m.Config.VocabSize
	r := rand.New(rand.NewPCG(8, 9))
	const n = 100
	prompt := randPrompt(r, n+1, vocab) // the last one probes the cache after n
	want := stepLogits(t, g, prompt)
	out := make([]float32, n*vocab)
	worst := 0.0
	for _, tc := range []struct {
		prefill, from, to int // Prefill [0, prefill), then ForwardAll [from, to)
	}{
		{0, 0, n},    // one call, two pieces
		{30, 30, n},  // after a Prefill
		{0, 0, 1},    // one token: a decode step
		{40, 40, 42}, // two: decode steps
		{0, 0, 64},   // one piece exactly
		{0, 0, 3},    // the shortest batched call
	} {
		what := fmt.Sprintf("ForwardAll of [%d,%d)", tc.from, tc.to)
		if tc.prefill > 0 {
			what += fmt.Sprintf(" after Prefill of %d", tc.prefill)
			if _, err := g.Prefill(ctx, prompt[:tc.prefill], 0, nil); err != nil {
				t.Fatal(err)
			}
		}
		for i := range out {
			out[i] = float32(math.NaN()) // poisoned: a row not written fails
		}
		rows := out[:(tc.to-tc.from)*vocab]
		if err := g.ForwardAll(ctx, prompt[tc.from:tc.to], tc.from, rows); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		worst = max(worst, compareRows(t, what, rows, tc.from, vocab, want, forwardAllTol))
		last, err := g.readLogits(tc.to - 1)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !sameBits(last, rows[len(rows)-vocab:]) {
			t.Errorf("%s: the logits readLogits gives for the last position are not its row", what)
		}
		next, err := g.Logits(ctx, prompt[tc.to], tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(next, f64s(want[tc.to])); !(e <= forwardAllTol) {
			t.Errorf("%s: the next position's logits differ from the decode graph's by %.3g", what, e)
		}
	}
	t.Logf("worst relative error %.3g (bound %.0e)", worst, forwardAllTol)
}

// TestForwardAllSteps checks ForwardAll where it runs decode steps: a
// model the batched prefill cannot run (F32), whose rows must be the
// decode graph's, and the errors it returns before any work.
func TestForwardAllSteps(t *testing.T) {
	skipWithoutGPU(t)
	ctx := context.Background()
	m := genModel(t, synth.Presets["tiny"], quant.F32, 4)
	g, err := New(m, Options{ContextLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.pre != nil {
		t.Fatal("an F32 model takes the batched prefill: this test wants one that does not")
	}
	vocab := m.Config.VocabSize
	prompt := randPrompt(rand.New(rand.NewPCG(1, 1)), 20, vocab)
	want := stepLogits(t, g, prompt)
	out := make([]float32, len(prompt)*vocab)
	if err := g.ForwardAll(ctx, prompt, 0, out); err != nil {
		t.Fatal(err)
	}
	compareRows(t, "ForwardAll by decode steps", out, 0, vocab, want, 1e-6)
	for _, tc := range []struct {
		what   string
		tokens []int32
		pos    int
		out    []float32
	}{
		{"a short buffer", prompt, 0, out[:len(out)-1]},
		{"no tokens", nil, 0, out},
		{"past the context", prompt, 50, out},
		{"a token out of range", []int32{int32(vocab)}, 0, out},
	} {
		if err := g.ForwardAll(ctx, tc.tokens, tc.pos, tc.out); err == nil {
			t.Errorf("%s: no error", tc.what)
		}
	}
}

// TestBatchedStepAllLogits runs batched steps whose entries want every
// token's logits beside entries that sample or want the last logits:
// prompts of 100 and 50 tokens that span passes (64 rows of the head
// buffer a pass), single tokens, and steps of one entry (the resident
// sequence's path, ForwardAll). Every row must match the same sequence
// run alone through the decode graph, and the last-token outputs of an
// entry that wants every row must be its last row's.
func TestBatchedStepAllLogits(t *testing.T) {
	skipWithoutGPU(t)
	tiny := synth.Presets["tiny"]
	for _, tc := range []struct {
		name string
		arch string
		typ  quant.Type
	}{{"tiny q8_0", "", quant.Q8_0}, {"granite q8_0", "granite", quant.Q8_0}, {"gemma2 q8_0", "gemma2", quant.Q8_0}} {
		t.Run(tc.name, func(t *testing.T) {
			shape := tiny
			shape.Arch = tc.arch
			m := genModelWith(t, synth.Options{Shape: shape, Type: tc.typ, EmbedType: tc.typ, Seed: 6})
			g, err := New(m, Options{ContextLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			bg, err := g.EnableBatching(2048, 4)
			if err != nil {
				t.Fatal(err)
			}
			batchedAllVsAlone(t, bg, m.Config.VocabSize)
		})
	}
}

// scoredSeq is a sequence of TestBatchedStepAllLogits: what went in, and
// the logits the steps gave by position.
type scoredSeq struct {
	seq  *backend.Seq
	fed  []int32
	rows map[int][]float32
}

func batchedAllVsAlone(t *testing.T, g *Batched, vocab int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(10, 11))
	seqs := make([]*scoredSeq, 3)
	for i := range seqs {
		seq, _ := g.KV().NewSeq(nil)
		seqs[i] = &scoredSeq{seq: seq, rows: map[int][]float32{}}
	}
	// entry is sequence i's next entry: n tokens (0: its last token's
	// choice, one token), every row (all) or the last one's, sampled
	// greedily.
	type entry struct {
		i, n int
		all  bool
	}
	rounds := [][]entry{
		{{0, 100, true}, {1, 30, false}, {2, 50, true}},
		{{0, 0, true}, {1, 0, false}, {2, 3, true}},
		{{0, 5, true}}, // alone: ForwardAll, batched
		{{0, 0, true}}, // alone: ForwardAll, a decode step
		{{0, 0, false}, {1, 0, true}, {2, 0, false}},
		{{1, 0, true}, {2, 70, true}},
	}
	next := make([]int32, len(seqs))
	for ri, round := range rounds {
		steps := make([]backend.SeqStep, len(round))
		pos0 := make([]int, len(round))
		for k, e := range round {
			s := seqs[e.i]
			toks := []int32{next[e.i]}
			if e.n > 0 {
				toks = randPrompt(r, e.n, vocab)
			}
			if err := s.seq.Reserve(len(toks)); err != nil {
				t.Fatal(err)
			}
			st := backend.SeqStep{Seq: s.seq, Tokens: toks, Sample: true, Logits: make([]float32, vocab)}
			if e.all {
				st.AllLogits = make([]float32, len(toks)*vocab)
			}
			steps[k], pos0[k] = st, s.seq.Len()
			s.fed = append(s.fed, toks...)
		}
		if err := g.Step(ctx, steps); err != nil {
			t.Fatalf("round %d: %v", ri, err)
		}
		for k, e := range round {
			st, s := &steps[k], seqs[e.i]
			n := len(st.Tokens)
			if st.AllLogits != nil {
				for j := range n {
					s.rows[pos0[k]+j] = st.AllLogits[j*vocab : (j+1)*vocab]
				}
				if last := st.AllLogits[(n-1)*vocab:]; !sameBits(st.Logits, last) {
					t.Errorf("round %d, sequence %d: Logits are not the last of its every token's logits", ri, e.i)
				}
			} else {
				s.rows[pos0[k]+n-1] = st.Logits
			}
			if want := int32(refArgmax(st.Logits)); st.Next != want {
				t.Errorf("round %d, sequence %d: greedy choice %d, the argmax of its logits %d", ri, e.i, st.Next, want)
			}
			next[e.i] = st.Next
		}
	}
	worst := 0.0
	for i, s := range seqs {
		if s.seq.Len() != len(s.fed) {
			t.Errorf("sequence %d: %d positions committed, %d tokens fed", i, s.seq.Len(), len(s.fed))
		}
		for p, tok := range s.fed {
			l, err := g.Logits(ctx, tok, p)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := s.rows[p]
			if !ok {
				continue
			}
			e := relErr(got, f64s(l))
			worst = max(worst, e)
			if !(e <= forwardAllTol) {
				t.Errorf("sequence %d, position %d: batched logits differ from alone by %.3g", i, p, e)
			}
		}
		s.seq.Free()
	}
	t.Logf("worst relative error %.3g (bound %.0e)", worst, forwardAllTol)
}
