package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool runs data-parallel loops on a fixed set of goroutines. Decode issues
// a few hundred parallel regions a token, so helpers are started once. A
// helper spins for poolSpin after each loop before it sleeps: the loops of
// a step come microseconds apart, and a sleeping goroutine takes longer
// than that to wake (through the scheduler and a futex), while its caller
// waits.
type pool struct {
	workers int
	helpers []*poolHelper // workers 1 … workers-1
	wg      sync.WaitGroup

	closeOnce sync.Once
}

// poolHelper is one helper goroutine's mailbox. The caller writes run and
// pending, then moves seq; the helper, seeing seq move, runs it.
type poolHelper struct {
	seq      atomic.Uint64
	run      func(worker int)
	pending  *atomic.Int32 // helpers still running the loop
	sleeping atomic.Bool
	wake     chan struct{} // capacity 1: a wake-up is never lost, may be stale
	quit     atomic.Bool
}

// poolSpin is how long a helper waits for the next loop awake. Between
// steps it sleeps, costing nothing.
const poolSpin = 100 * time.Microsecond

// chunksPerWorker is how many pieces parallelFor cuts a loop into for each
// worker: the caller starts at once, a helper a little later, and with one
// fixed range each the first to finish waited for the other.
const chunksPerWorker = 8

func newPool(workers int) *pool {
	p := &pool{workers: max(workers, 1)}
	for w := 1; w < p.workers; w++ {
		h := &poolHelper{wake: make(chan struct{}, 1)}
		p.helpers = append(p.helpers, h)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			h.loop(w)
		}()
	}
	return p
}

// loop runs the loops published to h as worker until the pool closes.
func (h *poolHelper) loop(worker int) {
	for seen := uint64(0); ; seen++ {
		if !h.await(seen, worker) {
			return
		}
		h.run(worker)
		h.pending.Add(-1)
	}
}

// await waits until seq moves past seen: spinning for poolSpin (yielding
// now and then), then asleep on wake. Worker spins only if there is a P
// for it beside the caller's: with more workers than Ps (a -t past
// GOMAXPROCS, several backends in one process), spinning helpers would
// take turns on the Ps the working ones need. It reports false when the
// pool closes.
func (h *poolHelper) await(seen uint64, worker int) bool {
	spin := poolSpin
	if worker >= runtime.GOMAXPROCS(0) {
		spin = 0
	}
	start := time.Now()
	for i := 1; h.seq.Load() == seen; i++ {
		if h.quit.Load() {
			return false
		}
		if i%64 != 0 {
			continue
		}
		runtime.Gosched()
		if time.Since(start) < spin {
			continue
		}
		// Set sleeping before the last look at seq, as the caller moves
		// seq before it looks at sleeping: one of the two sees the other.
		h.sleeping.Store(true)
		if h.seq.Load() == seen && !h.quit.Load() {
			<-h.wake
		}
		h.sleeping.Store(false)
		start = time.Now()
	}
	return true
}

// signal wakes h if it sleeps.
func (h *poolHelper) signal() {
	if h.sleeping.Load() {
		select {
		case h.wake <- struct{}{}:
		default: // a wake-up is already there
		}
	}
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
	helpers := min(p.workers, chunks) - 1
	var pending atomic.Int32
	pending.Store(int32(helpers))
	for _, h := range p.helpers[:helpers] {
		h.run, h.pending = run, &pending
		h.seq.Add(1)
		h.signal()
	}
	run(0)
	for i := 1; pending.Load() != 0; i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
}

func (p *pool) close() {
	p.closeOnce.Do(func() {
		for _, h := range p.helpers {
			h.quit.Store(true)
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
		p.wg.Wait()
	})
}
