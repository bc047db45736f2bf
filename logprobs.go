package gotok

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gotok/constrain"
	"gotok/sample"
)

// hostSampler samples on the host from each step's full logits, which
// log-probabilities and constraints need: the backend runs the step and
// returns the logits (Backend.Logits), the constraint masks them, and the
// sample package draws, with the same sampler chain and random stream the
// backends use.
type hostSampler struct {
	m      *Model
	s      *sample.Sampler
	c      *constrain.Constraint // nil without a constraint
	report bool                  // fill Token.Logprob
	top    int                   // and this many Token.Top

	minTokens int     // end-of-generation is masked for this many picks
	picked    int     // tokens picked so far
	eog       []int32 // the end-of-generation tokens, with minTokens

	logits []float32 // the current step's raw logits
	masked []float32 // their masked copy
}

func (m *Model) newHostSampler(o GenerateOptions, s *sample.Sampler) *hostSampler {
	h := &hostSampler{m: m, s: s, report: o.Logprobs || o.TopLogprobs > 0, top: o.TopLogprobs, minTokens: o.MinTokens}
	if o.MinTokens > 0 {
		for id := range int32(m.tok.VocabSize()) {
			if m.tok.IsEOG(id) {
				h.eog = append(h.eog, id)
			}
		}
	}
	if o.Constraint != nil {
		m.vocabOnce.Do(func() { m.vocab = constrain.NewVocab(m.tok) })
		h.c = constrain.NewConstraint(o.Constraint, m.vocab)
	}
	return h
}

// prefillHost runs prompt[reuse:] after a cached prefix of reuse tokens and
// samples the first token: the tokens but the last through Prefill, the
// last through Logits, whose logits the host samples.
func (m *Model) prefillHost(ctx context.Context, prompt []int32, reuse int, h *hostSampler) (int32, error) {
	n := len(prompt)
	if reuse < n-1 {
		if _, err := m.backend.Prefill(ctx, prompt[reuse:n-1], reuse, nil); err != nil {
			return -1, err
		}
	}
	logits, err := m.backend.Logits(ctx, prompt[n-1], n-1)
	if err != nil {
		return -1, err
	}
	h.logits = logits
	return h.pick()
}

// next runs tok at pos and samples the token after it.
func (h *hostSampler) next(ctx context.Context, tok int32, pos int) (int32, error) {
	logits, err := h.m.backend.Logits(ctx, tok, pos)
	if err != nil {
		return -1, err
	}
	h.logits = logits
	return h.pick()
}

// pick samples from the current logits, masked by the constraint and,
// before MinTokens, with end-of-generation ruled out, and advances the
// constraint. A negative token (no logit to pick from) is returned without
// an error for the caller to report.
func (h *hostSampler) pick() (int32, error) {
	l := h.logits
	holdEOG := h.picked < h.minTokens
	h.picked++
	if h.c != nil || holdEOG {
		h.masked = append(h.masked[:0], l...)
		if h.c != nil {
			if err := h.c.Mask(h.masked); err != nil {
				return -1, fmt.Errorf("generate: %w", err)
			}
		}
		if holdEOG {
			for _, id := range h.eog {
				if int(id) < len(h.masked) {
					h.masked[id] = float32(math.Inf(-1))
				}
			}
		}
		l = h.masked
	}
	tok := h.s.Sample(l)
	if tok >= 0 && h.c != nil {
		// Refused only when every allowed token's logit was -Inf and the
		// sampler fell back on a masked one: an error, not invalid text.
		if err := h.c.Accept(tok); err != nil {
			return -1, fmt.Errorf("generate: %w", err)
		}
	}
	return tok, nil
}

// fill sets t's log-probabilities from the logits it was sampled from.
func (h *hostSampler) fill(t *Token) {
	if !h.report {
		return
	}
	t.Logprob, t.Top = logprobs(h.m, h.logits, t.ID, h.top)
}

// logprobs returns id's log-probability under logits and the top most
// likely tokens.
func logprobs(m *Model, logits []float32, id int32, top int) (float32, []TokenLogprob) {
	ls := sample.NewLogSoftmax(logits)
	var list []TokenLogprob
	for _, t := range sample.TopK(logits, top) {
		list = append(list, TokenLogprob{ID: t, Text: m.tok.Piece(t), Logprob: ls.Logprob(logits[t])})
	}
	return ls.Logprob(logits[id]), list
}

// PromptLogprobs scores a tokenized prompt, as OpenAI's completions with
// echo and logprobs report it: element i is tokens[i+1] (Text its piece)
// with its log-probability given tokens[:i+1], and the top (0 to
// MaxTopLogprobs) most likely tokens at that position; the first token has
// no element, as nothing predicts it. The log-probabilities are the raw
// model's, as in GenerateOptions.Logprobs.
//
// It runs the model a token at a time through Backend.Logits, so it costs
// about as much as generating len(tokens) tokens. It leaves tokens[:len-1]
// in the KV cache: a Generate of the same prompt right after recomputes
// only its last token.
func (m *Model) PromptLogprobs(ctx context.Context, tokens []int32, top int) ([]Token, error) {
	if m.engine == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed {
			return nil, errors.New("prompt logprobs: the model is closed")
		}
	}
	if top < 0 || top > MaxTopLogprobs {
		return nil, fmt.Errorf("prompt logprobs: top %d, want 0 to %d", top, MaxTopLogprobs)
	}
	if ctxLen := m.backend.ContextLen(); len(tokens) > ctxLen {
		return nil, fmt.Errorf("prompt logprobs: %d tokens do not fit the context of %d", len(tokens), ctxLen)
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= m.tok.VocabSize() {
			return nil, fmt.Errorf("prompt logprobs: token id %d is out of range (vocabulary of %d)", t, m.tok.VocabSize())
		}
	}
	if m.engine != nil {
		return m.engine.promptLogprobs(ctx, tokens, top)
	}
	m.cached = m.cached[:0]
	out := make([]Token, 0, max(len(tokens)-1, 0))
	for i := 0; i+1 < len(tokens); i++ {
		logits, err := m.backend.Logits(ctx, tokens[i], i)
		if err != nil {
			return nil, fmt.Errorf("prompt logprobs: %w", err)
		}
		m.cached = append(m.cached, tokens[i])
		next := tokens[i+1]
		lp, list := logprobs(m, logits, next, top)
		out = append(out, Token{ID: next, Text: m.tok.Piece(next), Logprob: lp, Top: list})
	}
	return out, nil
}
