//go:build !linux || android

package cu

import (
	"fmt"
	"runtime"
)

// Elsewhere (Android too: purego needs cgo there) there is no driver to
// load: Load refuses before these, which only keep the package building
// (the CPU engine runs everywhere).

func dlopen(string) (uintptr, error) {
	return 0, fmt.Errorf("cuda: not supported on %s", runtime.GOOS)
}

func dlsym(uintptr, string) (uintptr, error) {
	return 0, fmt.Errorf("cuda: not supported on %s", runtime.GOOS)
}

func dlclose(uintptr) {}

func syscallN(uintptr, ...uintptr) uintptr { return ^uintptr(0) } // no driver: an error result
