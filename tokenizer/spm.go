package tokenizer

import "strings"

// spmModel is llama.cpp's SentencePiece-style BPE (llm_tokenizer_spm): the
// text, spaces escaped as ▁, starts as one symbol per UTF-8 character, and the
// adjacent pair whose concatenation is the highest-scoring token is merged
// until no pair forms a token. Characters no token covers become byte tokens.
type spmModel struct {
	ids    map[string]int32
	scores []float32
	// byteToken is the token for each byte: <0xNN>, else the one-byte token,
	// else unk (-1 when there is none: the byte is dropped).
	byteToken [256]int32
	// wordSplit: no token has a ▁ after another character, so words can be
	// merged one at a time (see encode).
	wordSplit bool
}

const spaceEscape = "\u2581" // ▁

func newSPMModel(ids map[string]int32, scores []float32, unk int32) *spmModel {
	m := &spmModel{ids: ids, scores: scores}
	const hex = "0123456789ABCDEF"
	for b := 0; b < 256; b++ {
		name := string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})
		if id, ok := ids[name]; ok {
			m.byteToken[b] = id
		} else if id, ok := ids[string([]byte{byte(b)})]; ok {
			m.byteToken[b] = id
		} else {
			m.byteToken[b] = unk
		}
	}
	m.wordSplit = true
	for text := range ids {
		if spaceInside(text) {
			m.wordSplit = false
			break
		}
	}
	return m
}

// spaceInside reports whether text has a ▁ right after a character other
// than ▁.
func spaceInside(text string) bool {
	for i := 1; i < len(text); i++ {
		k := strings.Index(text[i:], spaceEscape)
		if k < 0 {
			return false
		}
		i += k
		if !strings.HasSuffix(text[:i], spaceEscape) {
			return true
		}
	}
	return false
}

type spmSymbol struct {
	start, n   int32 // bytes of the escaped text; n == 0 once merged away
	prev, next int32
}

type spmBigram struct {
	score       float32
	left, right int32
	size        int32 // bytes of both symbols when queued: stale if they changed
}

// before orders SPM merges: highest score first, then leftmost.
func (a *spmBigram) before(b *spmBigram) bool {
	return a.score > b.score || a.score == b.score && a.left < b.left
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length a lead byte
// announces, without validation.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xc, 0xd:
		return 2
	case 0xe:
		return 3
	case 0xf:
		return 4
	}
	return 1
}

// encode appends the tokens of text, which has its spaces escaped already.
//
// Where no token can span a word boundary (a ▁ after another character),
// which holds for SentencePiece vocabularies, merging each word on its own
// gives the same result as merging the whole text, much faster: merges never
// cross the boundary, and within a word they happen in the same order.
func (m *spmModel) encode(text string, out []int32) []int32 {
	if !m.wordSplit {
		return m.encodeHeap(text, out)
	}
	start, prevSpace := 0, false
	for offs := 0; offs < len(text); {
		n := min(utf8Len(text[offs]), len(text)-offs)
		space := n == len(spaceEscape) && text[offs:offs+n] == spaceEscape
		if space && !prevSpace && offs > start {
			out = m.encodeWord(text[start:offs], out)
			start = offs
		}
		prevSpace = space
		offs += n
	}
	return m.encodeWord(text[start:], out)
}

// encodeWord merges a short text by scanning all adjacent pairs for the best
// one; longer texts go to encodeHeap.
func (m *spmModel) encodeWord(text string, out []int32) []int32 {
	var symBuf [shortWord]spmSymbol
	syms := symBuf[:0]
	for offs := 0; offs < len(text); {
		if len(syms) == shortWord {
			return m.encodeHeap(text, out)
		}
		n := min(utf8Len(text[offs]), len(text)-offs)
		syms = append(syms, spmSymbol{start: int32(offs), n: int32(n)})
		offs += n
	}
	if len(syms) == 0 {
		return out
	}
	// pairs[i] is the token of syms[i]+syms[i+1], or -1.
	var pairBuf [shortWord]int32
	pairs := pairBuf[:len(syms)-1]
	pair := func(i int) int32 {
		l, r := syms[i], syms[i+1]
		if id, ok := m.ids[text[l.start:r.start+r.n]]; ok {
			return id
		}
		return -1
	}
	for i := range pairs {
		pairs[i] = pair(i)
	}
	for {
		best := -1
		var bestScore float32
		for i, id := range pairs {
			if id >= 0 && (best < 0 || m.scores[id] > bestScore) { // strict: the leftmost of equal scores
				best, bestScore = i, m.scores[id]
			}
		}
		if best < 0 {
			break
		}
		syms[best].n += syms[best+1].n
		syms = append(syms[:best+1], syms[best+2:]...)
		pairs = append(pairs[:best], pairs[best+1:]...)
		if best > 0 {
			pairs[best-1] = pair(best - 1)
		}
		if best < len(pairs) {
			pairs[best] = pair(best)
		}
	}
	for _, s := range syms {
		out = m.emit(out, text[s.start:s.start+s.n])
	}
	return out
}

// emit appends the token of one final symbol, or its bytes as byte tokens.
func (m *spmModel) emit(out []int32, s string) []int32 {
	if id, ok := m.ids[s]; ok {
		return append(out, id)
	}
	for j := 0; j < len(s); j++ {
		if id := m.byteToken[s[j]]; id >= 0 {
			out = append(out, id)
		}
	}
	return out
}

// encodeHeap is llama.cpp's llm_tokenizer_spm_session on the whole text: a
// priority queue of adjacent pairs by (score, position), stale entries
// skipped. It is the reference encode is tested against.
func (m *spmModel) encodeHeap(text string, out []int32) []int32 {
	if text == "" {
		return out
	}
	syms := make([]spmSymbol, 0, len(text))
	for offs := 0; offs < len(text); {
		n := min(utf8Len(text[offs]), len(text)-offs)
		i := int32(len(syms))
		syms = append(syms, spmSymbol{start: int32(offs), n: int32(n), prev: i - 1, next: i + 1})
		offs += n
	}
	syms[len(syms)-1].next = -1

	var q heap[spmBigram, *spmBigram]
	add := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		if id, ok := m.ids[text[l.start:r.start+r.n]]; ok {
			q.push(spmBigram{score: m.scores[id], left: left, right: right, size: l.n + r.n})
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		add(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		add(l.prev, b.left)
		add(b.left, l.next)
	}
	for i := int32(0); i != -1; i = syms[i].next {
		out = m.emit(out, text[syms[i].start:syms[i].start+syms[i].n])
	}
	return out
}

// escapeSpaces replaces every space with ▁, as llama.cpp's
// llama_escape_whitespace does before SPM tokenization.
func escapeSpaces(s string) string {
	return strings.ReplaceAll(s, " ", spaceEscape)
}
