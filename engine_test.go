package gotok

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"gotok/backend"
	"gotok/backend/cuda/cu"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/sample"
)

// loadStoriesWith loads stories260K on the CPU with o; with an f32 KV
// cache unless o names one, for the tests that compare batched runs with
// runs alone to float32 rounding (compareRuns): on the f16 cache a key or
// value now and then rounds to neighbouring float16 values on one path
// only (TestEngineBatchesF16Cache).
func loadStoriesWith(t *testing.T, o Options) *Model {
	t.Helper()
	o.Device = "cpu"
	if o.KVType == "" {
		o.KVType = "f32"
	}
	m, err := Load(filepath.Join(sharedDir(t), "models", "stories260K.gguf"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var enginePrompts = []string{
	"Once upon a time",
	"Lily and Ben went to the park. They saw a big dog",
	"The cat",
	"One day, a little bird flew over the sea and saw a boat with a red sail. The bird",
	"Tom had a ball",
	"Once upon a time, there was a little girl named Lily. She loved to play",
	"Sue",
	"The sun was hot and the children wanted to swim in the lake near the old tree",
}

// engineCase is a generation's options for enginePrompts[i]: greedy,
// sampled with a seed, or with penalties, so that each generation's
// sampler state must stay its own.
func engineCase(i int) GenerateOptions {
	o := GenerateOptions{MaxTokens: 40, TopLogprobs: 1}
	switch i % 3 {
	case 1:
		o.Sample = sample.Params{Temperature: 0.9, TopK: 40, Seed: uint64(i + 1)}
		o.Logprobs, o.TopLogprobs = false, 0 // sampled by the backend
	case 2:
		o.Sample = sample.Params{RepeatPenalty: 1.3, PenaltyLastN: 16}
	}
	return o
}

type engineRun struct {
	tokens []Token
	st     Stats
	err    error
}

func runEngineCase(ctx context.Context, m *Model, i int) engineRun {
	return runEngineCaseGated(ctx, m, i, nil)
}

// runEngineCaseGated is runEngineCase whose reader, given its first token,
// calls gate before it takes any more.
func runEngineCaseGated(ctx context.Context, m *Model, i int, gate func()) engineRun {
	return runPromptGated(ctx, m, i, engineCase(i), gate)
}

// runPrompt runs enginePrompts[i] on m with options o.
func runPrompt(m *Model, i int, o GenerateOptions) engineRun {
	return runPromptGated(context.Background(), m, i, o, nil)
}

// runPromptGated is runPrompt whose reader, given its first token, calls
// gate (if set) before it takes any more.
func runPromptGated(ctx context.Context, m *Model, i int, o GenerateOptions, gate func()) engineRun {
	var r engineRun
	r.st, r.err = m.GenerateTokens(ctx, m.PromptTokens(enginePrompts[i], o), o, func(t Token) error {
		if len(r.tokens) == 0 && gate != nil {
			gate()
		}
		r.tokens = append(r.tokens, t)
		return nil
	})
	return r
}

// compareRuns checks that a batched run gave what the same generation gives
// alone: the same tokens, and log-probabilities within rounding of each
// other (batching changes the order of the sums, nothing else).
func compareRuns(t *testing.T, name string, got, want engineRun) {
	t.Helper()
	if got.err != nil || want.err != nil {
		t.Fatalf("%s: errors %v, %v", name, got.err, want.err)
	}
	if len(got.tokens) != len(want.tokens) {
		t.Fatalf("%s: %d tokens batched, %d alone", name, len(got.tokens), len(want.tokens))
	}
	for k := range got.tokens {
		g, w := got.tokens[k], want.tokens[k]
		if g.ID != w.ID || g.Text != w.Text {
			t.Fatalf("%s: token %d is %d %q batched, %d %q alone", name, k, g.ID, g.Text, w.ID, w.Text)
		}
		// Float32 logits of a few hundred terms: 1e-4 is ~100 ulps.
		if d := math.Abs(float64(g.Logprob - w.Logprob)); d > 1e-4 {
			t.Errorf("%s: token %d log-probability %.6f batched, %.6f alone", name, k, g.Logprob, w.Logprob)
		}
	}
	if got.st.GeneratedTokens != want.st.GeneratedTokens || got.st.StopReason != want.st.StopReason {
		t.Errorf("%s: stats %+v batched, %+v alone", name, got.st, want.st)
	}
}

// TestEngineBatchesLikeAlone runs generations concurrently, so that the
// engine batches them (prompts read while others decode), and checks each
// against the same generation run alone on a fresh model.
// With an f32 KV cache (loadStoriesWith), for compareRuns' bound.
func TestEngineBatchesLikeAlone(t *testing.T) {
	alone := make([]engineRun, len(enginePrompts))
	for i := range enginePrompts {
		alone[i] = runEngineCase(context.Background(), loadStoriesWith(t, Options{ContextLen: 128}), i)
	}
	for _, o := range []Options{
		{ContextLen: 128, KVTokens: 8 * 128},
		// Room for about three: sequences are preempted and recomputed.
		{ContextLen: 128, KVTokens: 200},
		// Two at a time.
		{ContextLen: 128, KVTokens: 8 * 128, Sequences: 2},
	} {
		t.Run(fmt.Sprintf("kv %d seqs %d", o.KVTokens, o.Sequences), func(t *testing.T) {
			m := loadStoriesWith(t, o)
			got := make([]engineRun, len(enginePrompts))
			// With the small pool each reader, after its first token,
			// takes no more until the engine has preempted (or a few
			// seconds): its generation decodes into its buffer and sits
			// out, holding its slot and blocks, so the engine must
			// preempt for the requests behind, whatever the goroutines'
			// start times. Generations that ran in turn took none: the
			// check below failed on a loaded machine.
			var gate func()
			if o.KVTokens == 200 {
				gate = func() {
					for end := time.Now().Add(10 * time.Second); m.EngineStats().Preemptions == 0 && time.Now().Before(end); {
						time.Sleep(time.Millisecond)
					}
				}
			}
			var wg sync.WaitGroup
			for i := range enginePrompts {
				wg.Go(func() { got[i] = runEngineCaseGated(context.Background(), m, i, gate) })
			}
			wg.Wait()
			for i := range got {
				compareRuns(t, fmt.Sprintf("prompt %d", i), got[i], alone[i])
			}
			st := m.EngineStats()
			if st.KVBlocksUsed != 0 || st.Running != 0 || st.Waiting != 0 {
				t.Errorf("after every generation: %+v", st)
			}
			if o.KVTokens == 200 && st.Preemptions == 0 {
				t.Errorf("a pool of 200 tokens for %d generations preempted none", len(enginePrompts))
			}
			// Preempted requests whose readers were behind used to be
			// admitted again at once, pushing out another: thousands of
			// preemptions while the readers waited.
			if st.Preemptions > int64(8*len(enginePrompts)) {
				t.Errorf("%d preemptions for %d generations: the engine thrashes", st.Preemptions, len(enginePrompts))
			}
			t.Logf("%+v", st)
		})
	}
}

// TestEngineBatchesF16Cache is TestEngineBatchesLikeAlone's greedy cases
// on the default f16 KV cache. A batched step and a step alone compute K
// and V with sums in other orders; a few elements a layer then round to
// neighbouring float16 values (a 1e-3 change of those), which moves the
// log-probabilities a little: here at most 1.2e-3 over 30 runs (5.3e-3
// with TestEngineBatchesLikeAlone's preemptions and penalties on this
// cache). The bound is 2e-2, and a token may differ only where the run
// alone had it within that of its best (a near-tie, after which the texts
// part): a wrong batch gives errors of order one.
func TestEngineBatchesF16Cache(t *testing.T) {
	o := GenerateOptions{MaxTokens: 40, Logprobs: true, TopLogprobs: 2}
	alone := make([]engineRun, len(enginePrompts))
	for i := range enginePrompts {
		alone[i] = runPrompt(loadStoriesWith(t, Options{ContextLen: 128, KVType: "f16"}), i, o)
	}
	m := loadStoriesWith(t, Options{ContextLen: 128, KVTokens: 8 * 128, KVType: "f16"})
	worst := compareUpToTie(t, runTogether(m, o), alone, 2e-2)
	t.Logf("worst log-probability difference %.3g (bound 2e-2)", worst)
	if st := m.EngineStats(); st.KVBlocksUsed != 0 || st.Steps == 0 {
		t.Errorf("engine after the run: %+v", st)
	}
}

// runTogether runs every enginePrompt on m at once, so that the engine
// batches them.
func runTogether(m *Model, o GenerateOptions) []engineRun {
	got := make([]engineRun, len(enginePrompts))
	var wg sync.WaitGroup
	for i := range enginePrompts {
		wg.Go(func() { got[i] = runPrompt(m, i, o) })
	}
	wg.Wait()
	return got
}

// compareUpToTie checks greedy runs batched (got) against the same runs
// alone (want): the same tokens with log-probabilities within bound, up
// to where a text parts, which it may only at a near-tie (the batched
// token one of the run alone's best, within bound of its first; the runs
// need TopLogprobs 2 or more); texts that do not part end alike. It
// returns the largest difference of log-probabilities it saw.
func compareUpToTie(t *testing.T, got, want []engineRun, bound float64) float64 {
	t.Helper()
	worst := 0.0
	for i := range got {
		if got[i].err != nil || want[i].err != nil {
			t.Fatalf("prompt %d: %v, %v", i, got[i].err, want[i].err)
		}
		parted := false
		for k := 0; k < len(got[i].tokens) && k < len(want[i].tokens); k++ {
			g, w := got[i].tokens[k], want[i].tokens[k]
			if g.ID == w.ID {
				d := math.Abs(float64(g.Logprob - w.Logprob))
				if g.ID >= 0 {
					worst = max(worst, d)
				}
				if g.ID >= 0 && d > bound {
					t.Errorf("prompt %d token %d: log-probability %.4f batched, %.4f alone", i, k, g.Logprob, w.Logprob)
				}
				continue
			}
			near := false // g is one of the run alone's best, within bound of its first
			for _, c := range w.Top {
				near = near || c.ID == g.ID && len(w.Top) > 1 && w.Top[0].Logprob-c.Logprob <= float32(bound)
			}
			if !near {
				t.Errorf("prompt %d: token %d is %d batched, %d alone, and alone its top two are %+v", i, k, g.ID, w.ID, w.Top)
			} else {
				t.Logf("prompt %d: parts at token %d, a near tie (%+v)", i, k, w.Top)
			}
			parted = true
			break
		}
		if g, w := got[i], want[i]; !parted && (len(g.tokens) != len(w.tokens) || g.st.StopReason != w.st.StopReason) {
			t.Errorf("prompt %d: %d tokens (%s) batched, %d (%s) alone", i, len(g.tokens), g.st.StopReason, len(w.tokens), w.st.StopReason)
		}
	}
	return worst
}

// TestEngineCancelAndSlowReader cancels one generation mid-way and holds
// another's reader back: the others finish as they would alone, and
// nothing stays in the KV cache.

func TestEngineCancelAndSlowReader(t *testing.T) {
	m := loadStoriesWith(t, Options{ContextLen: 128, KVTokens: 8 * 128})
	want := runEngineCase(context.Background(), loadStoriesWith(t, Options{ContextLen: 128}), 0)

	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var wg sync.WaitGroup
	var cancelled, slow engineRun
	wg.Go(func() {
		n := 0
		o := GenerateOptions{IgnoreEOS: true}
		cancelled.st, cancelled.err = m.GenerateTokens(ctx, m.PromptTokens("The cat", o), o, func(Token) error {
			if n++; n == 5 {
				cancel()
			}
			return nil
		})
	})
	wg.Go(func() {
		o := GenerateOptions{MaxTokens: 30}
		first := true
		slow.st, slow.err = m.GenerateTokens(context.Background(), m.PromptTokens("Sue", o), o, func(Token) error {
			if first {
				first = false
				<-release // the reader stalls; the engine must not
			}
			return nil
		})
	})
	fast := runEngineCase(context.Background(), m, 0)
	close(release)
	wg.Wait()
	compareRuns(t, "beside a slow reader", fast, want)
	if !errors.Is(cancelled.err, context.Canceled) || cancelled.st.StopReason != StopCancelled {
		t.Errorf("cancelled: %v, %+v", cancelled.err, cancelled.st)
	}
	if slow.err != nil || slow.st.GeneratedTokens == 0 {
		t.Errorf("slow reader: %v, %+v", slow.err, slow.st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.EngineStats().KVBlocksUsed != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := m.EngineStats(); st.KVBlocksUsed != 0 {
		t.Errorf("KV blocks still held: %+v", st)
	}
}

// TestEngineEmitError stops a generation whose emit fails, with that error.
func TestEngineEmitError(t *testing.T) {
	m := loadStoriesWith(t, Options{ContextLen: 64})
	boom := errors.New("client went away")
	n := 0
	st, err := m.GenerateTokens(context.Background(), m.PromptTokens("Once", GenerateOptions{}), GenerateOptions{IgnoreEOS: true}, func(Token) error {
		if n++; n == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || st.GeneratedTokens < 3 {
		t.Errorf("%v, %+v", err, st)
	}
	// The model serves the next one.
	if r := runEngineCase(context.Background(), m, 2); r.err != nil {
		t.Error(r.err)
	}
}

// TestEngineClose ends running generations with an error and refuses new
// ones.
func TestEngineClose(t *testing.T) {
	m := loadStoriesWith(t, Options{ContextLen: 512})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		once := sync.Once{}
		_, err := m.GenerateTokens(context.Background(), m.PromptTokens("Once", GenerateOptions{}), GenerateOptions{IgnoreEOS: true}, func(Token) error {
			once.Do(func() { close(started) })
			time.Sleep(time.Millisecond)
			return nil
		})
		done <- err
	}()
	<-started
	m.Close()
	if err := <-done; err == nil {
		t.Error("generation outlived Close without an error")
	}
	if _, err := m.GenerateTokens(context.Background(), []int32{1}, GenerateOptions{}, func(Token) error { return nil }); err == nil {
		t.Error("generation after Close")
	}
}

// TestEnginePromptLogprobs scores prompts while generations run: the
// scores are those of a model doing nothing else, and a pool too small
// for everything at once makes the scoring wait, not fail.
func TestEnginePromptLogprobs(t *testing.T) {
	ref := loadStoriesWith(t, Options{ContextLen: 128})
	p := ref.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.", GenerateOptions{})
	want, err := ref.PromptLogprobs(context.Background(), p, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []int{8 * 128, 160} {
		m := loadStoriesWith(t, Options{ContextLen: 128, KVTokens: kv})
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				if r := runEngineCase(context.Background(), m, i); r.err != nil {
					t.Error(r.err)
				}
			})
		}
		got, err := m.PromptLogprobs(context.Background(), p, 2)
		wg.Wait()
		if err != nil {
			t.Fatalf("kv %d: %v", kv, err)
		}
		if len(got) != len(want) {
			t.Fatalf("kv %d: %d scores, want %d", kv, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || math.Abs(float64(got[i].Logprob-want[i].Logprob)) > 1e-4 || len(got[i].Top) != 2 || got[i].Top[0].ID != want[i].Top[0].ID {
				t.Fatalf("kv %d: score %d is %+v, alone %+v", kv, i, got[i], want[i])
			}
		}
		if st := m.EngineStats(); st.KVBlocksUsed != 0 {
			t.Errorf("kv %d: %d blocks held afterwards", kv, st.KVBlocksUsed)
		}
	}
}

// cudaPair loads one synth model (tiny, Q8_0, seed) on the GPU twice:
// alone runs one sequence at a time (the decode graphs), batched four
// (batched steps). stories260K's heads of 8 have no batched kernels; the
// synth model's are 16 wide. It skips the test without a GPU.
func cudaPair(t *testing.T, seed uint64, ctx int) (alone, batched *Model) {
	t.Helper()
	if err := cu.Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	w, err := synth.Generate(synth.Options{Shape: synth.Presets["tiny"], Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	load := func(seqs int) *Model {
		m, err := Load(path, Options{Device: "cuda", ContextLen: ctx, Sequences: seqs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	alone, batched = load(1), load(4)
	if !batched.Batches() || alone.Batches() {
		t.Fatalf("Batches: %v with 4 sequences, %v with 1", batched.Batches(), alone.Batches())
	}
	return alone, batched
}

// TestEngineCUDA runs the enginePrompts together on the GPU (batched
// steps, a synth model) and compares each with the same generation on a GPU model that
// runs one at a time (the decode graphs). The batched step computes in
// f16 where the graphs keep f32 (backend/cuda TestBatchedStep bounds the
// logits' relative error by 0.02), so greedy texts may part where the top
// two tokens are within that of each other: the test allows a parting
// only where the alone run's top two log-probabilities are within 0.05,
// and compares up to it.
func TestEngineCUDA(t *testing.T) {
	alone, batched := cudaPair(t, 3, 128)
	greedy := GenerateOptions{MaxTokens: 40, TopLogprobs: 2}
	want := make([]engineRun, len(enginePrompts))
	for i := range enginePrompts {
		want[i] = runPrompt(alone, i, greedy)
	}
	compareUpToTie(t, runTogether(batched, greedy), want, 0.05)
	if st := batched.EngineStats(); st.KVBlocksUsed != 0 || st.Steps == 0 {
		t.Errorf("engine after the run: %+v", st)
	}
}

// TestPromptLogprobsCUDA scores prompts on the GPU engine, whose steps
// take 64 of a prompt's tokens with every one's logits (SeqStep.AllLogits:
// the batched step's head on all their rows), two prompts at once, and
// compares each log-probability with the model that runs alone and scores
// a token at a time through the decode graph: within 0.05, the bound
// TestEngineCUDA allows the batched step's f16 arithmetic.
func TestPromptLogprobsCUDA(t *testing.T) {
	alone, batched := cudaPair(t, 4, 256)
	vocab := batched.Config().VocabSize
	prompts := make([][]int32, 2)
	for i, n := range []int{150, 70} {
		prompts[i] = make([]int32, n)
		for j := range prompts[i] {
			prompts[i][j] = int32((j*7919 + i*31 + 1) % vocab)
		}
	}
	ctx := context.Background()
	got := make([][]Token, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Go(func() { got[i], errs[i] = batched.PromptLogprobs(ctx, prompts[i], 2) })
	}
	wg.Wait()
	for i, p := range prompts {
		if errs[i] != nil {
			t.Fatalf("prompt %d: %v", i, errs[i])
		}
		want, err := alone.PromptLogprobs(ctx, p, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got[i]) != len(want) {
			t.Fatalf("prompt %d: %d tokens scored, %d alone", i, len(got[i]), len(want))
		}
		worst := 0.0
		for k := range want {
			g, w := got[i][k], want[k]
			d := math.Abs(float64(g.Logprob - w.Logprob))
			if g.ID != w.ID || !(d <= 0.05) {
				t.Errorf("prompt %d token %d: id %d log-probability %.4f batched, id %d %.4f alone", i, k, g.ID, g.Logprob, w.ID, w.Logprob)
			}
			worst = max(worst, d)
		}
		t.Logf("prompt %d: %d tokens scored, log-probabilities within %.3g of the model alone", i, len(want), worst)
	}
}

// TestEngineStalledReaderYields: a generation whose reader stalls gives
// its KV room up to a request that needs it, and finishes as it would
// alone once its reader takes tokens again.
// TestEngineStalledReaderGivesSlot: with one sequence slot, a caller that
// stops reading gives the slot up to the next request, which runs to the
// end meanwhile; the stalled generation then resumes (recomputed) with the
// tokens it has alone.
func TestEngineStalledReaderGivesSlot(t *testing.T) {
	m := loadStoriesWith(t, Options{ContextLen: 128, Sequences: 1})
	want := make([]engineRun, 2)
	for i := range want {
		want[i] = runEngineCase(context.Background(), loadStoriesWith(t, Options{ContextLen: 128}), i)
	}
	release, started := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failed test leaves no reader blocked
	stalled := make(chan engineRun, 1)
	go func() {
		stalled <- runEngineCaseGated(context.Background(), m, 0, func() {
			close(started)
			<-release
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first generation gave no token")
	}
	done := make(chan engineRun, 1)
	go func() { done <- runEngineCase(context.Background(), m, 1) }()
	select {
	case other := <-done:
		compareRuns(t, "beside a stalled reader", other, want[1])
	case <-time.After(10 * time.Second):
		t.Fatal("a request waited on a stalled reader's sequence slot")
	}
	free()
	select {
	case got := <-stalled:
		compareRuns(t, "stalled", got, want[0])
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled generation did not resume")
	}
	if st := m.EngineStats(); st.Preemptions == 0 || st.KVBlocksUsed != 0 {
		t.Errorf("engine: %+v", st)
	}
}

func TestEngineStalledReaderYields(t *testing.T) {
	m := loadStoriesWith(t, Options{ContextLen: 128, KVTokens: 128})
	o := GenerateOptions{IgnoreEOS: true, MaxTokens: 20}
	p := m.PromptTokens("Once upon a time, there was a little girl named Lily. She loved to play with her toys and her friends in the big green park.", o)
	for len(p) < 100 {
		p = append(p, p[1:]...)
	}
	p = p[:100]
	var want []int32
	ref := loadStoriesWith(t, Options{ContextLen: 128})
	if _, err := ref.GenerateTokens(context.Background(), p, o, func(tk Token) error {
		want = append(want, tk.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	release, started := make(chan struct{}), make(chan struct{})
	var got []int32
	var genErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, genErr = m.GenerateTokens(context.Background(), p, o, func(tk Token) error {
			if len(got) == 0 {
				close(started)
				<-release
			}
			got = append(got, tk.ID)
			return nil
		})
	})
	<-started
	// 100 positions of 128 are held: a 40-token request must take them.
	q := m.PromptTokens("The sun was hot and the children wanted to swim in the lake near the old tree by the house", o)
	if _, err := m.PromptLogprobs(context.Background(), q, 1); err != nil {
		t.Errorf("beside a stalled reader: %v", err)
	}
	close(release)
	wg.Wait()
	if genErr != nil || !slices.Equal(got, want) {
		t.Errorf("stalled generation: %v, tokens %v, alone %v", genErr, got, want)
	}
	if st := m.EngineStats(); st.Preemptions == 0 || st.KVBlocksUsed != 0 {
		t.Errorf("engine: %+v", st)
	}
}

// TestEngineRoomFromStalledReader runs the pool out mid-decode while an
// older generation's caller has stopped reading: that one gives its room
// up (one preemption), not the newest, which would be recomputed and then
// push the stalled one out anyway to come back (two).
func TestEngineRoomFromStalledReader(t *testing.T) {
	m := loadStoriesWith(t, Options{ContextLen: 128, KVTokens: 128})
	o := GenerateOptions{IgnoreEOS: true, MaxTokens: 40}
	prompt := func(text string) []int32 {
		p := m.PromptTokens(text, o)
		for len(p) < 40 {
			p = append(p, p[1:]...)
		}
		return p[:40]
	}
	// The stalled one holds its prompt and a buffer of tokens (four
	// blocks of 16 of the pool's eight); the other's 80 positions then
	// need a fifth.
	pa := prompt("Once upon a time, there was a little girl named Lily. She loved to play with her toys in the park.")
	pb := prompt("The sun was hot and the children wanted to swim in the lake near the old tree by the house.")
	alone := func(p []int32) []int32 {
		var ids []int32
		ref := loadStoriesWith(t, Options{ContextLen: 128})
		if _, err := ref.GenerateTokens(context.Background(), p, o, func(tk Token) error {
			ids = append(ids, tk.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	wantA, wantB := alone(pa), alone(pb)

	release, started := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failed test leaves no reader blocked
	var gotA []int32
	var errA error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, errA = m.GenerateTokens(context.Background(), pa, o, func(tk Token) error {
			if len(gotA) == 0 {
				close(started)
				<-release
			}
			gotA = append(gotA, tk.ID)
			return nil
		})
	})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first generation gave no token")
	}
	done := make(chan []int32, 1)
	go func() {
		var ids []int32
		if _, err := m.GenerateTokens(context.Background(), pb, o, func(tk Token) error {
			ids = append(ids, tk.ID)
			return nil
		}); err != nil {
			t.Error(err)
		}
		done <- ids
	}()
	select {
	case gotB := <-done:
		if !slices.Equal(gotB, wantB) {
			t.Errorf("beside a stalled reader: %v, alone %v", gotB, wantB)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a generation waited on a stalled reader's room")
	}
	if st := m.EngineStats(); st.Preemptions != 1 {
		t.Errorf("%d preemptions making room, want 1 (the stalled generation's)", st.Preemptions)
	}
	free()
	wg.Wait()
	if errA != nil || !slices.Equal(gotA, wantA) {
		t.Errorf("stalled generation: %v, tokens %v, alone %v", errA, gotA, wantA)
	}
	if st := m.EngineStats(); st.KVBlocksUsed != 0 {
		t.Errorf("engine after both: %+v", st)
	}
}

// gatedBatcher holds its first step until release is closed, and records
// how many prompt chunks (entries of more than one token) each step took.
type gatedBatcher struct {
	backend.Batcher
	entered, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	prompts          []int
}

func (g *gatedBatcher) Step(ctx context.Context, steps []backend.SeqStep) error {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	n := 0
	for _, s := range steps {
		if len(s.Tokens) > 1 {
			n++
		}
	}
	g.mu.Lock()
	g.prompts = append(g.prompts, n)
	g.mu.Unlock()
	return g.Batcher.Step(ctx, steps)
}

// TestEngineAdmitsBurstTogether submits requests while a step runs: the
// next step must read all their prompts together, not one or two a step
// (a select among the submissions and a ready timer took about one a
// loop; under a burst of chat requests the last waited many steps for its
// first token).
func TestEngineAdmitsBurstTogether(t *testing.T) {
	m := loadStoriesWith(t, Options{ContextLen: 256, Sequences: 8})
	be := m.engine.be
	m.engine.close()
	g := &gatedBatcher{Batcher: be, entered: make(chan struct{}), release: make(chan struct{})}
	m.engine = newEngine(m, g, 8)
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	})
	o := GenerateOptions{MaxTokens: 4}
	const burst = 6
	var wg sync.WaitGroup
	errs := make([]error, burst+1)
	run := func(i int) {
		defer wg.Done()
		errs[i] = runPrompt(m, i, o).err
	}
	wg.Add(1)
	go run(0)
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no step began")
	}
	wg.Add(burst)
	for i := 1; i <= burst; i++ {
		go run(i % len(enginePrompts))
	}
	// Every one of them waiting to be handed to the loop, which is in
	// the step.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.engine.mu.Lock()
		w := m.engine.waiting
		m.engine.mu.Unlock()
		if w == burst {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests submitted", w, burst)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // from the count to the channel send
	close(g.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("generation %d: %v", i, err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// All of them in the next step; a slow scheduler may have left one
	// short of its send when the loop looked, so the step after counts
	// too (one at a time, the old loop, took five or six steps).
	if len(g.prompts) < 3 || g.prompts[1]+g.prompts[2] != burst || g.prompts[1] < burst-1 {
		t.Errorf("prompt chunks a step %v: the step after the first should read all %d waiting prompts", g.prompts, burst)
	}
}
