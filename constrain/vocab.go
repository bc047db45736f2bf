package constrain

import (
	"bytes"
	"slices"

	"gotok/tokenizer"
)

// Vocab is a model's vocabulary prepared for masking: the bytes of every
// token that can appear in JSON text, in a trie walked in preorder, so that
// the tokens sharing a prefix are checked against the grammar once for that
// prefix. Build it once per tokenizer (NewVocab takes tens of milliseconds
// for a 49k vocabulary) and share it: it is immutable and safe for
// concurrent use.
type Vocab struct {
	size   int
	eog    []int32  // end-of-generation tokens: allowed when the value is whole
	pieces [][]byte // bytes of each token; nil for tokens never allowed

	// The trie of the pieces, root excluded, in preorder.
	label  []byte   // the byte on the edge into each node
	depth  []uint16 // its depth: the length of its prefix
	skip   []int32  // the first node after its subtree
	ends   []int32  // ends[i]:ends[i+1] index the tokens whose bytes end at node i
	endIDs []int32
	maxLen int
}

// NewVocab prepares the vocabulary of tok. A token's bytes are its piece as
// generation emits it (byte-level BPE decoded to raw bytes, SentencePiece's
// ▁ as a space, <0xNN> as the byte). Control and unknown tokens, and tokens
// with no bytes, are never allowed; end-of-generation tokens are allowed
// exactly when the text is a whole value.
func NewVocab(tok *tokenizer.Tokenizer) *Vocab {
	pieces := make([][]byte, tok.VocabSize())
	for id := range pieces {
		id := int32(id)
		if tok.IsControl(id) || tok.IsEOG(id) || id == tok.Unknown() {
			continue
		}
		if p := tok.Piece(id); p != "" {
			pieces[id] = []byte(p)
		}
	}
	return newVocab(pieces, tok.EOG())
}

// newVocab builds the vocabulary of pieces (nil: a token never allowed)
// with end-of-generation tokens eog.
func newVocab(pieces [][]byte, eog []int32) *Vocab {
	v := &Vocab{size: len(pieces), pieces: pieces}
	for _, id := range eog {
		if id >= 0 && int(id) < len(pieces) {
			v.eog = append(v.eog, id)
			pieces[id] = nil
		}
	}
	var ids []int32
	for id, p := range pieces {
		if len(p) > 0 {
			ids = append(ids, int32(id))
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(pieces[a], pieces[b]) })

	// Sorted strings meet the trie in preorder: each adds the nodes past its
	// common prefix with the one before. The node each ends at never comes
	// before the last one's (it is the same node, or new), so the tokens in
	// sorted order list each node's tokens as one run.
	var path []int32 // path[d]: the node at depth d+1 on the current string's path
	var prev []byte
	var endNode []int32
	for _, id := range ids {
		p := pieces[id]
		lcp := 0
		for lcp < len(p) && lcp < len(prev) && p[lcp] == prev[lcp] {
			lcp++
		}
		path = path[:lcp]
		for d := lcp; d < len(p); d++ {
			path = append(path, int32(len(v.label)))
			v.label = append(v.label, p[d])
			v.depth = append(v.depth, uint16(d+1))
		}
		endNode = append(endNode, path[len(p)-1])
		prev = p
		v.maxLen = max(v.maxLen, len(p))
	}
	v.endIDs = ids
	v.ends = make([]int32, len(v.label)+1)
	for _, i := range endNode {
		v.ends[i+1]++
	}
	for i := 1; i < len(v.ends); i++ {
		v.ends[i] += v.ends[i-1]
	}

	v.skip = make([]int32, len(v.label))
	var open []int32 // nodes whose subtree has not ended
	for i, d := range v.depth {
		for len(open) > 0 && v.depth[open[len(open)-1]] >= d {
			v.skip[open[len(open)-1]] = int32(i)
			open = open[:len(open)-1]
		}
		open = append(open, int32(i))
	}
	for _, i := range open {
		v.skip[i] = int32(len(v.label))
	}
	return v
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return v.size }

// Bytes returns the bytes token id adds to the text, nil for a token that
// is never allowed (control, unknown, empty) or ends generation.
func (v *Vocab) Bytes(id int32) []byte {
	if id < 0 || int(id) >= len(v.pieces) {
		return nil
	}
	return v.pieces[id]
}

// IsEOG reports whether id ends generation.
func (v *Vocab) IsEOG(id int32) bool { return slices.Contains(v.eog, id) }

// Nodes is the number of nodes of the vocabulary's trie (what one mask
// walks at most).
func (v *Vocab) Nodes() int { return len(v.label) }
