// Package perplexity measures a model's perplexity on a text and the KL
// divergence of its token distributions from a base model's, computed as
// llama.cpp's llama-perplexity computes them, so the numbers compare.
//
// The text is tokenized whole (with BOS when the model adds one) and cut
// into chunks of n_ctx tokens; each chunk is run from an empty cache with
// its first token replaced by BOS when the model adds BOS, and only the
// second half of each chunk is scored, so every scored token has at least
// n_ctx/2 tokens of context.
package perplexity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"gotok"
	"gotok/backend"
)

// MinContext is the smallest chunk: n_ctx/2 tokens of context and at least
// one token scored.
const MinContext = 4

// Options says how to cut and score the text.
type Options struct {
	// Context is n_ctx, the tokens in a chunk (0: the model's KV length).
	Context int
	// Chunks caps the number of chunks scored (0: all of them).
	Chunks int
	// Base, when set, receives the log-probabilities of every scored token
	// in llama-perplexity's --kl-divergence-base file format, for
	// KLDivergence to compare another model against.
	Base io.Writer
	// Progress, when set, is called after each chunk.
	Progress func(Progress)
}

// Progress reports a finished chunk.
type Progress struct {
	Chunk, Chunks int     // the chunk done (1-based) and the number to do
	PPL           float64 // the running estimate over the chunks done
	Elapsed       time.Duration
	// KL is the running comparison, in KLDivergence's reports.
	KL *KLStats
}

// Result is the perplexity over all scored tokens.
type Result struct {
	Context int // n_ctx
	Tokens  int // the text's tokens
	Chunks  int
	Count   int // tokens scored
	// NLL is the mean negative log-likelihood in nats; PPL = exp(NLL).
	NLL float64
	PPL float64
	// Uncertainty is PPL's standard error (llama-perplexity's ±).
	Uncertainty float64
	// Estimates are the running estimates after each chunk, as
	// llama-perplexity prints them: [1]…,[2]…
	Estimates []float64
	Elapsed   time.Duration
}

// Run tokenizes text and measures m's perplexity on it. It runs m's
// backend directly, so it must not run beside a generation on m.
func Run(ctx context.Context, m *gotok.Model, text string, o Options) (*Result, error) {
	nCtx, err := chunkContext(m, o.Context)
	if err != nil {
		return nil, err
	}
	tok := m.Tokenizer()
	if tok.AddEOS() {
		// Every chunk would end in EOS; llama-perplexity refuses too.
		return nil, errors.New("perplexity: the model's tokenizer appends EOS to every text, which perplexity does not support")
	}
	tokens := tok.Encode(text, true, false)
	chunks, err := Split(tokens, nCtx, o.Chunks, tok.BOS(), tok.AddBOS())
	if err != nil {
		return nil, err
	}
	var base *baseWriter
	if o.Base != nil {
		base, err = newBaseWriter(o.Base, nCtx, m.Config().VocabSize, tokens[:len(chunks)*nCtx])
		if err != nil {
			return nil, err
		}
	}
	sc := &chunkScorer{be: m.Backend(), vocab: m.Config().VocabSize}
	r := &Result{Context: nCtx, Tokens: len(tokens), Chunks: len(chunks)}
	var nll, nll2 float64
	start := time.Now()
	first := nCtx / 2
	for i, chunk := range chunks {
		err := sc.score(ctx, chunk, func(p int, logits []float32) error {
			v := -logSoftmax(logits, chunk[p+1])
			nll += v
			nll2 += v * v
			if base != nil {
				return base.write(logits)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("perplexity: chunk %d: %w", i+1, err)
		}
		r.Count += nCtx - 1 - first
		est := math.Exp(nll / float64(r.Count))
		r.Estimates = append(r.Estimates, est)
		if o.Progress != nil {
			o.Progress(Progress{Chunk: i + 1, Chunks: len(chunks), PPL: est, Elapsed: time.Since(start)})
		}
	}
	if base != nil {
		if err := base.flush(); err != nil {
			return nil, err
		}
	}
	r.Elapsed = time.Since(start)
	r.NLL, r.Uncertainty = meanAndError(nll, nll2, r.Count)
	r.PPL = math.Exp(r.NLL)
	r.Uncertainty *= r.PPL
	return r, nil
}

// chunkContext checks n_ctx against the model: it must fit the KV cache
// and the context the model was trained for.
func chunkContext(m *gotok.Model, nCtx int) (int, error) {
	if nCtx == 0 {
		nCtx = m.ContextLen()
	}
	switch {
	case nCtx < MinContext:
		return 0, fmt.Errorf("perplexity: a context of %d tokens is too small (at least %d)", nCtx, MinContext)
	case nCtx > m.Config().ContextLen:
		return 0, fmt.Errorf("perplexity: a context of %d tokens exceeds the %d the model was trained for", nCtx, m.Config().ContextLen)
	case nCtx > m.ContextLen():
		return 0, fmt.Errorf("perplexity: a context of %d tokens exceeds the KV cache of %d; load the model with a larger context", nCtx, m.ContextLen())
	}
	return nCtx, nil
}

// Split cuts tokens into chunks of nCtx tokens as llama-perplexity does:
// len(tokens)/nCtx of them (at most maxChunks when it is positive), the
// remainder dropped, and each chunk's first token replaced by bos when
// addBOS. The chunks are copies. A text shorter than two chunks is an
// error, as in llama-perplexity.
func Split(tokens []int32, nCtx, maxChunks int, bos int32, addBOS bool) ([][]int32, error) {
	if nCtx < MinContext {
		return nil, fmt.Errorf("perplexity: a context of %d tokens is too small (at least %d)", nCtx, MinContext)
	}
	if len(tokens) < 2*nCtx {
		return nil, fmt.Errorf("perplexity: you need at least %d tokens to evaluate perplexity with a context of %d: the text tokenizes to only %d tokens", 2*nCtx, nCtx, len(tokens))
	}
	return cut(tokens, nCtx, maxChunks, bos, addBOS), nil
}

// cut is Split without the length check.
func cut(tokens []int32, nCtx, maxChunks int, bos int32, addBOS bool) [][]int32 {
	n := len(tokens) / nCtx
	if maxChunks > 0 {
		n = min(n, maxChunks)
	}
	chunks := make([][]int32, n)
	for i := range chunks {
		c := append([]int32(nil), tokens[i*nCtx:(i+1)*nCtx]...)
		if addBOS {
			c[0] = bos
		}
		chunks[i] = c
	}
	return chunks
}

// scorePiece is how many positions a backend with every token's logits
// (backend.AllLogits) scores in one call: a batch of the CPU engine's head,
// 64 rows of the vocabulary's width.
const scorePiece = 64

// chunkScorer scores chunks on a model's backend of a vocabulary of vocab
// tokens, keeping the buffer of a piece's logits from chunk to chunk.
type chunkScorer struct {
	be    backend.Backend
	vocab int
	out   []float32 // scorePiece rows of logits, where be gives them all
}

// score runs chunk from position 0 and calls fn with the logits at each
// position p in [n/2, n-2], the distribution of token p+1: the first half
// is prefilled, then the second half runs so that each position's logits
// come back, scorePiece tokens at a time where the backend gives every
// token's logits, else a token at a time. The last token is never run:
// nothing after it is scored.
func (s *chunkScorer) score(ctx context.Context, chunk []int32, fn func(p int, logits []float32) error) error {
	be, vocab := s.be, s.vocab
	first := len(chunk) / 2
	if _, err := be.Prefill(ctx, chunk[:first], 0, nil); err != nil {
		return err
	}
	if all, ok := be.(backend.AllLogits); ok {
		if s.out == nil {
			s.out = make([]float32, scorePiece*vocab)
		}
		for p0 := first; p0 < len(chunk)-1; p0 += scorePiece {
			piece := chunk[p0:min(p0+scorePiece, len(chunk)-1)]
			if err := all.ForwardAll(ctx, piece, p0, s.out); err != nil {
				return err
			}
			for j := range piece {
				if err := fn(p0+j, s.out[j*vocab:(j+1)*vocab]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for p := first; p < len(chunk)-1; p++ {
		logits, err := be.Logits(ctx, chunk[p], p)
		if err != nil {
			return err
		}
		if err := fn(p, logits); err != nil {
			return err
		}
	}
	return nil
}

// logSoftmax is log p(tok) under logits, as llama-perplexity computes it:
// the shift by the maximum in float32, the sum of exponentials and the
// log in float64.
func logSoftmax(logits []float32, tok int32) float64 {
	maxLogit := logits[0]
	for _, l := range logits[1:] {
		maxLogit = max(maxLogit, l)
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - maxLogit))
	}
	return float64(logits[tok]-maxLogit) - math.Log(sum)
}

// meanAndError is the mean of n values from their sum and sum of squares,
// and the standard error of that mean (0 when it cannot be estimated).
func meanAndError(sum, sum2 float64, n int) (mean, stderr float64) {
	if n < 1 {
		return 0, 0
	}
	mean = sum / float64(n)
	v := sum2/float64(n) - mean*mean
	if v > 0 && n > 1 {
		stderr = math.Sqrt(v / float64(n-1))
	}
	return mean, stderr
}
