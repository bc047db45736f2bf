package cpu

import "sync"

// pool runs data-parallel loops on a fixed set of goroutines. Decode issues
// a few hundred parallel regions a token, so workers are started once and
// fed through channels instead of spawning goroutines per region.
type pool struct {
	workers int
	jobs    chan poolJob
	wg      sync.WaitGroup

	closeOnce sync.Once
}

type poolJob struct {
	fn     func(lo, hi int)
	lo, hi int
	done   *sync.WaitGroup
}

func newPool(workers int) *pool {
	p := &pool{workers: max(workers, 1), jobs: make(chan poolJob)}
	for range p.workers - 1 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.jobs {
				j.fn(j.lo, j.hi)
				j.done.Done()
			}
		}()
	}
	return p
}

// parallelFor calls fn over [0, n) split into one contiguous range per
// worker, rounded to multiples of grain. The caller runs the first range.
func (p *pool) parallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	chunks := p.workers
	if g := (n + grain - 1) / grain; g < chunks {
		chunks = g
	}
	if chunks <= 1 {
		fn(0, n)
		return
	}
	per := (n + chunks - 1) / chunks
	per = (per + grain - 1) / grain * grain
	var done sync.WaitGroup
	for lo := per; lo < n; lo += per {
		done.Add(1)
		p.jobs <- poolJob{fn: fn, lo: lo, hi: min(lo+per, n), done: &done}
	}
	fn(0, min(per, n))
	done.Wait()
}

func (p *pool) close() {
	p.closeOnce.Do(func() {
		close(p.jobs)
		p.wg.Wait()
	})
}
