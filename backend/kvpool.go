package backend

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
)

// ErrKVFull is returned when the KV cache pool has no free block for a
// sequence's next tokens. A scheduler meets it by waiting or preempting.
var ErrKVFull = errors.New("the KV cache is full")

// KVPool hands out a backend's KV cache in blocks of BlockSize positions,
// so that sequences of different lengths share one allocation without each
// reserving a whole context (paged attention). Position p of a sequence
// lives in row Blocks()[p/BlockSize]·BlockSize + p%BlockSize of every
// layer's cache.
//
// Full blocks of sequences made with NewSeq are remembered by the tokens
// they hold and everything before them (the prefix cache): a later
// sequence whose prompt starts with the same tokens shares those blocks
// instead of recomputing them. A block no sequence holds stays cached until
// its room is needed, least recently used first. Only full blocks are
// shared, and a sequence never writes into a full block, so shared blocks
// need no copy on write.
//
// The pool is safe for concurrent use; a Seq is not.
type KVPool struct {
	blockSize int
	seed      maphash.Seed

	mu     sync.Mutex
	blocks []kvBlock
	free   []int32 // unheld and uncached
	// cached maps a full block's chain hash to the block; lru lists the
	// cached blocks no sequence holds, least recently used first.
	cached   map[uint64]int32
	lru      lruList
	held     int // blocks some sequence holds
	reusedT  int64
	computed int64
	// onFree runs first in Seq.Free (SetOnFree).
	onFree func(*Seq)
	// private are the sequences of NewPrivateSeq.
	private []*Seq
}

type kvBlock struct {
	refs int32
	hash uint64 // chain hash while in cached; 0 when not cached
	// parent and tokens say exactly what a cached block holds, so that a
	// hash collision cannot hand a sequence another prompt's keys.
	parent int32
	tokens []int32
	// prev and next link the unheld cached blocks (lru); -1 ends.
	prev, next int32
}

// NewKVPool makes a pool of tokens positions (rounded up to whole blocks).
func NewKVPool(tokens, blockSize int) (*KVPool, error) {
	if blockSize <= 0 || tokens <= 0 {
		return nil, fmt.Errorf("kv pool: %d tokens in blocks of %d", tokens, blockSize)
	}
	n := (tokens + blockSize - 1) / blockSize
	if n > 1<<30 {
		return nil, fmt.Errorf("kv pool: %d blocks", n)
	}
	p := &KVPool{blockSize: blockSize, seed: maphash.MakeSeed(), blocks: make([]kvBlock, n),
		free: make([]int32, n), cached: map[uint64]int32{}, lru: lruList{head: -1, tail: -1}}
	for i := range p.free {
		p.free[i] = int32(n - 1 - i) // pop from the end: block 0 first
		p.blocks[i].prev, p.blocks[i].next = -1, -1
	}
	return p, nil
}

// BlockSize is the positions a block holds.
func (p *KVPool) BlockSize() int { return p.blockSize }

// Blocks is the pool's size in blocks; Tokens in positions.
func (p *KVPool) Blocks() int { return len(p.blocks) }

// Tokens is the pool's size in positions.
func (p *KVPool) Tokens() int { return len(p.blocks) * p.blockSize }

// KVUsage reports the pool's use: blocks held by sequences (cached blocks
// nobody holds count as free, as in vLLM), and the prompt tokens that
// were reused from the prefix cache and computed since the pool was made.
type KVUsage struct {
	Held, Blocks     int
	Reused, Computed int64
}

// Usage reports what the pool holds.
func (p *KVPool) Usage() KVUsage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return KVUsage{Held: p.held, Blocks: len(p.blocks), Reused: p.reusedT, Computed: p.computed}
}

// SetOnFree has f run at the start of every Seq.Free, while the sequence
// still holds its blocks: a backend that keeps some of a sequence's rows
// elsewhere writes them back there. f runs on the goroutine that frees.
func (p *KVPool) SetOnFree(f func(*Seq)) { p.onFree = f }

// Available is the number of blocks a sequence could still take.
func (p *KVPool) Available() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free) + p.lru.n
}

// Seq is one sequence's view of the pool: the blocks that hold its
// positions 0, 1, …, Len()-1.
type Seq struct {
	pool   *KVPool
	blocks []int32
	// tokens are the ids at positions 0 … Len()-1; hashes[i] is the chain
	// hash of full block i (prefix-cached sequences only).
	tokens []int32
	hashes []uint64
	cache  bool
	closed bool
	reused int // prefix-cache tokens not yet counted in the pool's stats
}

// NewSeq starts a sequence that will hold prompt, sharing the cached
// blocks that already hold its leading tokens. reused is how many of
// prompt's tokens those blocks hold: the caller runs prompt[reused:] at
// positions reused, reused+1, …. At least the last token is left to run,
// since its logits are needed.
func (p *KVPool) NewSeq(prompt []int32) (s *Seq, reused int) {
	s = &Seq{pool: p, cache: true}
	p.mu.Lock()
	defer p.mu.Unlock()
	bs := p.blockSize
	var h uint64
	for (len(s.blocks)+1)*bs <= len(prompt)-1 {
		i := len(s.blocks)
		h = p.chain(h, prompt[i*bs:(i+1)*bs])
		b, ok := p.cached[h]
		if !ok || !p.holds(b, s.blocks, prompt[i*bs:(i+1)*bs]) {
			break
		}
		p.hold(b)
		s.blocks = append(s.blocks, b)
		s.hashes = append(s.hashes, h)
	}
	reused = len(s.blocks) * bs
	s.tokens = append(s.tokens, prompt[:reused]...)
	s.reused = reused // counted at the first Commit: a sequence that never runs saved nothing
	return s, reused
}

// NewPrivateSeq starts an empty sequence outside the prefix cache, for a
// caller that rewrites positions (Truncate) as the single-sequence
// Backend API does. Its blocks are the pool's last resort: when a Reserve
// finds no other room, private sequences give theirs up and are left
// empty (Len 0), so that a backend used directly and then through a
// batching engine does not keep blocks the engine needs.
func (p *KVPool) NewPrivateSeq() *Seq {
	s := &Seq{pool: p}
	p.mu.Lock()
	p.private = append(p.private, s)
	p.mu.Unlock()
	return s
}

// chain hashes a block's tokens after the hash of the blocks before it.
func (p *KVPool) chain(prev uint64, tokens []int32) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	var b [8]byte
	for i := range 8 {
		b[i] = byte(prev >> (8 * i))
	}
	h.Write(b[:])
	for _, t := range tokens {
		h.Write([]byte{byte(t), byte(t >> 8), byte(t >> 16), byte(t >> 24)})
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1 // 0 means "not cached"
}

// holds reports whether cached block b follows the blocks before and
// holds tokens.
func (p *KVPool) holds(b int32, before []int32, tokens []int32) bool {
	blk := &p.blocks[b]
	parent := int32(-1)
	if n := len(before); n > 0 {
		parent = before[n-1]
	}
	return blk.parent == parent && slices.Equal(blk.tokens, tokens)
}

// reclaimPrivate empties every private sequence but except, returning
// their blocks (p.mu held).
func (p *KVPool) reclaimPrivate(except *Seq) {
	for _, q := range p.private {
		if q == except || q.closed {
			continue
		}
		for i := len(q.blocks) - 1; i >= 0; i-- {
			p.release(q.blocks[i])
		}
		q.blocks, q.tokens = q.blocks[:0], q.tokens[:0]
	}
}

// hold takes a reference to block b, taking it off the LRU list if it was
// unheld.
func (p *KVPool) hold(b int32) {
	blk := &p.blocks[b]
	if blk.refs == 0 {
		p.held++
		if blk.hash != 0 {
			p.lru.remove(p.blocks, b)
		}
	}
	blk.refs++
}

// release drops a reference to block b.
func (p *KVPool) release(b int32) {
	blk := &p.blocks[b]
	blk.refs--
	if blk.refs > 0 {
		return
	}
	p.held--
	if blk.hash != 0 {
		p.lru.pushBack(p.blocks, b)
	} else {
		p.free = append(p.free, b)
	}
}

// take returns a block for new positions: a free one, else the least
// recently used cached one, forgotten.
func (p *KVPool) take() (int32, bool) {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		p.hold(b)
		return b, true
	}
	b := p.lru.head
	if b < 0 {
		return -1, false
	}
	p.lru.remove(p.blocks, b)
	delete(p.cached, p.blocks[b].hash)
	p.blocks[b].hash, p.blocks[b].tokens = 0, nil
	p.hold(b)
	return b, true
}

// Pool is the pool the sequence's blocks come from.
func (s *Seq) Pool() *KVPool { return s.pool }

// Room is the positions reserved past Len.
func (s *Seq) Room() int { return len(s.blocks)*s.pool.blockSize - len(s.tokens) }

// Len is the number of positions the sequence holds.
func (s *Seq) Len() int { return len(s.tokens) }

// Table is the sequence's block table: entry i holds positions
// i·BlockSize … (i+1)·BlockSize-1. It covers Len() positions plus any
// reserved with Reserve; the slice is the Seq's own and changes with it.
func (s *Seq) Table() []int32 { return s.blocks }

// Row is the cache row of position pos.
func (s *Seq) Row(pos int) int {
	bs := s.pool.blockSize
	return int(s.blocks[pos/bs])*bs + pos%bs
}

// Reserve makes room for n more positions, taking blocks from the pool.
// It fails with ErrKVFull, taking nothing, when the pool lacks them.
func (s *Seq) Reserve(n int) error {
	if s.closed {
		return errors.New("kv pool: sequence is freed")
	}
	bs := s.pool.blockSize
	need := (len(s.tokens)+n+bs-1)/bs - len(s.blocks)
	if need <= 0 {
		return nil
	}
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if need > len(p.free)+p.lru.n {
		p.reclaimPrivate(s)
	}
	if need > len(p.free)+p.lru.n {
		return ErrKVFull
	}
	for range need {
		b, _ := p.take()
		s.blocks = append(s.blocks, b)
	}
	return nil
}

// Commit records that the backend wrote tokens at positions Len(), …:
// room for them must have been reserved. Blocks they fill join the prefix
// cache.
func (s *Seq) Commit(tokens []int32) {
	bs := s.pool.blockSize
	if len(s.tokens)+len(tokens) > len(s.blocks)*bs {
		panic(fmt.Sprintf("kv pool: commit of %d tokens past the %d reserved positions", len(tokens), len(s.blocks)*bs-len(s.tokens)))
	}
	s.tokens = append(s.tokens, tokens...)
	if !s.cache {
		return
	}
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.computed += int64(len(tokens))
	p.reusedT += int64(s.reused)
	s.reused = 0
	for len(s.hashes) < len(s.tokens)/bs {
		i := len(s.hashes)
		var prev uint64
		if i > 0 {
			prev = s.hashes[i-1]
		}
		h := p.chain(prev, s.tokens[i*bs:(i+1)*bs])
		s.hashes = append(s.hashes, h)
		if _, ok := p.cached[h]; !ok && p.blocks[s.blocks[i]].hash == 0 {
			blk := &p.blocks[s.blocks[i]]
			p.cached[h] = s.blocks[i]
			blk.hash, blk.parent = h, -1
			if i > 0 {
				blk.parent = s.blocks[i-1]
			}
			blk.tokens = append(blk.tokens[:0], s.tokens[i*bs:(i+1)*bs]...)
		}
	}
}

// Truncate drops positions n and later, so that they can be written
// again. Only a sequence from NewPrivateSeq may truncate.
func (s *Seq) Truncate(n int) error {
	if n < 0 || n > len(s.tokens) {
		return fmt.Errorf("kv pool: truncate a sequence of %d positions to %d", len(s.tokens), n)
	}
	if s.cache && n < len(s.tokens) {
		return errors.New("kv pool: a prefix-cached sequence cannot be truncated")
	}
	s.tokens = s.tokens[:n]
	return nil
}

// Free returns the sequence's blocks to the pool; its full blocks stay in
// the prefix cache until their room is needed. The Seq must not be used
// afterwards; a second Free does nothing.
func (s *Seq) Free() {
	if s.closed {
		return
	}
	p := s.pool
	if p.onFree != nil {
		p.onFree(s)
	}
	s.closed = true
	p.mu.Lock()
	defer p.mu.Unlock()
	if !s.cache {
		for i, q := range p.private {
			if q == s {
				p.private = append(p.private[:i], p.private[i+1:]...)
				break
			}
		}
	}
	// Last block first, so that a prefix's later blocks are evicted before
	// its earlier ones.
	for i := len(s.blocks) - 1; i >= 0; i-- {
		p.release(s.blocks[i])
	}
	s.blocks, s.tokens, s.hashes = nil, nil, nil
}

// lruList is a doubly linked list threaded through the blocks.
type lruList struct {
	head, tail int32
	n          int
}

func (l *lruList) pushBack(bs []kvBlock, b int32) {
	bs[b].prev, bs[b].next = l.tail, -1
	if l.tail >= 0 {
		bs[l.tail].next = b
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

func (l *lruList) remove(bs []kvBlock, b int32) {
	prev, next := bs[b].prev, bs[b].next
	if prev >= 0 {
		bs[prev].next = next
	} else {
		l.head = next
	}
	if next >= 0 {
		bs[next].prev = prev
	} else {
		l.tail = prev
	}
	bs[b].prev, bs[b].next = -1, -1
	l.n--
}
