package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirFromEnv(t *testing.T) {
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "models", "m.gguf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOTOK_SHARED", d)
	if got := Dir(t, "models/m.gguf"); got != d {
		t.Errorf("Dir = %q, want %q", got, d)
	}
}

func TestDirBesideTheCheckout(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"shared/tokenizer-tests", "repo/pkg"} {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOTOK_SHARED", "")
	t.Chdir(filepath.Join(root, "repo", "pkg"))
	want := filepath.Join(root, "shared")
	if got := Dir(t, "tokenizer-tests"); got != want {
		t.Errorf("Dir = %q, want %q", got, want)
	}
}
