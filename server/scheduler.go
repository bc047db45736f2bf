package server

import (
	"context"
	"errors"
	"sync/atomic"
)

// errQueueFull is a request turned away: every slot busy and the queue
// full.
var errQueueFull = errors.New("server: queue full")

// scheduler admits requests: Parallel at once, up to Queue more waiting
// in line, the rest turned away. A model that batches runs the admitted
// requests together (engine has a place for each); one that does not runs
// one generation at a time, so they take turns on it (engine has one
// place). running counts the requests holding a place.
type scheduler struct {
	slots    chan struct{} // one per admitted request
	queueCap int64
	queued   atomic.Int64  // in line for a slot
	admitted atomic.Int64  // holding a slot, in line for the engine
	running  atomic.Int64  // generating on the engine
	engine   chan struct{} // places on the model
}

// waiting is how many requests are not generating yet: in the queue or
// admitted and waiting for the engine (the number an inference gateway
// balances on).
func (s *scheduler) waiting() int64 { return s.queued.Load() + s.admitted.Load() }

func newScheduler(parallel, queue int, batches bool) *scheduler {
	places := 1
	if batches {
		places = parallel
	}
	return &scheduler{
		slots:    make(chan struct{}, parallel),
		queueCap: int64(queue),
		engine:   make(chan struct{}, places),
	}
}

// admit takes a slot, waiting in line if there is room in the queue. The
// release it returns must be called once.
func (s *scheduler) admit(ctx context.Context) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return s.releaseSlot, nil
	default:
	}
	if s.queued.Add(1) > s.queueCap {
		s.queued.Add(-1)
		return nil, errQueueFull
	}
	defer s.queued.Add(-1)
	select {
	case s.slots <- struct{}{}:
		return s.releaseSlot, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *scheduler) releaseSlot() { <-s.slots }

// run waits for the engine and runs f on it; waiting for it counts as
// waiting.
func (s *scheduler) run(ctx context.Context, f func()) error {
	s.admitted.Add(1)
	select {
	case s.engine <- struct{}{}:
		s.admitted.Add(-1)
	case <-ctx.Done():
		s.admitted.Add(-1)
		return ctx.Err()
	}
	s.running.Add(1)
	defer func() {
		s.running.Add(-1)
		<-s.engine
	}()
	f()
	return nil
}
