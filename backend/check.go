package backend

import (
	"errors"
	"fmt"

	"gotok/model"
)

// DefaultMaxContext caps the default KV cache, so that models trained on
// long contexts do not allocate gigabytes unasked.
const DefaultMaxContext = 4096

// MaxKVBytes bounds the KV cache a backend allocates.
const MaxKVBytes = 16 << 30

// ErrClosed is returned by a backend used after Close.
var ErrClosed = errors.New("backend is closed")

// ContextLen resolves a requested KV cache length for c: requested when
// positive, else the model's own context capped at DefaultMaxContext. It
// refuses lengths whose f32 KV cache would pass MaxKVBytes, which would
// otherwise take the process down instead of returning an error.
func ContextLen(requested int, c *model.Config) (int, error) {
	return ContextLenKV(requested, c, 4)
}

// ContextLenKV is ContextLen for a KV cache of elemBytes a key or value
// element (2: float16).
func ContextLenKV(requested int, c *model.Config, elemBytes int) (int, error) {
	n := requested
	if n <= 0 {
		n = min(c.ContextLen, DefaultMaxContext)
	}
	if n <= 0 {
		return 0, fmt.Errorf("context length %d", n)
	}
	if n > 1<<24 {
		return 0, fmt.Errorf("a context of %d tokens is too large; lower --ctx", n)
	}
	if kv := int64(n) * int64(c.NumLayers) * int64(c.KVDim()) * 2 * int64(elemBytes); kv > MaxKVBytes {
		return 0, fmt.Errorf("a context of %d tokens needs a %.1f GiB KV cache (limit %d GiB); lower --ctx", n, float64(kv)/(1<<30), MaxKVBytes>>30)
	}
	return n, nil
}

// CheckInput validates tokens for positions pos, pos+1, … of a context of
// ctxLen tokens and a vocabulary of vocab tokens.
func CheckInput(tokens []int32, pos, ctxLen, vocab int) error {
	if len(tokens) == 0 {
		return errors.New("no tokens")
	}
	// len(tokens) > ctxLen-pos, not pos+len > ctxLen: pos near MaxInt
	// must not overflow past the check.
	if pos < 0 || pos > ctxLen || len(tokens) > ctxLen-pos {
		return fmt.Errorf("%d tokens at position %d do not fit the context of %d tokens", len(tokens), pos, ctxLen)
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("token id %d is out of range (vocabulary of %d)", t, vocab)
		}
	}
	return nil
}
