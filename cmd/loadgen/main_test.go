package main

import (
	"os"
	"path/filepath"
	"strings"
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
	if err := run([]string{"-m", model, "-device", "cpu", "-streams", "1,2", "-requests", "2", "-n", "8"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "| 1 | 2 |") || !strings.HasPrefix(lines[3], "| 2 | 2 |") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestLoadgenRefusesRemote(t *testing.T) {
	if err := run([]string{"-url", "http://example.com:8080"}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "loopback") {
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
