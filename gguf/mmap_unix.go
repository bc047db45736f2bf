//go:build unix

package gguf

import (
	"io"
	"os"
	"syscall"
)

func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, syscall.EFBIG
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}

// readFile reads the file into anonymous memory of its own, asking the
// kernel for huge pages (adviseHugePages): weights that are streamed every
// token, as the CPU engine streams them, cost a TLB miss every 4 KiB page
// when mapped from the file.
func readFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, syscall.EFBIG
	}
	data, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	adviseHugePages(data)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), data); err != nil {
		syscall.Munmap(data)
		return nil, nil, err
	}
	if err := readOnly(data); err != nil {
		syscall.Munmap(data)
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
