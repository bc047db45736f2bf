//go:build unix

package main

import (
	"net"
	"net/http"
	"path/filepath"
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
