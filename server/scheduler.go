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
// in line, the rest turned away. The model itself still runs one
// generation at a time (one KV cache), so admitted requests take turns on
// it; engine holds that turn, and running counts the one holding it.
type scheduler struct {
	slots    chan struct{} // one per admitted request
	queueCap int64
	queued   atomic.Int64  // in line for a slot
	admitted atomic.Int64  // holding a slot, in line for the engine
	running  atomic.Int64  // generating on the engine
	engine   chan struct{} // the model's one generation at a time
}

// waiting is how many requests are not generating yet: in the queue or
// admitted and waiting for the engine (the number an inference gateway
// balances on).
func (s *scheduler) waiting() int64 { return s.queued.Load() + s.admitted.Load() }

func newScheduler(parallel, queue int) *scheduler {
	return &scheduler{
		slots:    make(chan struct{}, parallel),
		queueCap: int64(queue),
		engine:   make(chan struct{}, 1),
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
