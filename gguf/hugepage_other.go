//go:build unix && !linux

package gguf

// adviseHugePages does nothing where madvise has no huge-page advice.
func adviseHugePages([]byte) {}

// readOnly leaves b as it is where the syscall package has no mprotect.
func readOnly([]byte) error { return nil }
