package cu

import (
	"fmt"
	"unsafe"
)

// Result is a CUresult, the status code every driver call returns.
type Result int32

// Result codes this package looks at by value.
const (
	Success       Result = 0
	ErrNoDevice   Result = 100
	ErrNotReady   Result = 600
	ErrInvalidPTX Result = 218
)

// Error is a failed driver call: which call, its code and the driver's words.
type Error struct {
	Call string // driver function, e.g. "cuMemAlloc"
	Code Result
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // e.g. "out of memory"
	Log  string // the JIT error log, for failed module loads
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d): %s", e.Call, e.Name, int(e.Code), e.Msg)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// check turns a CUresult into nil or an *Error naming the call.
func (d *Driver) check(call string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: call, Code: r, Name: fmt.Sprintf("CUDA_ERROR_%d", int(r)), Msg: "unknown error"}
	var p unsafe.Pointer
	if d.call(d.fn.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&p))) == Success && p != nil {
		e.Name = cString(p)
	}
	p = nil
	if d.call(d.fn.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&p))) == Success && p != nil {
		e.Msg = cString(p)
	}
	return e
}

// cString copies a NUL-terminated C string that the driver owns.
func cString(p unsafe.Pointer) string {
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}
