package gotok

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gotok/constrain"
	"gotok/sample"
)

// GenerateOptions configures one generation.
type GenerateOptions struct {
	// MaxTokens bounds the generated tokens (0: until the context is full).
	MaxTokens int
	// Sample configures sampling; the zero value is greedy.
	Sample sample.Params
	// Stop ends generation when the text produced contains one of these; the
	// stop string itself is not emitted.
	Stop []string
	// NoSpecial suppresses the BOS/EOS tokens the model's metadata asks to
	// add around the prompt.
	NoSpecial bool
	// ParseSpecial lets special-token text in the prompt (e.g. "<|im_start|>")
	// become its token instead of plain text.
	ParseSpecial bool
	// Special prints the text of generated control tokens (<|im_start|>,
	// <file_sep>, ...), as llama.cpp's --special does; without it they
	// add nothing to the output, as in llama-completion and llama-server.
	// Token.Text follows it; logprobs list every token's own text.
	Special bool
	// IgnoreEOS keeps generating past end-of-generation tokens (not with a
	// Constraint: there an end-of-generation token always ends it).
	IgnoreEOS bool
	// MinTokens keeps end-of-generation tokens from being sampled until
	// this many tokens are generated (vLLM's min_tokens; stop strings
	// still apply). It samples on the host, as Logprobs does.
	MinTokens int
	// PenalizeCompletionOnly keeps the prompt out of the sampler's penalty
	// history: the repeat, presence and frequency penalties look at the
	// generated tokens only (the last Sample.PenaltyLastN of them), as
	// OpenAI's and vLLM's presence and frequency penalties do. Off, the
	// prompt's tokens count too, as in llama.cpp.
	PenalizeCompletionOnly bool

	// Logprobs reports each generated token's log-probability in
	// Token.Logprob. TopLogprobs (0 to MaxTopLogprobs) also lists that many
	// most likely tokens of each step in Token.Top, and implies Logprobs.
	// Both are of the model's own distribution: the log-softmax of the raw
	// logits, before penalties, temperature, top-k/p, min-p and any
	// Constraint, as OpenAI and llama-server (post_sampling_probs false)
	// report them.
	Logprobs    bool
	TopLogprobs int

	// Constraint restricts the generated text to a grammar: a JSON value
	// that validates against a JSON Schema (constrain.CompileSchema) or any
	// JSON object (constrain.AnyObject), for OpenAI's response_format. Only
	// tokens that can continue a valid text may be sampled, and generation
	// ends with StopConstraint once the value is whole. The grammar is
	// immutable and may be shared by concurrent requests; each generation
	// keeps its own state. If MaxTokens runs out first the text is a
	// truncated value (StopMaxTokens), as with OpenAI; Stop strings still
	// apply and can cut it short too.
	Constraint *constrain.Grammar
}

// MaxTopLogprobs is the most TopLogprobs may ask for, as in OpenAI's API.
const MaxTopLogprobs = 20

// hostSampled reports whether the logits of each step must come to the
// host: for log-probabilities or a constraint. Otherwise the backend
// samples (on the GPU, on the device) and returns only the token.
func (o *GenerateOptions) hostSampled() bool {
	return o.Constraint != nil || o.Logprobs || o.TopLogprobs > 0 || o.MinTokens > 0
}

// Stop reasons reported in Stats.
const (
	StopEOS       = "eos"
	StopMaxTokens = "max_tokens"
	StopString    = "stop_string"
	StopContext   = "context_full"
	StopCancelled = "cancelled"
	// StopConstraint: the Constraint's value is whole and nothing can
	// follow it (OpenAI's finish_reason "stop", like StopEOS).
	StopConstraint = "constraint_complete"
)

// Stats reports what a generation did and how long it took.
type Stats struct {
	PromptTokens int
	// PromptReused counts the prompt's leading tokens whose keys and values
	// were already cached by the previous generation and not recomputed.
	PromptReused    int
	PromptDuration  time.Duration
	GeneratedTokens int
	// DecodeDuration covers the tokens after the first: the first comes out
	// of the prompt pass.
	DecodeDuration time.Duration
	StopReason     string

	decodes int // forward passes in DecodeDuration
}

// PromptTokensPerSecond is the prefill speed over the tokens computed.
func (s Stats) PromptTokensPerSecond() float64 {
	return rate(s.PromptTokens-s.PromptReused, s.PromptDuration)
}

// DecodeTokensPerSecond is the decode speed: forward passes after the
// prompt's per second.
func (s Stats) DecodeTokensPerSecond() float64 {
	return rate(s.decodes, s.DecodeDuration)
}

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Token is one generated token and the text it completes (possibly empty
// while a multi-byte character is incomplete). The last Token of a
// generation may carry ID -1: text held back until the end (an incomplete
// character, a partial stop string) with no token of its own.
type Token struct {
	ID   int32
	Text string
	// Logprob is ID's log-probability at its step, and Top the most likely
	// tokens of that step, most likely first (ties by id), when
	// GenerateOptions asks for them (see Logprobs). The token's own bytes are
	// m.Tokenizer().Piece(ID). A Token with ID -1 has none.
	Logprob float32
	Top     []TokenLogprob
}

// TokenLogprob is a token and its log-probability. Text is the token's
// piece, its raw bytes, which may be part of a UTF-8 character.
type TokenLogprob struct {
	ID      int32
	Text    string
	Logprob float32
}

// Encode tokenizes a prompt as Generate does.
func (m *Model) Encode(prompt string, o GenerateOptions) []int32 {
	return m.tok.Encode(prompt, !o.NoSpecial, o.ParseSpecial)
}

// Generate continues prompt and calls emit with each piece of text as it is
// produced. Cancelling ctx stops it cleanly: the stats so far are returned
// with the context's error.
func (m *Model) Generate(ctx context.Context, prompt string, o GenerateOptions, emit func(text string) error) (Stats, error) {
	return m.GenerateTokens(ctx, m.PromptTokens(prompt, o), o, func(t Token) error {
		if t.Text == "" {
			return nil
		}
		return emit(t.Text)
	})
}

// PromptTokens encodes a prompt as Generate and Stream do: an empty one
// becomes BOS alone, so the model has a position 0 to start from, as in
// llama.cpp. With no BOS token an empty prompt stays empty, which
// GenerateTokens refuses.
func (m *Model) PromptTokens(prompt string, o GenerateOptions) []int32 {
	tokens := m.Encode(prompt, o)
	if len(tokens) == 0 && m.tok.BOS() >= 0 {
		tokens = []int32{m.tok.BOS()}
	}
	return tokens
}

// GenerateTokens continues a tokenized prompt, calling emit per token, with
// its log-probabilities when o asks for them (Generate drops them; Stream
// delivers them too). On a backend that batches (the CPU's), concurrent
// calls generate together; otherwise they take turns.
func (m *Model) GenerateTokens(ctx context.Context, prompt []int32, o GenerateOptions, emit func(Token) error) (Stats, error) {
	if m.engine != nil {
		return m.engine.generate(ctx, prompt, o, emit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Stats{PromptTokens: len(prompt)}, errors.New("generate: the model is closed")
	}
	g, err := m.newGeneration(prompt, o, emit)
	if err != nil {
		return g.st, err
	}
	return g.st, g.runAlone(ctx)
}

// generation is one GenerateTokens call's state: its sampler, the text
// decoder and stop matcher, and its stats. The engine and runAlone feed it
// sampled tokens (accept).
type generation struct {
	m      *Model
	prompt []int32
	o      GenerateOptions
	s      *sample.Sampler
	h      *hostSampler // nil when the backend samples
	out    *stopper
	dec    interface {
		Next(int32) string
		Flush() string
	}
	limit       int
	limitReason string
	st          Stats
	emit        func(Token) error
}

// newGeneration checks a request and prepares its generation.
func (m *Model) newGeneration(prompt []int32, o GenerateOptions, emit func(Token) error) (*generation, error) {
	g := &generation{m: m, prompt: prompt, o: o, emit: emit}
	g.st.PromptTokens = len(prompt)
	if len(prompt) == 0 {
		return g, errors.New("generate: empty prompt")
	}
	ctxLen := m.backend.ContextLen()
	if len(prompt) > ctxLen {
		return g, fmt.Errorf("generate: prompt of %d tokens does not fit the context of %d (raise --ctx)", len(prompt), ctxLen)
	}
	for _, t := range prompt {
		if t < 0 || int(t) >= m.tok.VocabSize() {
			return g, fmt.Errorf("generate: token id %d is out of range (vocabulary of %d)", t, m.tok.VocabSize())
		}
	}
	if o.MaxTokens < 0 {
		return g, fmt.Errorf("generate: negative max tokens %d", o.MaxTokens)
	}
	if o.MinTokens < 0 {
		return g, fmt.Errorf("generate: negative min tokens %d", o.MinTokens)
	}
	if o.TopLogprobs < 0 || o.TopLogprobs > MaxTopLogprobs {
		return g, fmt.Errorf("generate: top logprobs %d, want 0 to %d", o.TopLogprobs, MaxTopLogprobs)
	}
	s, err := sample.New(o.Sample)
	if err != nil {
		return g, fmt.Errorf("generate: %w", err)
	}
	g.s = s
	if !o.PenalizeCompletionOnly {
		for _, t := range prompt {
			s.Accept(t)
		}
	}
	g.out = newStopper(o.Stop)
	g.dec = m.tok.NewStreamDecoder(o.Special)
	// Every generated token but the last is fed back at the next position:
	// the k-th goes in at len(prompt)+k-1, so ctxLen-len(prompt)+1 fit.
	g.limit, g.limitReason = o.MaxTokens, StopMaxTokens
	if room := ctxLen - len(prompt) + 1; g.limit == 0 || g.limit > room {
		g.limit, g.limitReason = room, StopContext
	}
	if o.hostSampled() {
		g.h = m.newHostSampler(o, s)
	}
	return g, nil
}

// accept takes the token sampled after the tokens so far and emits it. It
// reports whether the generation is over (st.StopReason says why; err when
// it failed).
func (g *generation) accept(tok int32, pos int) (done bool, err error) {
	st, o := &g.st, &g.o
	if tok < 0 {
		// The sampler found no finite logit: the forward pass produced
		// NaN, and any token would be a silent wrong answer.
		return true, fmt.Errorf("generate: no valid logits at position %d (NaN in the forward pass)", pos-1)
	}
	if g.m.tok.IsEOG(tok) && (!o.IgnoreEOS || o.Constraint != nil) {
		st.StopReason = StopEOS
		return true, flush(g.out, g.dec, g.emit)
	}
	g.s.Accept(tok)
	st.GeneratedTokens++
	text, stopped := g.out.push(g.dec.Next(tok))
	if !stopped && g.controlStop(tok) {
		// The text held back for a stop string is text after all.
		text, stopped = text+g.out.flush(), true
	}
	t := Token{ID: tok, Text: text}
	if g.h != nil {
		g.h.fill(&t)
	}
	if err := g.emit(t); err != nil {
		return true, stopErr(st, err)
	}
	if stopped {
		st.StopReason = StopString
		return true, nil
	}
	if g.h != nil && g.h.c != nil && g.h.c.Done() {
		st.StopReason = StopConstraint
		return true, flush(g.out, g.dec, g.emit)
	}
	if st.GeneratedTokens >= g.limit {
		st.StopReason = g.limitReason
		return true, flush(g.out, g.dec, g.emit)
	}
	return false, nil
}

// controlStop reports whether tok is a control token whose text is one of
// the stop strings (a chat template's <|im_start|>, say): it prints
// nothing without Special, so the text cannot match it, and it stops the
// generation by its id instead.
func (g *generation) controlStop(tok int32) bool {
	return !g.o.Special && g.m.tok.IsControl(tok) && slices.Contains(g.o.Stop, g.m.tok.Piece(tok))
}

// runAlone runs the generation on the backend by itself (m.mu held),
// reusing the cached prefix of the previous one.
func (g *generation) runAlone(ctx context.Context) (err error) {
	m, prompt, st := g.m, g.prompt, &g.st
	// Reuse the cached prefix; at least one token must run to get logits.
	reuse := min(commonPrefix(m.cached, prompt), len(prompt)-1)
	m.cached = m.cached[:reuse] // the rest is invalid until the prefill has written it
	start := time.Now()
	var tok int32
	if g.h == nil {
		tok, err = m.backend.Prefill(ctx, prompt[reuse:], reuse, g.s)
	} else {
		tok, err = m.prefillHost(ctx, prompt, reuse, g.h)
	}
	st.PromptDuration = time.Since(start)
	st.PromptReused = reuse
	if err != nil {
		return stopErr(st, err)
	}
	m.cached = append(m.cached[:reuse], prompt[reuse:]...)
	pos := len(prompt)
	decodeStart := time.Now()
	defer func() { st.DecodeDuration = time.Since(decodeStart) }()
	for {
		if done, err := g.accept(tok, pos); done {
			return err
		}
		m.cached = append(m.cached, tok)
		if g.h == nil {
			tok, err = m.backend.Decode(ctx, tok, pos, g.s)
		} else {
			tok, err = g.h.next(ctx, tok, pos)
		}
		st.decodes++
		if err != nil {
			m.cached = m.cached[:pos] // the failed step may have written pos
			return stopErr(st, err)
		}
		pos++
	}
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func stopErr(st *Stats, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		st.StopReason = StopCancelled
	}
	return err
}

// flush emits text held back by the UTF-8 decoder and the stop matcher.
func flush(out *stopper, dec interface{ Flush() string }, emit func(Token) error) error {
	text, stopped := out.push(dec.Flush())
	if !stopped {
		text += out.flush()
	}
	if text == "" {
		return nil
	}
	return emit(Token{ID: -1, Text: text})
}

// stopper holds back text that could be the start of a stop string, so a
// stop string split across tokens is never emitted.
type stopper struct {
	stops   []string
	pending string
}

func newStopper(stops []string) *stopper {
	var keep []string
	for _, s := range stops {
		if s != "" {
			keep = append(keep, s)
		}
	}
	return &stopper{stops: keep}
}

// push adds text and returns what is safe to emit, and whether a stop
// string was found (the text before it is returned, the rest dropped).
func (s *stopper) push(text string) (string, bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	s.pending += text
	cut := -1
	for _, stop := range s.stops {
		if i := strings.Index(s.pending, stop); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out := s.pending[:cut]
		s.pending = ""
		return out, true
	}
	// Keep the longest suffix that is a prefix of some stop string.
	hold := 0
	for _, stop := range s.stops {
		for n := min(len(stop)-1, len(s.pending)); n > hold; n-- {
			if strings.HasSuffix(s.pending, stop[:n]) {
				hold = n
				break
			}
		}
	}
	out := s.pending[:len(s.pending)-hold]
	s.pending = s.pending[len(s.pending)-hold:]
	return out, false
}

func (s *stopper) flush() string {
	out := s.pending
	s.pending = ""
	return out
}

// Stream is a generation running in the background whose tokens arrive on a
// channel.
type Stream struct {
	// Tokens delivers each generated token; it is closed when generation ends.
	Tokens <-chan Token
	done   chan struct{}
	stats  Stats
	err    error
}

// Wait blocks until generation ends and returns its stats and error. The
// caller must drain Tokens (or cancel the context) for it to end.
func (s *Stream) Wait() (Stats, error) {
	<-s.done
	return s.stats, s.err
}

// Stream starts generating in the background; see Generate.
func (m *Model) Stream(ctx context.Context, prompt string, o GenerateOptions) *Stream {
	tokens := make(chan Token, 16)
	s := &Stream{Tokens: tokens, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(tokens)
		s.stats, s.err = m.GenerateTokens(ctx, m.PromptTokens(prompt, o), o, func(t Token) error {
			select {
			case tokens <- t:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return s
}
