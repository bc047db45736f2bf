//go:build linux && !android

package cu

import "github.com/ebitengine/purego"

// The dynamic loader, through purego (no cgo): Linux is where the CUDA
// driver is loaded (Load).

func dlopen(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }

func dlclose(lib uintptr) { purego.Dlclose(lib) }

func syscallN(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
