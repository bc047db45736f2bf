package gotok

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotok/sample"
)

func TestStopperHoldsBackSplitStops(t *testing.T) {
	s := newStopper([]string{"END", "\n\n"})
	var out strings.Builder
	pieces := []string{"hello ", "E", "N", "ough", " then\n", "x E", "ND tail"}
	stopped := false
	for _, p := range pieces {
		text, stop := s.push(p)
		out.WriteString(text)
		if stop {
			stopped = true
			break
		}
	}
	if !stopped || out.String() != "hello ENough then\nx " {
		t.Errorf("got %q, stopped %v", out.String(), stopped)
	}
	// Without stop strings everything passes straight through.
	s = newStopper(nil)
	if text, stop := s.push("E"); text != "E" || stop {
		t.Errorf("no stops: %q %v", text, stop)
	}
	// Held-back text comes out at the end.
	s = newStopper([]string{"STOP"})
	text, _ := s.push("abc ST")
	if text+s.flush() != "abc ST" {
		t.Errorf("flush lost text: %q", text)
	}
}

func loadStories(t *testing.T) *Model {
	t.Helper()
	return loadStoriesContext(t, 64)
}

// loadStoriesContext loads stories260K on the CPU with a context of ctx
// tokens, closed when the test ends.
func loadStoriesContext(t *testing.T, ctx int) *Model {
	t.Helper()
	m, err := Load(filepath.Join(sharedDir(t), "models", "stories260K.gguf"), Options{Device: "cpu", ContextLen: ctx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestGenerateStopsAndLimits(t *testing.T) {
	m := loadStories(t)
	ctx := context.Background()
	collect := func(prompt string, o GenerateOptions) (string, Stats, error) {
		var sb strings.Builder
		st, err := m.Generate(ctx, prompt, o, func(s string) error { sb.WriteString(s); return nil })
		return sb.String(), st, err
	}
	text, st, err := collect("Once upon a time", GenerateOptions{MaxTokens: 40, Stop: []string{"Lily"}})
	if err != nil || st.StopReason != StopString || strings.Contains(text, "Lily") || !strings.HasPrefix(text, ", there was") {
		t.Errorf("stop string: %q %+v %v", text, st, err)
	}
	_, st, err = collect("Once upon a time", GenerateOptions{})
	if err != nil || st.StopReason != StopContext && st.StopReason != StopEOS {
		t.Errorf("unbounded run: %+v %v", st, err)
	}
	// Every token but the last generated one is fed to the model; a full
	// context holds exactly those.
	if fed := st.PromptTokens + st.GeneratedTokens - 1; fed > m.ContextLen() || st.StopReason == StopContext && fed != m.ContextLen() {
		t.Errorf("fed %d tokens to a context of %d: %+v", fed, m.ContextLen(), st)
	}
	_, _, err = collect(strings.Repeat("Once upon a time ", 40), GenerateOptions{})
	if err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("prompt past the context: %v", err)
	}
	if _, _, err = collect("x", GenerateOptions{Sample: sampleParamsBadTopP()}); err == nil {
		t.Error("bad sampler params: no error")
	}
}

func TestGenerateCancel(t *testing.T) {
	m := loadStories(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	st, err := m.Generate(ctx, "Once", GenerateOptions{MaxTokens: 50}, func(string) error {
		n++
		if n == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || st.StopReason != StopCancelled || st.GeneratedTokens < 5 || st.GeneratedTokens > 7 {
		t.Errorf("cancel: %+v %v", st, err)
	}
}

func sampleParamsBadTopP() (p sample.Params) {
	p.Temperature, p.TopP = 0.8, 1.5
	return p
}

func TestPromptPrefixIsReused(t *testing.T) {
	m := loadStories(t)
	ctx := context.Background()
	run := func(m *Model, prompt string) (string, Stats) {
		var sb strings.Builder
		st, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 40}, func(s string) error { sb.WriteString(s); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return sb.String(), st
	}
	first, st1 := run(m, "Once upon a time")
	if st1.PromptReused != 0 {
		t.Errorf("first generation reused %d tokens", st1.PromptReused)
	}
	// The next turn extends the first prompt and its reply: the cache holds
	// all of it but the reply's last token (in whole blocks, when the
	// backend batches).
	second := "Once upon a time" + first + " Then"
	got, st2 := run(m, second)
	if want := cachedPrefix(m, st1); st2.PromptReused < want {
		t.Errorf("second generation reused %d tokens, want at least %d", st2.PromptReused, want)
	}
	fresh := loadStories(t)
	want, _ := run(fresh, second)
	if got != want {
		t.Errorf("with reuse %q, fresh %q", got, want)
	}
	// A different prompt reuses only what matches.
	if _, st3 := run(m, "Lily went"); st3.PromptReused > 1 {
		t.Errorf("unrelated prompt reused %d tokens", st3.PromptReused)
	}
}

func TestGenerateAfterCloseIsAnError(t *testing.T) {
	m := loadStories(t)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), "Once", GenerateOptions{MaxTokens: 3}, func(string) error { return nil }); err == nil {
		t.Error("Generate after Close: no error")
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// PenalizeCompletionOnly: the penalties see the generated tokens only.
// With a huge presence penalty, the first token is then the plain greedy
// one even though the prompt holds it, and no generated token repeats;
// with the prompt in the history, the first token must differ.
func TestPenalizeCompletionOnly(t *testing.T) {
	m := loadStories(t)
	ctx := context.Background()
	tokens := func(prompt string, o GenerateOptions) []int32 {
		t.Helper()
		var ids []int32
		if _, err := m.GenerateTokens(ctx, m.PromptTokens(prompt, o), o, func(tk Token) error {
			if tk.ID >= 0 {
				ids = append(ids, tk.ID)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	const prompt = "Once upon a time, there was a girl. Once upon a time"
	plain := tokens(prompt, GenerateOptions{MaxTokens: 1})
	promptIDs := m.PromptTokens(prompt, GenerateOptions{})
	if !slices.Contains(promptIDs, plain[0]) {
		t.Fatalf("the greedy first token %d is not in the prompt: the test proves nothing", plain[0])
	}
	penalty := sample.Params{PresencePenalty: 100, PenaltyLastN: 64}
	withPrompt := tokens(prompt, GenerateOptions{MaxTokens: 1, Sample: penalty})
	if withPrompt[0] == plain[0] {
		t.Errorf("with the prompt penalized the first token is still %d", plain[0])
	}
	only := tokens(prompt, GenerateOptions{MaxTokens: 20, Sample: penalty, PenalizeCompletionOnly: true})
	if only[0] != plain[0] {
		t.Errorf("completion only: first token %d, want the unpenalized %d", only[0], plain[0])
	}
	seen := map[int32]bool{}
	for _, id := range only {
		if seen[id] {
			t.Errorf("token %d repeats under a presence penalty of 100: %v", id, only)
		}
		seen[id] = true
	}
}

// MinTokens: end-of-generation cannot be picked before that many tokens,
// even when it is the likeliest; afterwards it can.
func TestMinTokensHoldsEOG(t *testing.T) {
	m := loadStories(t)
	eos := m.Tokenizer().EOS()
	if eos < 0 {
		t.Fatal("stories260K has no EOS")
	}
	s, err := sample.New(sample.Params{}) // greedy
	if err != nil {
		t.Fatal(err)
	}
	h := m.newHostSampler(GenerateOptions{MinTokens: 2}, s)
	logits := make([]float32, m.Tokenizer().VocabSize())
	logits[eos], logits[7] = 10, 5
	var got []int32
	for range 3 {
		h.logits = logits
		tok, err := h.pick()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tok)
	}
	if want := []int32{7, 7, eos}; !slices.Equal(got, want) {
		t.Errorf("picks %v, want %v", got, want)
	}

	// Through GenerateTokens (on the host): stories260K never ends a story,
	// so the text is the greedy one.
	var plain, held strings.Builder
	for _, c := range []struct {
		o   GenerateOptions
		out *strings.Builder
	}{{GenerateOptions{MaxTokens: 8}, &plain}, {GenerateOptions{MaxTokens: 8, MinTokens: 4}, &held}} {
		if _, err := m.Generate(context.Background(), "Once upon a time", c.o, func(s string) error { c.out.WriteString(s); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if plain.String() != held.String() {
		t.Errorf("min tokens changed the greedy text: %q, want %q", held.String(), plain.String())
	}
	if _, err := m.Generate(context.Background(), "x", GenerateOptions{MinTokens: -1}, func(string) error { return nil }); err == nil {
		t.Error("negative MinTokens accepted")
	}
}

// cachedPrefix is how much of a generation with stats st the next one can
// reuse: the prompt and all generated tokens but the last, in whole KV
// blocks when the backend batches (a block may hold part of a prompt only
// while its sequence runs).
func cachedPrefix(m *Model, st Stats) int {
	n := st.PromptTokens + st.GeneratedTokens - 1
	if m.engine != nil {
		bs := m.engine.be.KV().BlockSize()
		n = n / bs * bs
	}
	return n
}

// TestGenerateHidesControlTokens samples stories260K past end-of-text
// (IgnoreEOS) until it generates a control token: its text is empty unless
// GenerateOptions.Special, as llama.cpp prints generated text.
func TestGenerateHidesControlTokens(t *testing.T) {
	m := loadStoriesContext(t, 512)
	tok := m.Tokenizer()
	run := func(special bool) (control []Token, text string) {
		o := GenerateOptions{MaxTokens: 400, IgnoreEOS: true, Special: special, Sample: sample.Params{Temperature: 1, Seed: 1}}
		var b strings.Builder
		_, err := m.GenerateTokens(context.Background(), m.PromptTokens("Once", o), o, func(tk Token) error {
			if tok.IsControl(tk.ID) {
				control = append(control, tk)
			}
			b.WriteString(tk.Text)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return control, b.String()
	}
	hidden, plain := run(false)
	if len(hidden) == 0 {
		t.Fatal("no control token in 400 sampled tokens: the test needs another seed")
	}
	shown, full := run(true)
	if len(shown) != len(hidden) {
		t.Fatalf("%d control tokens with Special, %d without: the runs differ", len(shown), len(hidden))
	}
	for i, tk := range hidden {
		if tk.Text != "" {
			t.Errorf("control token %d printed %q without Special", tk.ID, tk.Text)
		}
		if p := tok.Piece(tk.ID); shown[i].Text != p || !strings.Contains(full, p) {
			t.Errorf("control token %d printed %q with Special, want %q", tk.ID, shown[i].Text, p)
		}
	}
	if strings.Contains(plain, tok.Piece(hidden[0].ID)) {
		t.Errorf("the text without Special contains %q", tok.Piece(hidden[0].ID))
	}
}

// TestGenerateStopsOnControlToken checks that a stop string naming a
// control token (as chat templates' stops do) still ends the generation
// when that token is sampled, though it prints nothing.
func TestGenerateStopsOnControlToken(t *testing.T) {
	m := loadStoriesContext(t, 512)
	tok := m.Tokenizer()
	o := GenerateOptions{MaxTokens: 400, IgnoreEOS: true, Sample: sample.Params{Temperature: 1, Seed: 1}}
	// Where the stream first samples a control token, run alone.
	first, n := int32(-1), 0
	// The stream is cut at its first control token (the error "found").
	_, _ = m.GenerateTokens(context.Background(), m.PromptTokens("Once", o), o, func(tk Token) error {
		if tk.ID >= 0 {
			n++
			if first < 0 && tok.IsControl(tk.ID) {
				first = tk.ID
				return errors.New("found")
			}
		}
		return nil
	})
	if first < 0 {
		t.Fatal("no control token in 400 sampled tokens: the test needs another seed")
	}
	o.Stop = []string{"no such text", tok.Piece(first)}
	var b strings.Builder
	st, err := m.GenerateTokens(context.Background(), m.PromptTokens("Once", o), o, func(tk Token) error {
		b.WriteString(tk.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.StopReason != StopString || st.GeneratedTokens != n {
		t.Errorf("stopped by %v after %d tokens, want a stop string at the control token, token %d", st.StopReason, st.GeneratedTokens, n)
	}
	if strings.Contains(b.String(), tok.Piece(first)) {
		t.Errorf("the text holds the stop token's text %q", tok.Piece(first))
	}
}
