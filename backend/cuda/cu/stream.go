package cu

import "unsafe"

// Stream is a CUDA stream (CUstream); 0 is the legacy default stream.
type Stream uintptr

// Event is a CUDA event (CUevent).
type Event uintptr

const (
	streamNonBlocking  = 1
	eventDisableTiming = 2
)

// NewStream creates a stream that does not synchronize with the default stream.
func (c *Context) NewStream() (Stream, error) {
	var s Stream
	err := c.do("cuStreamCreate", c.d.fn.cuStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking)
	return s, err
}

// DestroyStream releases s once its work is done.
func (c *Context) DestroyStream(s Stream) error {
	if s == 0 {
		return nil
	}
	return c.do("cuStreamDestroy", c.d.fn.cuStreamDestroy, uintptr(s))
}

// SyncStream waits for all work queued on s. A kernel fault shows up here.
func (c *Context) SyncStream(s Stream) error {
	return c.do("cuStreamSynchronize", c.d.fn.cuStreamSynchronize, uintptr(s))
}

// NewEvent creates an event that records time.
func (c *Context) NewEvent() (Event, error) {
	var e Event
	err := c.do("cuEventCreate", c.d.fn.cuEventCreate, uintptr(unsafe.Pointer(&e)), 0)
	return e, err
}

// NewSyncEvent creates an event without timing, for waiting on: cheaper to
// record and to wait for.
func (c *Context) NewSyncEvent() (Event, error) {
	var e Event
	err := c.do("cuEventCreate", c.d.fn.cuEventCreate, uintptr(unsafe.Pointer(&e)), eventDisableTiming)
	return e, err
}

// DestroyEvent releases e.
func (c *Context) DestroyEvent(e Event) error {
	if e == 0 {
		return nil
	}
	return c.do("cuEventDestroy", c.d.fn.cuEventDestroy, uintptr(e))
}

// Record enqueues e on s.
func (c *Context) Record(e Event, s Stream) error {
	return c.do("cuEventRecord", c.d.fn.cuEventRecord, uintptr(e), uintptr(s))
}

// WaitEvent makes the work queued on s after it wait until e's last record
// (before this call) has happened, without blocking the host.
func (c *Context) WaitEvent(s Stream, e Event) error {
	return c.do("cuStreamWaitEvent", c.d.fn.cuStreamWaitEvent, uintptr(s), uintptr(e), 0)
}

// SyncEvent waits until e has happened.
func (c *Context) SyncEvent(e Event) error {
	return c.do("cuEventSynchronize", c.d.fn.cuEventSynchronize, uintptr(e))
}

// Elapsed returns the milliseconds between two recorded events.
func (c *Context) Elapsed(start, end Event) (float32, error) {
	var ms float32
	err := c.do("cuEventElapsedTime", c.d.fn.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end))
	return ms, err
}
