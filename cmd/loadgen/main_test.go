package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLoadgenSmall(t *testing.T) {
	dir, _ := filepath.Abs(".")
	model := ""
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		p := filepath.Join(filepath.Dir(d), "shared", "models", "stories260K.gguf")
		if _, err := os.Stat(p); err == nil {
			model = p
			break
		}
	}
	if model == "" {
		t.Skip("../shared/models/stories260K.gguf not found")
	}
	var out strings.Builder
	if err := run([]string{"-m", model, "-device", "cpu", "-streams", "1,2", "-requests", "2", "-n", "8"}, &out, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "| 1 | 2 | 0 |") || !strings.HasPrefix(lines[3], "| 2 | 2 | 0 |") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestLoadgenRefusesRemote(t *testing.T) {
	if err := run([]string{"-url", "http://example.com:8080"}, &strings.Builder{}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("remote URL: %v", err)
	}
	if err := checkLoopback("http://127.0.0.1:8080"); err != nil {
		t.Error(err)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if percentile(d, 50) != 50 || percentile(d, 99) != 99 || percentile(d[:1], 99) != 1 {
		t.Error(percentile(d, 50), percentile(d, 99))
	}
}

// TestLoadgenCountsFailures runs against a server that fails every other
// request (an error event after its tokens, as llama-server's output
// parser does): the run goes on, the failures are counted apart and
// their tokens left out; a run where every request fails is an error.
func TestLoadgenCountsFailures(t *testing.T) {
	var n atomic.Int64
	var failAll atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		for range 4 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		}
		if failAll.Load() || i%2 == 0 {
			fmt.Fprintf(w, "data: {\"error\":{\"message\":\"parse failure\"}}\n\n")
			return
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	var out, errOut strings.Builder
	if err := run([]string{"-url", srv.URL, "-streams", "2", "-requests", "8"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "| 2 | 8 | 4 |") {
		t.Errorf("table:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "4 of 8 requests failed, the first: parse failure") {
		t.Errorf("stderr: %q", errOut.String())
	}
	failAll.Store(true)
	err := run([]string{"-url", srv.URL, "-streams", "2", "-requests", "4"}, &strings.Builder{}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "every request failed") {
		t.Errorf("every request failing: %v", err)
	}
}
