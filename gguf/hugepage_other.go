//go:build unix && !linux

package gguf

// adviseHugePages does nothing where madvise has no huge-page advice.
func adviseHugePages([]byte) {}
