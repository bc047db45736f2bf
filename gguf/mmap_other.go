//go:build !unix

package gguf

import (
	"io"
	"os"
)

// mapFile reads the whole file where mmap is not available.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// readFile is mapFile: the file is read into memory in any case.
func readFile(f *os.File, size int64) ([]byte, func() error, error) { return mapFile(f, size) }
