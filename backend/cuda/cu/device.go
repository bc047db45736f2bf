package cu

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Device attributes (CUdevice_attribute) this package reads.
const (
	attrMaxThreadsPerBlock     = 1
	attrMultiprocessorCount    = 16
	attrL2CacheSize            = 38
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMaxSharedPerBlockOptin = 97
	attrMaxPersistingL2        = 108
	attrMaxAccessPolicyWindow  = 109
)

// DeviceInfo describes a CUDA device.
type DeviceInfo struct {
	Ordinal        int
	Name           string
	Major, Minor   int // compute capability
	SMCount        int
	TotalMem       int64 // bytes
	L2Bytes        int
	MaxSharedOptin int // largest dynamic shared memory a block may ask for
	// MaxPersistingL2 is the most L2 that may be set aside for persisting
	// accesses, MaxL2Window the largest access policy window (0: neither).
	MaxPersistingL2, MaxL2Window int
	DriverVersion                int // major*1000 + minor*10
}

func (i DeviceInfo) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %d SMs, %.1f GiB)", i.Name, i.Major, i.Minor, i.SMCount, float64(i.TotalMem)/(1<<30))
}

// Context is a device's primary context, retained for the life of the value.
type Context struct {
	d    *Driver
	dev  int32
	ctx  uintptr
	Info DeviceInfo
}

// Open loads the driver, initializes it and retains the primary context of
// device ordinal. The primary context is the one the CUDA runtime shares, so
// a process that mixes libraries sees one context per device.
func Open(ordinal int) (*Context, error) {
	d, err := Load()
	if err != nil {
		return nil, err
	}
	if err := d.Init(); err != nil {
		return nil, err
	}
	n, err := d.DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d devices)", ordinal, n)
	}
	c := &Context{d: d}
	if err := d.check("cuDeviceGet", d.call(d.fn.cuDeviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(ordinal))); err != nil {
		return nil, err
	}
	if err := c.readInfo(ordinal); err != nil {
		return nil, err
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.call(d.fn.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(c.dev))); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Context) readInfo(ordinal int) error {
	d := c.d
	info := DeviceInfo{Ordinal: ordinal}
	var name [256]byte
	if err := d.check("cuDeviceGetName", d.call(d.fn.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(c.dev))); err != nil {
		return err
	}
	for i, b := range name {
		if b == 0 {
			info.Name = string(name[:i])
			break
		}
	}
	var mem uint64
	if err := d.check("cuDeviceTotalMem", d.call(d.fn.cuDeviceTotalMem, uintptr(unsafe.Pointer(&mem)), uintptr(c.dev))); err != nil {
		return err
	}
	info.TotalMem = int64(mem)
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{attrComputeCapabilityMajor, &info.Major},
		{attrComputeCapabilityMinor, &info.Minor},
		{attrMultiprocessorCount, &info.SMCount},
		{attrL2CacheSize, &info.L2Bytes},
		{attrMaxSharedPerBlockOptin, &info.MaxSharedOptin},
		{attrMaxPersistingL2, &info.MaxPersistingL2},
		{attrMaxAccessPolicyWindow, &info.MaxL2Window},
	} {
		var v int32
		if err := d.check("cuDeviceGetAttribute", d.call(d.fn.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a.attr), uintptr(c.dev))); err != nil {
			return err
		}
		*a.dst = int(v)
	}
	v, err := d.Version()
	if err != nil {
		return err
	}
	info.DriverVersion = v
	c.Info = info
	return nil
}

// Close releases the primary context. Memory and modules must be freed first.
func (c *Context) Close() error {
	if c.ctx == 0 {
		return nil
	}
	c.ctx = 0
	return c.d.check("cuDevicePrimaryCtxRelease", c.d.call(c.d.fn.cuDevicePrimaryCtxRelease, uintptr(c.dev)))
}

// enter locks the goroutine to its thread and makes the context current
// there; the returned function undoes the lock. Every driver call that needs
// a context goes through it, because the driver's current context is per
// thread and goroutines move between threads.
func (c *Context) enter() (exit func(), err error) {
	runtime.LockOSThread()
	if err := c.d.check("cuCtxSetCurrent", c.d.call(c.d.fn.cuCtxSetCurrent, c.ctx)); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// do runs one driver call with the context current and names it in the error.
//
//go:uintptrescapes
func (c *Context) do(name string, fn uintptr, args ...uintptr) error {
	exit, err := c.enter()
	if err != nil {
		return err
	}
	defer exit()
	return c.d.check(name, c.d.call(fn, args...))
}

// Synchronize waits for all work on the context to finish.
func (c *Context) Synchronize() error {
	return c.do("cuCtxSynchronize", c.d.fn.cuCtxSynchronize)
}

// MemInfo returns the free and total device memory in bytes.
func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = c.do("cuMemGetInfo", c.d.fn.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return int64(f), int64(t), err
}

// CUlimit values this package sets.
const limitPersistingL2 = 6

// SetPersistingL2 sets aside up to n bytes of L2 (at most MaxPersistingL2)
// for accesses in persisting windows (Launch.L2Window), and returns the
// amount set; 0 also releases the lines that persist now.
func (c *Context) SetPersistingL2(n int) (int, error) {
	n = max(0, min(n, c.Info.MaxPersistingL2))
	if n == 0 && c.d.fn.cuCtxResetPersistingL2Cache != 0 {
		if err := c.do("cuCtxResetPersistingL2Cache", c.d.fn.cuCtxResetPersistingL2Cache); err != nil {
			return 0, err
		}
	}
	return n, c.do("cuCtxSetLimit", c.d.fn.cuCtxSetLimit, limitPersistingL2, uintptr(n))
}
