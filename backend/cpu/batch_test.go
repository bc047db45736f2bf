package cpu

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"gotok/backend"
	"gotok/model"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/sample"
)

// TestStepMatchesAlone runs several sequences together through Step, with
// prompts of different lengths entering in chunks while others decode,
// and checks that each sequence's logits at every step are those it gets
// alone through Forward: batching changes nothing but rounding. Prompts
// sharing a prefix reuse its cached blocks.
func TestStepMatchesAlone(t *testing.T) {
	shape := synth.Shape{Layers: 2, Dim: 128, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 320, Context: 512, RopeBase: 10000, Tied: true}
	for _, typ := range []quant.Type{quant.Q8_0, quant.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			m := genModel(t, shape, typ, 7)
			vocab := m.Config.VocabSize
			r := rand.New(rand.NewPCG(3, 4))
			common := randTokens(r, 150, vocab)
			prompts := [][]int32{
				randTokens(r, 5, vocab),
				append(append([]int32(nil), common...), randTokens(r, 20, vocab)...),
				randTokens(r, 1, vocab),
				append(append([]int32(nil), common...), randTokens(r, 3, vocab)...), // shares 128 tokens' blocks
				randTokens(r, 90, vocab),
			}
			const steps = 12
			// Alone: each prompt, then greedy decoding.
			alone := make([][][]float32, len(prompts))
			solo, err := New(m, Options{ContextLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range prompts {
				l, err := solo.Forward(context.Background(), p, 0)
				if err != nil {
					t.Fatal(err)
				}
				pos := len(p)
				for range steps {
					alone[i] = append(alone[i], append([]float32(nil), l...))
					tok := sample.Argmax(l)
					if l, err = solo.Forward(context.Background(), []int32{tok}, pos); err != nil {
						t.Fatal(err)
					}
					pos++
				}
			}
			solo.Close()

			b, err := New(m, Options{ContextLen: 256, KVTokens: 1024, Threads: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			type live struct {
				seq    *backend.Seq
				prompt []int32
				fed    int
				out    [][]float32
				next   int32
			}
			seqs := make([]*live, len(prompts))
			reusedAll := 0
			for round := 0; ; round++ {
				// Sequence i joins at round i; a prompt goes in 64 tokens a step.
				var st []backend.SeqStep
				var who []*live
				for i := range seqs {
					if i > round {
						break
					}
					s := seqs[i]
					if s == nil {
						seq, reused := b.KV().NewSeq(prompts[i])
						reusedAll += reused
						s = &live{seq: seq, prompt: prompts[i], fed: reused}
						seqs[i] = s
					}
					if len(s.out) == steps {
						continue
					}
					var toks []int32
					if s.fed < len(s.prompt) {
						toks = s.prompt[s.fed:min(s.fed+64, len(s.prompt))]
						s.fed += len(toks)
					} else {
						toks = []int32{s.next}
					}
					if err := s.seq.Reserve(len(toks)); err != nil {
						t.Fatal(err)
					}
					e := backend.SeqStep{Seq: s.seq, Tokens: toks}
					if s.fed == len(s.prompt) {
						e.Logits = make([]float32, vocab)
						e.Sample = true
					}
					st = append(st, e)
					who = append(who, s)
				}
				if len(st) == 0 {
					if round >= len(seqs) {
						break
					}
					continue
				}
				if err := b.Step(context.Background(), st); err != nil {
					t.Fatal(err)
				}
				for k, e := range st {
					if e.Logits != nil {
						who[k].out = append(who[k].out, e.Logits)
						who[k].next = e.Next
						if e.Next != sample.Argmax(e.Logits) {
							t.Fatalf("greedy Next %d, argmax %d", e.Next, sample.Argmax(e.Logits))
						}
					}
				}
			}
			if reusedAll != 128 {
				t.Errorf("prefix cache reused %d tokens, want 128", reusedAll)
			}
			for i, s := range seqs {
				for k := range steps {
					want := make([]float64, vocab)
					for j, v := range alone[i][k] {
						want[j] = float64(v)
					}
					if e := relErr(s.out[k], want); !(e < 2e-3) {
						t.Errorf("sequence %d step %d: batched logits differ from alone by %.3g", i, k, e)
					}
				}
				s.seq.Free()
			}
			if u := b.KV().Usage(); u.Held != 0 {
				t.Errorf("%d blocks held after every Free", u.Held)
			}
		})
	}
}

// TestStepManyHeads runs more sequences in one Step than the head takes
// rows of a batch (maxHeadRows), each a short prompt wanting its logits,
// and checks each against the prompt alone.
func TestStepManyHeads(t *testing.T) {
	shape := synth.Shape{Layers: 2, Dim: 128, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 320, Context: 512, RopeBase: 10000, Tied: true}
	m := genModel(t, shape, quant.F32, 9)
	vocab := m.Config.VocabSize
	r := rand.New(rand.NewPCG(5, 6))
	n := maxHeadRows + 7
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = randTokens(r, 1+i/(n-2), vocab) // a token each, two the last two
	}
	b, err := New(m, Options{ContextLen: 64, KVTokens: 64 * n, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st := make([]backend.SeqStep, n)
	for i, p := range prompts {
		seq, _ := b.KV().NewSeq(nil)
		if err := seq.Reserve(len(p)); err != nil {
			t.Fatal(err)
		}
		st[i] = backend.SeqStep{Seq: seq, Tokens: p, Logits: make([]float32, vocab)}
	}
	if err := b.Step(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	solo, err := New(m, Options{ContextLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	for i, p := range prompts {
		l, err := solo.Forward(context.Background(), p, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, vocab)
		for j, v := range l {
			want[j] = float64(v)
		}
		if e := relErr(st[i].Logits, want); !(e < 2e-3) {
			t.Errorf("sequence %d of %d: logits differ from alone by %.3g", i, n, e)
		}
		st[i].Seq.Free()
	}
}

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(r.IntN(vocab))
	}
	return t
}

// TestStepErrors checks that bad steps are refused before anything runs.
func TestStepErrors(t *testing.T) {
	m := genModel(t, synth.Shape{Layers: 1, Dim: 64, Heads: 2, KVHeads: 1, FFN: 64, Vocab: 320, Context: 128, RopeBase: 10000, Tied: true}, quant.Q8_0, 1)
	b, err := New(m, Options{ContextLen: 128, KVTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seq, _ := b.KV().NewSeq([]int32{1, 2})
	fresh, _ := b.KV().NewSeq([]int32{3, 4}) // never reserves
	other, _ := backend.NewKVPool(64, kvBlock)
	foreign, _ := other.NewSeq([]int32{1})
	foreign.Reserve(1)
	cases := map[string]backend.SeqStep{
		"no sequence":  {Tokens: []int32{1}},
		"no tokens":    {Seq: seq},
		"unreserved":   {Seq: fresh, Tokens: []int32{1, 2}},
		"token range":  {Seq: seq, Tokens: []int32{320}},
		"short logits": {Seq: seq, Tokens: []int32{1}, Logits: make([]float32, 10)},
		"past context": {Seq: seq, Tokens: make([]int32, 129)},
		"another pool": {Seq: foreign, Tokens: []int32{1}, Sample: true},
	}
	for name, c := range cases {
		if c.Seq == seq {
			seq.Reserve(len(c.Tokens))
		}
		if err := b.Step(context.Background(), []backend.SeqStep{c}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestForwardAllMatchesForward checks ForwardAll's rows against Forward's
// logits a token at a time, for more tokens than a head batch takes
// (maxHeadRows) after a prefix, and its errors. With F32 weights the two
// differ only in summation order; with Q8_0 weights the batch's
// activations round differently (the prefill-vs-token tests' bound for
// quantized activations, reference_test.go: measured up to 1.6e-2 here).
func TestForwardAllMatchesForward(t *testing.T) {
	shape := synth.Shape{Layers: 2, Dim: 128, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 320, Context: 512, RopeBase: 10000, Tied: true}
	for _, tc := range []struct {
		typ   quant.Type
		bound float64
	}{{quant.F32, 1e-5}, {quant.Q8_0, 3e-2}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			testForwardAll(t, genModel(t, shape, tc.typ, 9), tc.bound)
		})
	}
}

func testForwardAll(t *testing.T, m *model.Model, bound float64) {
	vocab := m.Config.VocabSize
	r := rand.New(rand.NewPCG(5, 6))
	prefix, tokens := randTokens(r, 20, vocab), randTokens(r, 2*maxHeadRows+7, vocab)

	b, err := New(m, Options{ContextLen: 256, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var want [][]float32
	if _, err := b.Forward(context.Background(), prefix, 0); err != nil {
		t.Fatal(err)
	}
	for j, tok := range tokens {
		l, err := b.Forward(context.Background(), []int32{tok}, len(prefix)+j)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, slices.Clone(l))
	}

	out := make([]float32, len(tokens)*vocab)
	// The prefix is cached: ForwardAll forgets what followed it.
	if err := b.ForwardAll(context.Background(), tokens, len(prefix), out); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for j := range tokens {
		w := make([]float64, vocab)
		for i, v := range want[j] {
			w[i] = float64(v)
		}
		e := relErr(out[j*vocab:(j+1)*vocab], w)
		if !(e < bound) {
			t.Errorf("token %d: ForwardAll's logits differ from Forward's by %.3g", j, e)
		}
		worst = max(worst, e)
	}
	t.Logf("worst relative error %.3g over %d tokens", worst, len(tokens))
	// The sequence goes on from where ForwardAll left it.
	l, err := b.Forward(context.Background(), tokens[:1], len(prefix)+len(tokens))
	if err != nil || len(l) != vocab {
		t.Fatalf("Forward after ForwardAll: %v", err)
	}

	if err := b.ForwardAll(context.Background(), tokens, 0, out[:vocab]); err == nil {
		t.Error("ForwardAll with room for one row of logits: no error")
	}
	if err := b.ForwardAll(context.Background(), tokens[:2], 1000, out); err == nil {
		t.Error("ForwardAll past the cached positions: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.ForwardAll(ctx, tokens, 0, out); err == nil {
		t.Error("ForwardAll with a cancelled context: no error")
	}
}
