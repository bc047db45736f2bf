//go:build !linux

package gotok

// inMemoryWeights: huge pages for anonymous memory are Linux's (madvise);
// elsewhere a copy on 4 KiB pages decodes slower than the mapping.
func inMemoryWeights(int64) (bool, string) { return false, "huge pages are Linux's" }
