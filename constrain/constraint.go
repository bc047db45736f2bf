package constrain

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Constraint is the state of one constrained generation: the text so far
// against a grammar, and which tokens of the vocabulary may come next. It is
// not safe for concurrent use; make one per generation.
type Constraint struct {
	g  *Grammar
	v  *Vocab
	ts []thread // the readings of the text so far
	// ended is set once an end-of-generation token was accepted.
	ended bool

	// The mask of the current state, computed on demand.
	fresh   bool
	allowed []uint64 // a bit per token
	bufs    [][]thread
	arena   arena
	// maskKey is the state the mask was computed for, with what cannot
	// change it left out (see key): inside a long string the state moves
	// but the mask stays, and a step reuses it.
	maskKey []thread
	keyBuf  []thread
	walks   int // masks computed by walking the vocabulary, for tests
}

// NewConstraint starts a constrained generation of g over the vocabulary v.
func NewConstraint(g *Grammar, v *Vocab) *Constraint {
	return &Constraint{
		g:       g,
		v:       v,
		ts:      start(g),
		allowed: make([]uint64, (v.size+63)/64),
		bufs:    make([][]thread, v.maxLen+1),
	}
}

// Complete reports whether the text so far is a whole value of the grammar,
// so that an end-of-generation token is allowed.
func (c *Constraint) Complete() bool { return complete(c.ts) }

// Done reports whether generation must end: the text is a whole value that
// nothing can extend (an object, array, string or literal has closed at the
// root; a root number may still take digits and is not done), or an
// end-of-generation token was accepted.
func (c *Constraint) Done() bool { return c.ended || finished(c.ts) }

// Allowed reports whether token id may come next.
func (c *Constraint) Allowed(id int32) bool {
	if id < 0 || int(id) >= c.v.size {
		return false
	}
	c.update()
	return c.allowed[id/64]&(1<<(id%64)) != 0
}

// Mask sets the logits of the tokens that may not come next to -Inf. It
// fails when logits is not one per token of the vocabulary, or when no
// token at all may come next (the vocabulary cannot spell any continuation:
// never the case for a vocabulary with all 256 bytes as tokens, as
// byte-level BPE and SentencePiece with byte fallback have).
func (c *Constraint) Mask(logits []float32) error {
	if len(logits) != c.v.size {
		return fmt.Errorf("constrain: %d logits for a vocabulary of %d tokens", len(logits), c.v.size)
	}
	c.update()
	any := false
	inf := float32(math.Inf(-1))
	for w, bits := range c.allowed {
		base := w * 64
		if bits == ^uint64(0) {
			any = true
			continue
		}
		if bits != 0 {
			any = true
		}
		for j := range min(64, len(logits)-base) {
			if bits&(1<<j) == 0 {
				logits[base+j] = inf
			}
		}
	}
	if !any {
		return errors.New("constrain: no token of the vocabulary can continue the text")
	}
	return nil
}

// Accept advances the state past token id, which must be allowed.
func (c *Constraint) Accept(id int32) error {
	if c.ended {
		return errors.New("constrain: token after the end of generation")
	}
	if c.v.IsEOG(id) {
		if !c.Complete() {
			return fmt.Errorf("constrain: end of generation (token %d) before the value is whole", id)
		}
		c.ended = true
		return nil
	}
	p := c.v.Bytes(id)
	if len(p) == 0 {
		return fmt.Errorf("constrain: token %d is not allowed in the text", id)
	}
	ts := c.ts
	for i, b := range p {
		ts = stepAll(nil, ts, b, nil)
		if len(ts) == 0 {
			return fmt.Errorf("constrain: token %d %q cannot continue the text at its byte %d", id, p, i)
		}
	}
	c.ts = ts
	c.fresh = false
	return nil
}

// update computes the mask of the current state, walking the vocabulary's
// trie together with the machine: a prefix the grammar refuses prunes every
// token below it.
func (c *Constraint) update() {
	if c.fresh {
		return
	}
	c.fresh = true
	if c.ended {
		clear(c.allowed)
		c.maskKey = c.maskKey[:0]
		return
	}
	c.keyBuf = c.key(c.keyBuf[:0])
	if len(c.maskKey) > 0 && slices.Equal(c.keyBuf, c.maskKey) {
		return
	}
	c.maskKey = append(c.maskKey[:0], c.keyBuf...)
	clear(c.allowed)
	if complete(c.ts) {
		for _, id := range c.v.eog {
			c.allowed[id/64] |= 1 << (id % 64)
		}
	}
	if finished(c.ts) {
		return
	}
	v := c.v
	c.walks++
	c.arena.reset()
	c.bufs[0] = c.ts
	for i := 0; i < len(v.label); {
		d := v.depth[i]
		next := stepAll(c.bufs[d][:0], c.bufs[d-1], v.label[i], &c.arena)
		c.bufs[d] = next
		if len(next) == 0 {
			i = int(v.skip[i])
			continue
		}
		for _, id := range v.endIDs[v.ends[i]:v.ends[i+1]] {
			c.allowed[id/64] |= 1 << (id % 64)
		}
		i++
	}
	c.bufs[0] = nil
}

// key appends the current threads to dst as a mask cache key: a string's
// length so far is left out when no token could bring it to its minimum or
// maximum (a token adds at most maxLen characters), since nothing else
// about the next token depends on it. Everything below the top frame is
// shared by pointer and never changes, so comparing pointers suffices.
func (c *Constraint) key(dst []thread) []thread {
	for _, t := range c.ts {
		f := &t.top
		if f.phase == strBody {
			n := f.n
			if int(f.count) >= n.minLen && (n.maxLen < 0 || n.maxLen-int(f.count) > c.v.maxLen) {
				t.top.count = -1
			}
		}
		dst = append(dst, t)
	}
	return dst
}
