package gotok

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotok/sample"
)

// refLogprobs is a plain float64 log-softmax.
func refLogprobs(logits []float32) []float64 {
	m := math.Inf(-1)
	for _, l := range logits {
		m = math.Max(m, float64(l))
	}
	z := 0.0
	for _, l := range logits {
		z += math.Exp(float64(l) - m)
	}
	out := make([]float64, len(logits))
	for i, l := range logits {
		out[i] = float64(l) - m - math.Log(z)
	}
	return out
}

func loadStoriesCtx(t *testing.T, ctxLen int) *Model {
	t.Helper()
	m, err := Load(filepath.Join(sharedDir(t), "models", "stories260K.gguf"), Options{Device: "cpu", ContextLen: ctxLen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func generateTokens(t *testing.T, m *Model, prompt string, o GenerateOptions) ([]Token, Stats) {
	t.Helper()
	var toks []Token
	st, err := m.GenerateTokens(context.Background(), m.PromptTokens(prompt, o), o, func(tk Token) error {
		toks = append(toks, tk)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return toks, st
}

// checkStep checks a token's reported log-probabilities against the
// reference log-softmax of the logits it was sampled from.
func checkStep(t *testing.T, m *Model, logits []float32, tk Token, top int) {
	t.Helper()
	ref := refLogprobs(logits)
	if d := math.Abs(float64(tk.Logprob) - ref[tk.ID]); d > 1e-4 {
		t.Fatalf("token %d: logprob %v, want %v", tk.ID, tk.Logprob, ref[tk.ID])
	}
	if len(tk.Top) != top {
		t.Fatalf("token %d: %d top logprobs, want %d", tk.ID, len(tk.Top), top)
	}
	order := make([]int32, len(logits))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	for i, e := range tk.Top {
		if e.ID != order[i] || e.Text != m.Tokenizer().Piece(e.ID) || math.Abs(float64(e.Logprob)-ref[e.ID]) > 1e-4 {
			t.Fatalf("top %d is %+v, want id %d logprob %v", i, e, order[i], ref[order[i]])
		}
		if i > 0 && e.Logprob > tk.Top[i-1].Logprob {
			t.Fatalf("top list not sorted: %+v", tk.Top)
		}
		if e.ID == tk.ID && e.Logprob != tk.Logprob {
			t.Fatalf("chosen token %d: %v in the top list, %v reported", tk.ID, e.Logprob, tk.Logprob)
		}
	}
	if top > 0 && tk.Logprob > tk.Top[top-1].Logprob && !slices.ContainsFunc(tk.Top, func(e TokenLogprob) bool { return e.ID == tk.ID }) {
		t.Fatalf("token %d (logprob %v) is missing from the top list %+v", tk.ID, tk.Logprob, tk.Top)
	}
}

func TestLogprobsMatchBackendLogits(t *testing.T) {
	m := loadStoriesCtx(t, 128)
	const prompt = "Once upon a time"
	o := GenerateOptions{MaxTokens: 24, Logprobs: true, TopLogprobs: 5}
	o.Sample = sample.DefaultParams()
	o.Sample.Temperature, o.Sample.Seed = 1, 7
	toks, st := generateTokens(t, m, prompt, o)
	if st.GeneratedTokens != 24 {
		t.Fatalf("generated %d tokens: %+v", st.GeneratedTokens, st)
	}

	// Recompute each step's logits directly.
	be := m.Backend()
	ctx := context.Background()
	p := m.PromptTokens(prompt, o)
	if _, err := be.Prefill(ctx, p[:len(p)-1], 0, nil); err != nil {
		t.Fatal(err)
	}
	logits, err := be.Logits(ctx, p[len(p)-1], len(p)-1)
	if err != nil {
		t.Fatal(err)
	}
	pos := len(p)
	for _, tk := range toks {
		if tk.ID < 0 {
			continue // held-back text at the end
		}
		checkStep(t, m, logits, tk, 5)
		if logits, err = be.Logits(ctx, tk.ID, pos); err != nil {
			t.Fatal(err)
		}
		pos++
	}
}

// TestHostSamplingMatchesBackend: asking for log-probabilities moves
// sampling to the host but must not change what is generated.
func TestHostSamplingMatchesBackend(t *testing.T) {
	m := loadStoriesCtx(t, 128)
	for seed := range uint64(4) {
		o := GenerateOptions{MaxTokens: 40}
		o.Sample = sample.DefaultParams()
		o.Sample.Seed = seed
		o.Sample.RepeatPenalty = 1.1
		plain, st1 := generateTokens(t, m, "Lily and Tom", o)
		o.Logprobs = true
		host, st2 := generateTokens(t, m, "Lily and Tom", o)
		if len(plain) != len(host) || st1.StopReason != st2.StopReason {
			t.Fatalf("seed %d: %d tokens (%s) on the backend, %d (%s) on the host", seed, len(plain), st1.StopReason, len(host), st2.StopReason)
		}
		for i := range plain {
			if plain[i].ID != host[i].ID || plain[i].Text != host[i].Text {
				t.Fatalf("seed %d: token %d is %+v on the backend, %+v on the host", seed, i, plain[i], host[i])
			}
		}
	}
}

func TestPromptLogprobs(t *testing.T) {
	// An f32 cache: the prompt's batched pass and the steps below agree
	// to float32 rounding (on the f16 cache a K or V element now and then
	// rounds to a neighbouring float16 on one path only:
	// TestEngineBatchesF16Cache).
	m := loadStoriesWith(t, Options{ContextLen: 128})
	ctx := context.Background()
	p := m.Encode("Once upon a time, there was a little girl", GenerateOptions{})
	got, err := m.PromptLogprobs(ctx, p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(p)-1 {
		t.Fatalf("%d entries for %d tokens", len(got), len(p))
	}
	// The next generation of the same prompt reuses all but its last token.
	_, st := generateTokens(t, m, "Once upon a time, there was a little girl", GenerateOptions{MaxTokens: 2})
	if want := cachedPrefix(m, Stats{PromptTokens: len(p) - 1, GeneratedTokens: 1}); st.PromptReused != want {
		t.Errorf("generation after PromptLogprobs reused %d of %d tokens", st.PromptReused, len(p))
	}

	be := m.Backend()
	for i, tk := range got {
		if tk.ID != p[i+1] || tk.Text != m.Tokenizer().Piece(p[i+1]) {
			t.Fatalf("entry %d is %+v, want token %d", i, tk, p[i+1])
		}
		logits, err := be.Logits(ctx, p[i], i)
		if err != nil {
			t.Fatal(err)
		}
		checkStep(t, m, logits, tk, 3)
	}

	for _, c := range []struct {
		tokens []int32
		top    int
		want   string
	}{
		{p, 21, "top 21"},
		{p, -1, "top -1"},
		{[]int32{1, 1 << 20}, 0, "out of range"},
		{make([]int32, 200), 0, "do not fit"},
	} {
		if _, err := m.PromptLogprobs(ctx, c.tokens, c.top); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PromptLogprobs(%d tokens, top %d): %v, want %q", len(c.tokens), c.top, err, c.want)
		}
	}
	if got, err := m.PromptLogprobs(ctx, p[:1], 2); err != nil || len(got) != 0 {
		t.Errorf("one token: %v %v", got, err)
	}
}

func TestTopLogprobsBounds(t *testing.T) {
	m := loadStories(t)
	for _, n := range []int{-1, 21} {
		_, err := m.Generate(context.Background(), "x", GenerateOptions{MaxTokens: 2, TopLogprobs: n}, func(string) error { return nil })
		if err == nil {
			t.Errorf("top logprobs %d: no error", n)
		}
	}
}
