package sample

// history is the ring of the last n accepted tokens, with a count per distinct
// token so that penalties cost O(distinct tokens) per step, not O(n).
type history struct {
	n      int
	ring   []int32 // grows to n, then wraps; grown lazily so a huge n costs nothing up front
	oldest int     // once full: index of the oldest token, the next to be overwritten
	counts map[int32]int32
}

func newHistory(n int) history {
	return history{n: n, counts: make(map[int32]int32)}
}

func (h *history) add(tok int32) {
	if h.n <= 0 {
		return
	}
	if len(h.ring) < h.n {
		h.ring = append(h.ring, tok)
	} else {
		old := h.ring[h.oldest]
		if h.counts[old] <= 1 {
			delete(h.counts, old)
		} else {
			h.counts[old]--
		}
		h.ring[h.oldest] = tok
		h.oldest++
		if h.oldest == h.n {
			h.oldest = 0
		}
	}
	h.counts[tok]++
}

// tokens returns a copy of the history, oldest first.
func (h *history) tokens() []int32 {
	out := make([]int32, 0, len(h.ring))
	out = append(out, h.ring[h.oldest:]...)
	return append(out, h.ring[:h.oldest]...)
}

func (h *history) reset() {
	h.ring = h.ring[:0]
	h.oldest = 0
	clear(h.counts)
}
