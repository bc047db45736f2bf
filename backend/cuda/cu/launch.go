package cu

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Dim returns a one-dimensional shape.
func Dim(x int) Dim3 { return Dim3{x, 1, 1} }

// Launch describes one kernel launch.
type Launch struct {
	Grid, Block Dim3
	Shared      int // dynamic shared memory, bytes
	Stream      Stream
	PDL         bool // programmatic dependent launch: may start before the previous kernel ends (sm_90+)
	// Cluster groups the grid's blocks into thread-block clusters of this
	// shape (sm_90+), each divisible into the grid; zero: no clusters.
	Cluster Dim3
	// L2Window, when set, marks the kernel's accesses to a range as
	// persisting in L2 (sm_80+; Context.SetPersistingL2 sets the room).
	L2Window *L2Window
}

// L2Window is an access policy window: accesses to [Base, Base+Bytes),
// a HitRatio share of them chosen by address, persist in L2, up to the
// context's persisting limit; the rest are ordinary.
type L2Window struct {
	Base     DevicePtr
	Bytes    int
	HitRatio float32
}

// Args are kernel arguments in declaration order. Each is a DevicePtr,
// int32, uint32, float32 or uint64; Go ints are refused so that a kernel's
// int parameter is never silently given 8 bytes.
type Args []any

// pack stores each argument in its own 8-byte slot, as the driver's
// kernelParams wants: an array of pointers, each to one argument's bytes.
func (a Args) pack() ([]uint64, error) {
	vals := make([]uint64, len(a))
	for i, v := range a {
		switch v := v.(type) {
		case DevicePtr:
			vals[i] = uint64(v)
		case int32:
			vals[i] = uint64(uint32(v))
		case uint32:
			vals[i] = uint64(v)
		case float32:
			vals[i] = uint64(math.Float32bits(v))
		case uint64:
			vals[i] = v
		default:
			return nil, fmt.Errorf("kernel argument %d has unsupported type %T", i, v)
		}
	}
	return vals, nil
}

// launchConfig mirrors CUlaunchConfig.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	shared                 uint32
	_                      uint32
	stream                 uintptr
	attrs                  unsafe.Pointer
	numAttrs               uint32
	_                      uint32
}

// launchAttr mirrors CUlaunchAttribute (id, padding, 64-byte value union).
type launchAttr struct {
	id    uint32
	_     uint32
	value [8]uint64
}

// CUlaunchAttributeID values this package sets.
const (
	attrAccessPolicyWindow              = 1
	attrClusterDimension                = 4
	attrProgrammaticStreamSerialization = 6
)

// Launch enqueues f with args. With l.PDL set it uses cuLaunchKernelEx with
// programmatic stream serialization, so the kernel may begin while the
// previous one drains; the kernel must wait (griddepcontrol.wait) before
// reading what that one wrote. With l.Cluster set it uses cuLaunchKernelEx
// with that cluster shape.
func (c *Context) Launch(f *Function, l Launch, args Args) error {
	vals, err := args.pack()
	if err != nil {
		return fmt.Errorf("launching %s: %w", f.Name, err)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	var params []unsafe.Pointer
	if len(vals) > 0 {
		pin.Pin(&vals[0])
		params = make([]unsafe.Pointer, len(vals))
		for i := range vals {
			params[i] = unsafe.Pointer(&vals[i])
		}
	}
	var pp uintptr
	if len(params) > 0 {
		pin.Pin(&params[0])
		pp = uintptr(unsafe.Pointer(&params[0]))
	}
	for _, d := range []Dim3{l.Grid, l.Block} {
		if d.X <= 0 || d.Y <= 0 || d.Z <= 0 {
			return fmt.Errorf("launching %s: bad shape grid %v block %v", f.Name, l.Grid, l.Block)
		}
	}
	cl := l.Cluster
	if cl != (Dim3{}) && (cl.X <= 0 || cl.Y <= 0 || cl.Z <= 0 || l.Grid.X%cl.X != 0 || l.Grid.Y%cl.Y != 0 || l.Grid.Z%cl.Z != 0) {
		return fmt.Errorf("launching %s: cluster %v does not divide grid %v", f.Name, cl, l.Grid)
	}
	if !l.PDL && cl == (Dim3{}) && l.L2Window == nil {
		err = c.do("cuLaunchKernel "+f.Name, c.d.fn.cuLaunchKernel, f.h,
			uintptr(l.Grid.X), uintptr(l.Grid.Y), uintptr(l.Grid.Z),
			uintptr(l.Block.X), uintptr(l.Block.Y), uintptr(l.Block.Z),
			uintptr(l.Shared), uintptr(l.Stream), pp, 0)
		return err
	}
	if c.d.fn.cuLaunchKernelEx == 0 {
		return fmt.Errorf("launching %s: the driver has no cuLaunchKernelEx (needs CUDA 11.8+)", f.Name)
	}
	attrs := &[3]launchAttr{}
	n := 0
	if l.PDL {
		attrs[n].id = attrProgrammaticStreamSerialization
		attrs[n].value[0] = 1
		n++
	}
	if cl != (Dim3{}) {
		// CUlaunchAttributeValue.clusterDim: three unsigned ints.
		attrs[n].id = attrClusterDimension
		attrs[n].value[0] = uint64(uint32(cl.X)) | uint64(uint32(cl.Y))<<32
		attrs[n].value[1] = uint64(uint32(cl.Z))
		n++
	}
	if w := l.L2Window; w != nil {
		// CUaccessPolicyWindow: base_ptr, num_bytes, hitRatio, hitProp
		// (CU_ACCESS_PROPERTY_PERSISTING = 2), missProp (NORMAL = 0).
		attrs[n].id = attrAccessPolicyWindow
		attrs[n].value[0] = uint64(w.Base)
		attrs[n].value[1] = uint64(w.Bytes)
		attrs[n].value[2] = uint64(math.Float32bits(w.HitRatio)) | 2<<32
		n++
	}
	pin.Pin(attrs)
	cfg := &launchConfig{
		gridX: uint32(l.Grid.X), gridY: uint32(l.Grid.Y), gridZ: uint32(l.Grid.Z),
		blockX: uint32(l.Block.X), blockY: uint32(l.Block.Y), blockZ: uint32(l.Block.Z),
		shared: uint32(l.Shared), stream: uintptr(l.Stream),
		attrs: unsafe.Pointer(&attrs[0]), numAttrs: uint32(n),
	}
	return c.do("cuLaunchKernelEx "+f.Name, c.d.fn.cuLaunchKernelEx,
		uintptr(unsafe.Pointer(cfg)), f.h, pp, 0)
}
