package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestServeBadFlags(t *testing.T) {
	if _, _, err := cli(t, "serve", "-m", "x.gguf", "--port", "70000"); err == nil {
		t.Error("port 70000 accepted")
	}
	if _, _, err := cli(t, "serve", "-m", "x.gguf", "--chat-template", "/no/such/file"); err == nil {
		t.Error("a missing template file accepted")
	}
	broken := filepath.Join(t.TempDir(), "broken.jinja")
	if err := os.WriteFile(broken, []byte("{% for m in messages %}{{ m }}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli(t, "serve", "-m", "x.gguf", "--chat-template", broken); err == nil || !strings.Contains(err.Error(), "parse") {
		t.Errorf("a template that does not parse: %v", err)
	}
}

// A blank API key, from any source, is refused rather than taken for "no
// auth".
func TestServeBlankAPIKey(t *testing.T) {
	blank := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(blank, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"file", "", []string{"--api-key-file", blank}, "--api-key-file"},
		{"flag", "", []string{"--api-key", " "}, "--api-key is empty"},
		{"env", "  ", nil, "GOTOK_API_KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("GOTOK_API_KEY", c.env)
			}
			// No such model: the key must be refused before the load.
			args := append([]string{"serve", "-m", "/no/such/model.gguf", "--device", "cpu"}, c.args...)
			_, _, err := cli(t, args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: err %v, want one naming %s", c.args, err, c.want)
			}
		})
	}
}

func TestAPIKeySources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOTOK_API_KEY", "fromenv")
	for _, c := range []struct {
		set        bool
		flag, file string
		want       string
	}{
		{true, "k", file, "k"},
		{false, "", file, "secret"},
		{false, "", "", "fromenv"},
	} {
		if got, err := apiKey(c.set, c.flag, c.file); err != nil || got != c.want {
			t.Errorf("apiKey(%v, %q, %q) = %q, %v; want %q", c.set, c.flag, c.file, got, err, c.want)
		}
	}
}

func TestCORSOrigins(t *testing.T) {
	got := corsOrigins(" https://a.example, https://b.example ,,")
	if want := []string{"https://a.example", "https://b.example"}; !slices.Equal(got, want) {
		t.Errorf("corsOrigins: %q, want %q", got, want)
	}
	if got := corsOrigins(""); got != nil {
		t.Errorf("corsOrigins of nothing: %q", got)
	}
}
