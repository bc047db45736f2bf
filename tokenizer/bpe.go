package tokenizer

import (
	"fmt"
	"math"
	"strings"
)

// bpeModel merges the pieces of byte-level BPE. Symbols are token ids: every
// merge names two tokens and produces a third (checked at load), so merging
// ids is the same as llama.cpp merging strings.
type bpeModel struct {
	// byteToken is the token of each byte's byte-level character, or
	// missingByte(b) when the vocabulary lacks it.
	byteToken [256]int32
	// byteFallback is what llama.cpp emits for a byte whose character is not
	// a token: each byte of the character's UTF-8 form that is a one-byte
	// token (in practice nothing).
	byteFallback [256][]int32
	merges       map[uint64]bpeMerge
	// whole maps the raw bytes of every byte-level token to its id, for
	// pre-tokenizers that emit a piece that is a token as a whole unmerged;
	// nil otherwise.
	whole map[string]int32
}

type bpeMerge struct {
	rank int32 // position in tokenizer.ggml.merges: lower merges first
	id   int32 // the merged token
}

const noRank = math.MaxInt32

func mergeKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// missingByte marks a symbol whose byte has no token; it never merges.
func missingByte(b byte) int32 { return -1 - int32(b) }

func newBPEModel(tokens []string, ids map[string]int32, merges []string, ignoreMerges bool) (*bpeModel, error) {
	m := &bpeModel{merges: make(map[uint64]bpeMerge, len(merges))}
	for b := 0; b < 256; b++ {
		if id, ok := ids[byteToUTF8s[b]]; ok {
			m.byteToken[b] = id
			continue
		}
		m.byteToken[b] = missingByte(byte(b))
		s := byteToUTF8s[b]
		for i := 0; i < len(s); i++ {
			if id, ok := ids[s[i:i+1]]; ok {
				m.byteFallback[b] = append(m.byteFallback[b], id)
			}
		}
	}
	for i, merge := range merges {
		// llama.cpp splits at the first space after the first byte.
		k := -1
		if len(merge) > 1 {
			k = strings.IndexByte(merge[1:], ' ')
		}
		if k < 0 {
			return nil, fmt.Errorf("tokenizer: merge %d %q is not two tokens separated by a space", i, merge)
		}
		left, right := merge[:k+1], merge[k+2:]
		lid, lok := ids[left]
		rid, rok := ids[right]
		mid, mok := ids[left+right]
		switch {
		case !lok:
			return nil, fmt.Errorf("tokenizer: merge %d %q names unknown token %q", i, merge, left)
		case !rok:
			return nil, fmt.Errorf("tokenizer: merge %d %q names unknown token %q", i, merge, right)
		case !mok:
			return nil, fmt.Errorf("tokenizer: merge %d %q makes %q, which is not a token", i, merge, left+right)
		}
		key := mergeKey(lid, rid)
		if _, dup := m.merges[key]; !dup { // the first rank wins, as in llama.cpp
			m.merges[key] = bpeMerge{rank: int32(i), id: mid}
		}
	}
	if ignoreMerges {
		m.whole = make(map[string]int32, len(tokens))
		for id, text := range tokens {
			if raw, ok := byteLevelDecode(text); ok {
				m.whole[raw] = int32(id)
			}
		}
	}
	return m, nil
}

// pairRank returns the merge of the adjacent symbols left, right.
func (m *bpeModel) pairRank(left, right int32) bpeMerge {
	if left < 0 || right < 0 {
		return bpeMerge{rank: noRank}
	}
	if mg, ok := m.merges[mergeKey(left, right)]; ok {
		return mg
	}
	return bpeMerge{rank: noRank}
}

// emit appends symbol s to out, resolving bytes that have no token.
func (m *bpeModel) emit(out []int32, s int32) []int32 {
	if s >= 0 {
		return append(out, s)
	}
	return append(out, m.byteFallback[-1-s]...)
}

// shortWord is the longest piece merged with the quadratic array scan; longer
// pieces (long runs of spaces or symbols) use the heap.
const shortWord = 48

// encodeWord appends the tokens of one pre-tokenized piece of raw bytes.
func (m *bpeModel) encodeWord(word string, out []int32) []int32 {
	if m.whole != nil {
		if id, ok := m.whole[word]; ok {
			return append(out, id)
		}
	}
	n := len(word)
	if n == 1 {
		return m.emit(out, m.byteToken[word[0]])
	}
	if n > shortWord {
		return m.encodeWordHeap(word, out)
	}
	// syms[i] is symbol i; pairs[i] the merge of syms[i] and syms[i+1].
	var symBuf [shortWord]int32
	var pairBuf [shortWord]bpeMerge
	syms, pairs := symBuf[:n], pairBuf[:n-1]
	for i := 0; i < n; i++ {
		syms[i] = m.byteToken[word[i]]
	}
	for i := range pairs {
		pairs[i] = m.pairRank(syms[i], syms[i+1])
	}
	for len(syms) > 1 {
		best := -1
		bestRank := int32(noRank)
		for i, p := range pairs {
			if p.rank < bestRank { // strict: the leftmost of equal ranks
				best, bestRank = i, p.rank
			}
		}
		if best < 0 {
			break
		}
		syms[best] = pairs[best].id
		copy(syms[best+1:], syms[best+2:])
		syms = syms[:len(syms)-1]
		copy(pairs[best:], pairs[best+1:])
		pairs = pairs[:len(pairs)-1]
		if best > 0 {
			pairs[best-1] = m.pairRank(syms[best-1], syms[best])
		}
		if best < len(pairs) {
			pairs[best] = m.pairRank(syms[best], syms[best+1])
		}
	}
	for _, s := range syms {
		out = m.emit(out, s)
	}
	return out
}

// bpeSymbol is a symbol of the linked list encodeWordHeap merges in place.
type bpeSymbol struct {
	id         int32 // token id, missingByte(b), or mergedAway
	prev, next int32 // neighbours, -1 at the ends
}

const mergedAway = math.MinInt32

type bpeBigram struct {
	rank        int32
	left, right int32 // symbol indices
	lid, rid    int32 // their ids when queued: a bigram is stale once either changed
	id          int32 // the merged token
}

// before orders BPE merges: lowest rank first, then leftmost.
func (a *bpeBigram) before(b *bpeBigram) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

// encodeWordHeap merges like llama.cpp's llm_tokenizer_bpe_session: a
// priority queue of adjacent pairs by (rank, position), stale entries skipped.
// It takes O(n log n) on long pieces and is the reference encodeWord is
// tested against.
func (m *bpeModel) encodeWordHeap(word string, out []int32) []int32 {
	n := int32(len(word))
	syms := make([]bpeSymbol, n)
	for i := int32(0); i < n; i++ {
		syms[i] = bpeSymbol{id: m.byteToken[word[i]], prev: i - 1, next: i + 1}
	}
	syms[n-1].next = -1
	var q heap[bpeBigram, *bpeBigram]
	add := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		lid, rid := syms[left].id, syms[right].id
		if mg := m.pairRank(lid, rid); mg.rank != noRank {
			q.push(bpeBigram{rank: mg.rank, left: left, right: right, lid: lid, rid: rid, id: mg.id})
		}
	}
	for i := int32(1); i < n; i++ {
		add(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.id != b.lid || r.id != b.rid || l.next != b.right {
			continue
		}
		l.id, r.id = b.id, mergedAway
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		add(l.prev, b.left)
		add(b.left, l.next)
	}
	for i := int32(0); i != -1; i = syms[i].next {
		out = m.emit(out, syms[i].id)
	}
	return out
}

// encode appends the tokens of text (normalized UTF-8) split by pre.
func (m *bpeModel) encode(text string, pre *preTokenizer, out []int32) []int32 {
	start := 0
	for _, end := range splitPieces(text, pre.steps) {
		out = m.encodeWord(text[start:end], out)
		start = end
	}
	return out
}
