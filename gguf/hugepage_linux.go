package gguf

import "syscall"

// adviseHugePages asks for transparent huge pages over b (best effort: a
// kernel without them, or with them off, leaves 4 KiB pages). Llama-1B
// Q4_K decode on the CPU: +40% against the file mapped with 4 KiB pages.
func adviseHugePages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }
