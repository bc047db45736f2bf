package cpu

import (
	"sync"
	"sync/atomic"
)

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
	run    func(worker int)
	worker int
	done   *sync.WaitGroup
}

// chunksPerWorker is how many pieces parallelFor cuts a loop into for each
// worker: the caller starts at once, a woken worker some microseconds
// later, and with one fixed range each the first to finish waited for the
// other.
const chunksPerWorker = 8

func newPool(workers int) *pool {
	p := &pool{workers: max(workers, 1), jobs: make(chan poolJob)}
	for range p.workers - 1 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.jobs {
				j.run(j.worker)
				j.done.Done()
			}
		}()
	}
	return p
}

// parallelFor calls fn over [0, n) in contiguous ranges, multiples of grain
// but the last, which the caller and the workers take in turn until none
// is left: whoever is free takes the next. worker (0 … workers-1) says
// who runs the range, for scratch space of its own: within one
// parallelFor no two calls with one worker run at once. One loop at a
// time: a pool is its backend's, which steps one batch at a time (and a
// loop inside fn would wait on the workers it holds).
func (p *pool) parallelFor(n, grain int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	chunks := min(p.workers*chunksPerWorker, (n+grain-1)/grain)
	if p.workers == 1 || chunks <= 1 {
		fn(0, 0, n)
		return
	}
	per := (n + chunks - 1) / chunks
	per = (per + grain - 1) / grain * grain
	var next atomic.Int64
	run := func(worker int) {
		for {
			lo := int(next.Add(int64(per))) - per
			if lo >= n {
				return
			}
			fn(worker, lo, min(lo+per, n))
		}
	}
	var done sync.WaitGroup
	for w := 1; w < min(p.workers, chunks); w++ {
		done.Add(1)
		p.jobs <- poolJob{run: run, worker: w, done: &done}
	}
	run(0)
	done.Wait()
}

func (p *pool) close() {
	p.closeOnce.Do(func() {
		close(p.jobs)
		p.wg.Wait()
	})
}
