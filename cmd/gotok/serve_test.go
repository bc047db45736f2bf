package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gotok serve answers once loaded and exits cleanly on SIGTERM.
func TestServeSIGTERM(t *testing.T) {
	model := filepath.Join(shared(t), "models", "stories260K.gguf")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	done := make(chan error, 1)
	var stderr string
	go func() {
		var err error
		_, stderr, err = cli(t, "serve", "-m", model, "--device", "cpu", "--port", strconv.Itoa(port))
		done <- err
	}()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("gotok serve never became healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("completion: %d", resp.StatusCode)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gotok serve did not exit on SIGTERM")
	}
	if !strings.Contains(stderr, "drained") || !strings.Contains(stderr, "path=/v1/completions status=200") {
		t.Errorf("log:\n%s", stderr)
	}
}

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
