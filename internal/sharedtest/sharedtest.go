// Package sharedtest finds the project's shared/ folder for tests: the real
// models and test data that live beside the checkout, never inside it.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the shared/ folder that holds marker (a path inside it, such
// as "models/stories260K.gguf"): $GOTOK_SHARED when set (a machine where the
// checkout travels alone), else a folder named shared beside the working
// directory or one of its parents. It skips the test when marker is not
// there, so CI without the data stays green.
func Dir(t testing.TB, marker string) string {
	t.Helper()
	var candidates []string
	if d := os.Getenv("GOTOK_SHARED"); d != "" {
		candidates = append(candidates, d)
	} else if dir, err := filepath.Abs("."); err == nil {
		for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(filepath.Dir(d), "shared"))
		}
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, filepath.FromSlash(marker))); err == nil {
			return c
		}
	}
	t.Skipf("shared/%s not found beside the checkout (or under $GOTOK_SHARED)", marker)
	return ""
}
