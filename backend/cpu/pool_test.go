package cpu

import (
	"sync/atomic"
	"testing"
)

// TestParallelFor: every index once, ranges of whole grains but the last,
// and no worker running two ranges at once (its scratch is its own).
func TestParallelFor(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8} {
		p := newPool(workers)
		for _, tc := range []struct{ n, grain int }{{0, 1}, {1, 16}, {5, 1}, {100, 16}, {1000, 1}, {4097, 16}} {
			seen := make([]atomic.Int32, tc.n)
			busy := make([]atomic.Int32, workers)
			var bad atomic.Int32
			p.parallelFor(tc.n, tc.grain, func(w, lo, hi int) {
				if w < 0 || w >= workers || busy[w].Add(1) != 1 {
					bad.Add(1)
					return
				}
				defer busy[w].Add(-1)
				if lo%tc.grain != 0 || (hi != tc.n && (hi-lo)%tc.grain != 0) || lo >= hi {
					bad.Add(1)
				}
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			})
			if bad.Load() != 0 {
				t.Errorf("%d workers, n %d grain %d: %d bad ranges or workers", workers, tc.n, tc.grain, bad.Load())
			}
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("%d workers, n %d grain %d: index %d run %d times", workers, tc.n, tc.grain, i, c)
				}
			}
		}
		p.close()
	}
}
