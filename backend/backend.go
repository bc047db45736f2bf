// Package backend defines the seam between the generation engine and the
// compute backends (backend/cpu, backend/cuda).
package backend

import (
	"context"

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
