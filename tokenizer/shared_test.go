package tokenizer

import (
	"testing"

	"gotok/internal/sharedtest"
)

// sharedDir is the project's shared/ folder with the tokenizer tests, or
// skips.
func sharedDir(t testing.TB) string {
	t.Helper()
	return sharedtest.Dir(t, "tokenizer-tests")
}
