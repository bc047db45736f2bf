package tokenizer

// heap is a binary heap of candidate merges, highest priority (per before)
// on top. It is generic over the element so BPE and SPM share one heap
// without container/heap's interface boxing in the innermost loop.
type heap[T any, P interface {
	*T
	before(*T) bool
}] []T

func (h heap[T, P]) less(i, j int) bool { return P(&h[i]).before(&h[j]) }

func (q *heap[T, P]) push(x T) {
	*q = append(*q, x)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *heap[T, P]) pop() T {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		best, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h.less(l, best) {
			best = l
		}
		if r < len(h) && h.less(r, best) {
			best = r
		}
		if best == i {
			break
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
	*q = h
	return top
}
