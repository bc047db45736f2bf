// Package cu is a minimal binding of the CUDA driver API (libcuda.so.1),
// loaded at run time through purego so that nothing here needs the CUDA SDK
// or cgo to build. It covers what an inference engine needs: devices, the
// primary context, PTX modules, memory, streams, events, kernel launches and
// stream-captured graphs.
//
// The driver keeps the current context per OS thread, so every method that
// talks to the driver locks its goroutine to its thread and makes the context
// current first (both are cheap). Callers never manage threads themselves.
package cu

import (
	"fmt"
	"runtime"
	"unsafe"
)

// libName is the driver library every CUDA installation puts on the loader path.
const libName = "libcuda.so.1"

// Driver holds the entry points of a loaded libcuda.
type Driver struct {
	lib uintptr
	fn  symbols
}

// symbols are the driver entry points, resolved by name. Versioned names
// (_v2) are the ones cuda.h maps the plain names to; dlsym sees only those.
type symbols struct {
	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString uintptr

	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem, cuDeviceGetAttribute uintptr

	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent, cuCtxSynchronize uintptr
	cuCtxSetLimit, cuCtxResetPersistingL2Cache                                             uintptr

	cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction, cuFuncSetAttribute, cuFuncGetAttribute uintptr

	cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost, cuMemGetInfo, cuMemHostGetDevicePointer uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync                uintptr
	cuMemcpyDtoDAsync, cuMemsetD32, cuMemsetD32Async, cuMemsetD8                                  uintptr

	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamWaitEvent              uintptr
	cuEventCreate, cuEventDestroy, cuEventRecord, cuEventSynchronize, cuEventElapsedTime uintptr

	cuLaunchKernel, cuLaunchKernelEx uintptr

	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiateWithFlags, cuGraphLaunch uintptr
	cuGraphExecDestroy, cuGraphDestroy, cuGraphGetNodes                                  uintptr
}

// Load opens libcuda.so.1 and resolves the entry points this package uses.
// It does not initialize the driver; Init does.
func Load() (*Driver, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("cuda: not supported on %s (only linux)", runtime.GOOS)
	}
	lib, err := dlopen(libName)
	if err != nil {
		return nil, fmt.Errorf("cuda: cannot load %s (is the NVIDIA driver installed?): %w", libName, err)
	}
	d := &Driver{lib: lib}
	f := &d.fn
	for _, s := range []struct {
		p        *uintptr
		name     string
		optional bool
	}{
		{&f.cuInit, "cuInit", false},
		{&f.cuDriverGetVersion, "cuDriverGetVersion", false},
		{&f.cuGetErrorName, "cuGetErrorName", false},
		{&f.cuGetErrorString, "cuGetErrorString", false},
		{&f.cuDeviceGetCount, "cuDeviceGetCount", false},
		{&f.cuDeviceGet, "cuDeviceGet", false},
		{&f.cuDeviceGetName, "cuDeviceGetName", false},
		{&f.cuDeviceTotalMem, "cuDeviceTotalMem_v2", false},
		{&f.cuDeviceGetAttribute, "cuDeviceGetAttribute", false},
		{&f.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", false},
		{&f.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", false},
		{&f.cuCtxSetCurrent, "cuCtxSetCurrent", false},
		{&f.cuCtxSynchronize, "cuCtxSynchronize", false},
		{&f.cuCtxSetLimit, "cuCtxSetLimit", false},
		{&f.cuCtxResetPersistingL2Cache, "cuCtxResetPersistingL2Cache", true},
		{&f.cuModuleLoadDataEx, "cuModuleLoadDataEx", false},
		{&f.cuModuleUnload, "cuModuleUnload", false},
		{&f.cuModuleGetFunction, "cuModuleGetFunction", false},
		{&f.cuFuncSetAttribute, "cuFuncSetAttribute", false},
		{&f.cuFuncGetAttribute, "cuFuncGetAttribute", false},
		{&f.cuMemAlloc, "cuMemAlloc_v2", false},
		{&f.cuMemFree, "cuMemFree_v2", false},
		{&f.cuMemAllocHost, "cuMemAllocHost_v2", false},
		{&f.cuMemFreeHost, "cuMemFreeHost", false},
		{&f.cuMemGetInfo, "cuMemGetInfo_v2", false},
		{&f.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", false},
		{&f.cuMemcpyHtoD, "cuMemcpyHtoD_v2", false},
		{&f.cuMemcpyDtoH, "cuMemcpyDtoH_v2", false},
		{&f.cuMemcpyDtoD, "cuMemcpyDtoD_v2", false},
		{&f.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", false},
		{&f.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", false},
		{&f.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", false},
		{&f.cuMemsetD32, "cuMemsetD32_v2", false},
		{&f.cuMemsetD32Async, "cuMemsetD32Async", false},
		{&f.cuMemsetD8, "cuMemsetD8_v2", false},
		{&f.cuStreamCreate, "cuStreamCreate", false},
		{&f.cuStreamDestroy, "cuStreamDestroy_v2", false},
		{&f.cuStreamSynchronize, "cuStreamSynchronize", false},
		{&f.cuStreamWaitEvent, "cuStreamWaitEvent", false},
		{&f.cuEventCreate, "cuEventCreate", false},
		{&f.cuEventDestroy, "cuEventDestroy_v2", false},
		{&f.cuEventRecord, "cuEventRecord", false},
		{&f.cuEventSynchronize, "cuEventSynchronize", false},
		{&f.cuEventElapsedTime, "cuEventElapsedTime", false},
		{&f.cuLaunchKernel, "cuLaunchKernel", false},
		{&f.cuLaunchKernelEx, "cuLaunchKernelEx", true}, // CUDA 11.8+
		{&f.cuStreamBeginCapture, "cuStreamBeginCapture_v2", false},
		{&f.cuStreamEndCapture, "cuStreamEndCapture", false},
		{&f.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", false},
		{&f.cuGraphLaunch, "cuGraphLaunch", false},
		{&f.cuGraphExecDestroy, "cuGraphExecDestroy", false},
		{&f.cuGraphDestroy, "cuGraphDestroy", false},
		{&f.cuGraphGetNodes, "cuGraphGetNodes", false},
	} {
		p, err := dlsym(lib, s.name)
		if err != nil {
			if s.optional {
				continue
			}
			dlclose(lib)
			return nil, fmt.Errorf("cuda: %s has no %s (driver too old?): %w", libName, s.name, err)
		}
		*s.p = p
	}
	return d, nil
}

// Init initializes the driver (cuInit). It is safe to call more than once.
func (d *Driver) Init() error {
	return d.check("cuInit", d.call(d.fn.cuInit, 0))
}

// Version returns the driver's CUDA version as major*1000 + minor*10.
func (d *Driver) Version() (int, error) {
	var v int32
	err := d.check("cuDriverGetVersion", d.call(d.fn.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))))
	return int(v), err
}

// DeviceCount returns the number of CUDA devices.
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	err := d.check("cuDeviceGetCount", d.call(d.fn.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))))
	return int(n), err
}

// Available reports why CUDA cannot be used here, or nil when the driver
// loads, initializes and sees at least one device.
func Available() error {
	d, err := Load()
	if err != nil {
		return err
	}
	if err := d.Init(); err != nil {
		return err
	}
	n, err := d.DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("cuda: the driver loaded but sees no CUDA device")
	}
	return nil
}

// call invokes a driver entry point and returns its CUresult. Pointers to Go
// values must be converted to uintptr in the call expression itself, so that
// uintptrescapes moves them to the heap and keeps them alive for the call.
//
//go:uintptrescapes
func (d *Driver) call(fn uintptr, args ...uintptr) Result {
	return Result(int32(syscallN(fn, args...)))
}
