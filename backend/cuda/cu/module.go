package cu

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// JIT options (CUjit_option) used to capture the compiler's logs.
const (
	jitInfoLogBuffer       = 3
	jitInfoLogBufferSize   = 4
	jitErrorLogBuffer      = 5
	jitErrorLogBufferSize  = 6
	jitLogVerbose          = 12
	funcAttrNumRegs        = 4
	funcAttrMaxDynamicSmem = 8
	// funcAttrPreferredCarveout is CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT.
	funcAttrPreferredCarveout = 9
)

// Module is a loaded PTX or cubin image.
type Module struct {
	c    *Context
	h    uintptr
	Name string
}

// Function is a kernel entry point of a loaded module.
type Function struct {
	h    uintptr
	Name string
}

// LoadModule JIT-compiles PTX text (or loads a cubin) for the context's
// device. On failure the error carries the JIT's error log, which names the
// offending PTX line.
func (c *Context) LoadModule(name string, image []byte) (*Module, error) {
	img := make([]byte, len(image)+1) // the driver reads PTX up to a NUL
	copy(img, image)
	errLog := make([]byte, 16<<10)
	infoLog := make([]byte, 4<<10)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&errLog[0])
	pin.Pin(&infoLog[0])
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize, jitInfoLogBuffer, jitInfoLogBufferSize}
	// Option values are void*; the sizes travel as integers in them. The
	// logs are pinned, so their addresses stay valid as plain integers.
	vals := []uintptr{
		uintptr(unsafe.Pointer(&errLog[0])), uintptr(len(errLog)),
		uintptr(unsafe.Pointer(&infoLog[0])), uintptr(len(infoLog)),
	}
	m := &Module{c: c, Name: name}
	err := c.do("cuModuleLoadDataEx", c.d.fn.cuModuleLoadDataEx,
		uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&img[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Log = cBytes(errLog)
		}
		return nil, fmt.Errorf("loading module %s: %w", name, err)
	}
	return m, nil
}

// cBytes returns the NUL-terminated prefix of b.
func cBytes(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{Name: name}
	cname := append([]byte(name), 0)
	if err := m.c.do("cuModuleGetFunction", m.c.d.fn.cuModuleGetFunction,
		uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&cname[0]))); err != nil {
		return nil, fmt.Errorf("kernel %s in module %s: %w", name, m.Name, err)
	}
	return f, nil
}

// Unload releases the module; its functions become invalid.
func (m *Module) Unload() error {
	if m.h == 0 {
		return nil
	}
	h := m.h
	m.h = 0
	return m.c.do("cuModuleUnload", m.c.d.fn.cuModuleUnload, h)
}

// SetMaxDynamicShared lets f's blocks ask for up to n bytes of dynamic shared
// memory; above 48 KiB the driver requires this opt-in.
func (c *Context) SetMaxDynamicShared(f *Function, n int) error {
	return c.do("cuFuncSetAttribute", c.d.fn.cuFuncSetAttribute, f.h, funcAttrMaxDynamicSmem, uintptr(n))
}

// SetSharedCarveout asks that f run with percent (0–100) of the SM's
// combined L1/shared memory as shared memory. The driver reconfigures an SM
// between kernels that want different splits, which drains it: kernels
// launched back to back (and overlapped with programmatic dependent launch)
// should all ask for the same.
func (c *Context) SetSharedCarveout(f *Function, percent int) error {
	return c.do("cuFuncSetAttribute", c.d.fn.cuFuncSetAttribute, f.h, funcAttrPreferredCarveout, uintptr(percent))
}

// NumRegs returns the registers per thread the JIT gave f.
func (c *Context) NumRegs(f *Function) (int, error) {
	var v int32
	err := c.do("cuFuncGetAttribute", c.d.fn.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), funcAttrNumRegs, f.h)
	return int(v), err
}
