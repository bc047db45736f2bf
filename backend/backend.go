// Package backend defines the seam between the generation engine and the
// compute backends (backend/cpu, backend/cuda).
package backend

import (
	"context"
	"fmt"

	"gotok/sample"
)

// Backend runs a loaded model's forward pass. Sampling lives behind it so a
// GPU backend can sample on the device and return only the token id; a nil
// sampler means greedy (the argmax, no penalties).
type Backend interface {
	// Prefill runs the prompt tokens starting at position pos, filling the KV
	// cache, and returns the token sampled from the last position's logits.
	Prefill(ctx context.Context, tokens []int32, pos int, s *sample.Sampler) (int32, error)
	// Decode runs one token at position pos and returns the sampled next token.
	Decode(ctx context.Context, token int32, pos int, s *sample.Sampler) (int32, error)
	// Logits runs one token at position pos and returns a copy of the full
	// logits (tests, debugging, log-probabilities).
	Logits(ctx context.Context, token int32, pos int) ([]float32, error)
	// ContextLen is the KV cache length in tokens: positions run from 0 to
	// ContextLen()-1.
	ContextLen() int
	// Name says what runs the model, e.g. "cpu (2 threads, avx2)" or the GPU name.
	Name() string
	Close() error
}

// Memory is what a backend holds for its model, in bytes: the weights as
// it keeps them, the KV cache, and the rest it allocated (activations and
// scratch; on a GPU also its kernels and graphs).
type Memory struct {
	Weights, KV, Other int64
	// Device says the bytes are in an accelerator's memory, not the host's.
	Device bool
}

// MemoryReporter is a backend that says what it holds (gotok run -v,
// gotok serve's log).
type MemoryReporter interface {
	Memory() Memory
}

// AllLogits is a Backend that returns the logits of every token of a
// batch, not only the last one's: a text is scored (perplexity, a
// prompt's log-probabilities) at prefill speed instead of a token at a
// time. A Batcher that implements it also fills SeqStep.AllLogits.
type AllLogits interface {
	// ForwardAll runs tokens at positions pos, pos+1, … as Prefill does
	// and writes each token's logits to out, len(tokens) rows of the
	// vocabulary's size.
	ForwardAll(ctx context.Context, tokens []int32, pos int, out []float32) error
}

// SeqStep is one sequence's part of a batched step: its next tokens, and
// what to return from the last one's logits.
type SeqStep struct {
	// Seq is the sequence the tokens extend: they go in at positions
	// Seq.Len(), Seq.Len()+1, …, and the step commits them to it. Room for
	// them must be reserved (Seq.Reserve).
	Seq    *Seq
	Tokens []int32
	// Logits, when not nil, receives the last token's logits (VocabSize
	// floats).
	Logits []float32
	// Sample asks for a token drawn from the last token's logits with
	// Sampler (nil: greedy); the step leaves it in Next (-1: no finite
	// logit, the forward pass gave NaN).
	Sample  bool
	Sampler *sample.Sampler
	Next    int32
	// AllLogits, when not nil, receives every token's logits, len(Tokens)
	// rows of VocabSize floats, from a Batcher that implements AllLogits
	// (the others refuse the step).
	AllLogits []float32
}

// Take fills st from its last token's logits, as a step does: a copy into
// Logits when set, and Next drawn with Sampler (the argmax when nil) when
// Sample is set.
func (st *SeqStep) Take(logits []float32) {
	if st.Logits != nil {
		copy(st.Logits, logits)
	}
	if !st.Sample {
		return
	}
	if st.Sampler == nil {
		st.Next = sample.Argmax(logits)
	} else {
		st.Next = st.Sampler.Sample(logits)
	}
}

// CheckSteps validates a batched step for a backend whose sequences come
// from pool, with contexts of ctxLen and a vocabulary of vocab tokens:
// every entry has a sequence of that pool (once in the step), tokens that
// fit its context and the room reserved for them, a logits buffer that
// holds a row, and, where the backend gives every token's logits
// (allLogits), an AllLogits buffer that holds a row a token; where it does
// not, no AllLogits.
func CheckSteps(steps []SeqStep, pool *KVPool, ctxLen, vocab int, allLogits bool) error {
	seen := make(map[*Seq]bool, len(steps))
	for i := range steps {
		st := &steps[i]
		if st.Seq == nil {
			return fmt.Errorf("step entry %d has no sequence", i)
		}
		if seen[st.Seq] {
			return fmt.Errorf("step entry %d: a sequence twice in one step", i)
		}
		seen[st.Seq] = true
		if err := CheckInput(st.Tokens, st.Seq.Len(), ctxLen, vocab); err != nil {
			return fmt.Errorf("step entry %d: %w", i, err)
		}
		if st.Seq.Pool() != pool {
			return fmt.Errorf("step entry %d: the sequence is of another backend's KV pool", i)
		}
		if room := st.Seq.Room(); room < len(st.Tokens) {
			return fmt.Errorf("step entry %d: %d tokens with room for %d reserved", i, len(st.Tokens), room)
		}
		if st.Logits != nil && len(st.Logits) < vocab {
			return fmt.Errorf("step entry %d: logits buffer of %d for %d tokens", i, len(st.Logits), vocab)
		}
		switch {
		case st.AllLogits != nil && !allLogits:
			return fmt.Errorf("step entry %d: this backend does not give every token's logits", i)
		case st.AllLogits != nil && len(st.AllLogits) < len(st.Tokens)*vocab:
			return fmt.Errorf("step entry %d: a buffer of %d for the logits of %d tokens of a vocabulary of %d", i, len(st.AllLogits), len(st.Tokens), vocab)
		}
	}
	return nil
}

// Batcher is a Backend that runs many sequences in one step (continuous
// batching): each sequence's keys and values live in blocks of one pool
// (KV), and a step takes some tokens of each, prompt chunks and single
// decode tokens alike. The single-sequence methods of Backend run on a
// sequence of the backend's own in the same pool.
type Batcher interface {
	Backend
	// KV is the pool Step's sequences come from.
	KV() *KVPool
	// Step runs every entry's tokens through the model together. On error
	// no sequence has been committed, though their reserved rows may have
	// been written.
	Step(ctx context.Context, steps []SeqStep) error
	// StepTokens is the most tokens a step should take: prompts are read
	// in chunks that keep a step near the time of one pass, so that the
	// sequences decoding beside them are not held back.
	StepTokens() int
}
