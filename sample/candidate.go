package sample

import (
	"math"
	"slices"
)

// candidate is a token still in the running, with its penalized logit.
type candidate struct {
	logit float32
	id    int32
}

// before is the candidates' order: logit descending, then id ascending.
// NaN logits never become candidates, so this is a total order.
func before(a, b candidate) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func compareCandidates(a, b candidate) int {
	switch {
	case before(a, b):
		return -1
	case before(b, a):
		return 1
	}
	return 0
}

// appendTopK appends the first k candidates of logits, in order, to dst.
// It keeps the k best seen so far in a heap whose root is the worst of them,
// so most logits cost one comparison with the root and no full sort happens.
func appendTopK(dst []candidate, logits []float32, k int) []candidate {
	dst = dst[:0]
	i := 0
	for ; i < len(logits) && len(dst) < k; i++ {
		if l := logits[i]; l == l {
			dst = append(dst, candidate{l, int32(i)})
			siftUp(dst, len(dst)-1)
		}
	}
	if len(dst) == k {
		// Ids only grow from here, so a logit equal to the root's loses the
		// tie: a strict comparison is exact. NaN fails it too. Testing four
		// logits per branch is about a quarter faster than one at a time.
		worst := dst[0].logit
		for ; i+4 <= len(logits); i += 4 {
			q := logits[i : i+4 : i+4]
			if q[0] > worst || q[1] > worst || q[2] > worst || q[3] > worst {
				for j, l := range q {
					if l > worst {
						dst[0] = candidate{l, int32(i + j)}
						siftDown(dst, 0)
						worst = dst[0].logit
					}
				}
			}
		}
		for ; i < len(logits); i++ {
			if l := logits[i]; l > worst {
				dst[0] = candidate{l, int32(i)}
				siftDown(dst, 0)
				worst = dst[0].logit
			}
		}
	}
	slices.SortFunc(dst, compareCandidates)
	return dst
}

// siftUp and siftDown maintain a heap whose root comes last in candidate order.
func siftUp(h []candidate, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !before(h[parent], h[i]) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func siftDown(h []candidate, i int) {
	for {
		worst := i
		if l := 2*i + 1; l < len(h) && before(h[worst], h[l]) {
			worst = l
		}
		if r := 2*i + 2; r < len(h) && before(h[worst], h[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

// shift is a logit relative to the largest one, m, in float64. Equal values
// give 0 so that infinite logits compare sanely: with m = +Inf the +Inf tokens
// get shift 0 and the rest -Inf; with m = -Inf every token gets 0.
func shift(l, m float32) float64 {
	if l == m {
		return 0
	}
	return float64(l) - float64(m)
}

// expShifts stores exp(shift/temp) of each candidate in w and returns their
// sum, accumulated in candidate order.
func expShifts(w []float64, c []candidate, m float32, temp float64) ([]float64, float64) {
	w = w[:0]
	z := 0.0
	for _, x := range c {
		e := math.Exp(shift(x.logit, m) / temp)
		w = append(w, e)
		z += e
	}
	return w, z
}
