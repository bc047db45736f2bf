package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedDir returns the project's shared data directory (a sibling of the
// repository root) or skips the test when it is absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	candidates := []string{filepath.Join("..", "..", "shared")}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			candidates = append(candidates, filepath.Join(filepath.Dir(dir), "shared"))
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(filepath.Join(c, "tokenizer-tests")); err == nil && st.IsDir() {
			return c
		}
	}
	t.Skip("shared test data (../shared/tokenizer-tests) not found next to the repository")
	return ""
}
