package cu

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// Offset returns p advanced by n bytes.
func (p DevicePtr) Offset(n int) DevicePtr { return p + DevicePtr(n) }

// Alloc allocates n bytes of device memory. The contents are undefined.
func (c *Context) Alloc(n int) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: cuMemAlloc: invalid size %d", n)
	}
	var p DevicePtr
	if err := c.do("cuMemAlloc", c.d.fn.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)); err != nil {
		return 0, fmt.Errorf("%w (asked for %d bytes)", err, n)
	}
	return p, nil
}

// Free releases device memory from Alloc. Freeing 0 does nothing.
func (c *Context) Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return c.do("cuMemFree", c.d.fn.cuMemFree, uintptr(p))
}

// CopyHtoD copies src to device memory at dst and waits for it.
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.do("cuMemcpyHtoD", c.d.fn.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
}

// CopyDtoH copies len(dst) bytes from device memory at src into dst and waits.
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.do("cuMemcpyDtoH", c.d.fn.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)))
}

// CopyDtoD copies n bytes between device buffers and waits.
func (c *Context) CopyDtoD(dst, src DevicePtr, n int) error {
	return c.do("cuMemcpyDtoD", c.d.fn.cuMemcpyDtoD, uintptr(dst), uintptr(src), uintptr(n))
}

// CopyDtoDAsync enqueues a device-to-device copy of n bytes on s.
func (c *Context) CopyDtoDAsync(dst, src DevicePtr, n int, s Stream) error {
	return c.do("cuMemcpyDtoDAsync", c.d.fn.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

// MemsetD32 sets n 32-bit words at p to v and waits.
func (c *Context) MemsetD32(p DevicePtr, v uint32, n int) error {
	return c.do("cuMemsetD32", c.d.fn.cuMemsetD32, uintptr(p), uintptr(v), uintptr(n))
}

// MemsetD32Async enqueues setting n 32-bit words at p to v on s.
func (c *Context) MemsetD32Async(p DevicePtr, v uint32, n int, s Stream) error {
	return c.do("cuMemsetD32Async", c.d.fn.cuMemsetD32Async, uintptr(p), uintptr(v), uintptr(n), uintptr(s))
}

// MemsetD8 sets n bytes at p to v and waits.
func (c *Context) MemsetD8(p DevicePtr, v byte, n int) error {
	return c.do("cuMemsetD8", c.d.fn.cuMemsetD8, uintptr(p), uintptr(v), uintptr(n))
}

// HostBuffer is page-locked (pinned) host memory: the only host memory that
// asynchronous copies and captured graphs may read or write.
type HostBuffer struct {
	p     unsafe.Pointer
	Bytes []byte // the whole buffer, backed by pinned memory
	// Device is the buffer's address for kernels: they may read and write
	// it directly, over the bus, with no copy node in a graph.
	Device DevicePtr
}

// AllocHost allocates n bytes of pinned host memory.
func (c *Context) AllocHost(n int) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: cuMemAllocHost: invalid size %d", n)
	}
	var p unsafe.Pointer
	if err := c.do("cuMemAllocHost", c.d.fn.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n)); err != nil {
		return nil, err
	}
	h := &HostBuffer{p: p, Bytes: unsafe.Slice((*byte)(p), n)}
	if err := c.do("cuMemHostGetDevicePointer", c.d.fn.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&h.Device)), uintptr(p), 0); err != nil {
		c.FreeHost(h)
		return nil, err
	}
	return h, nil
}

// FreeHost releases pinned memory; h.Bytes must not be used afterwards.
func (c *Context) FreeHost(h *HostBuffer) error {
	if h == nil || h.p == nil {
		return nil
	}
	p := h.p
	h.p, h.Bytes = nil, nil
	return c.do("cuMemFreeHost", c.d.fn.cuMemFreeHost, uintptr(p))
}

// Uint32s views the pinned buffer as 32-bit words.
func (h *HostBuffer) Uint32s() []uint32 {
	return unsafe.Slice((*uint32)(h.p), len(h.Bytes)/4)
}

// Float32s views the pinned buffer as float32 values.
func (h *HostBuffer) Float32s() []float32 {
	return unsafe.Slice((*float32)(h.p), len(h.Bytes)/4)
}

// CopyHtoDAsync enqueues a copy of n bytes from pinned memory (at byte off)
// to dst on s.
func (c *Context) CopyHtoDAsync(dst DevicePtr, h *HostBuffer, off, n int, s Stream) error {
	if off < 0 || n < 0 || off+n > len(h.Bytes) {
		return fmt.Errorf("cuda: cuMemcpyHtoDAsync: range [%d,%d) outside the %d-byte host buffer", off, off+n, len(h.Bytes))
	}
	return c.do("cuMemcpyHtoDAsync", c.d.fn.cuMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Add(h.p, off)), uintptr(n), uintptr(s))
}

// CopyDtoHAsync enqueues a copy of n bytes from src into pinned memory (at
// byte off) on s.
func (c *Context) CopyDtoHAsync(h *HostBuffer, off int, src DevicePtr, n int, s Stream) error {
	if off < 0 || n < 0 || off+n > len(h.Bytes) {
		return fmt.Errorf("cuda: cuMemcpyDtoHAsync: range [%d,%d) outside the %d-byte host buffer", off, off+n, len(h.Bytes))
	}
	return c.do("cuMemcpyDtoHAsync", c.d.fn.cuMemcpyDtoHAsync, uintptr(unsafe.Add(h.p, off)), uintptr(src), uintptr(n), uintptr(s))
}
