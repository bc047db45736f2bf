package gotok

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInMemoryWeights(t *testing.T) {
	avail, err := memAvailable()
	if err != nil || avail <= 0 {
		t.Fatalf("memAvailable: %d, %v", avail, err)
	}
	// A file the size of all the memory available is mapped, with the
	// reason (or, with huge pages off, that one).
	if ok, why := inMemoryWeights(avail); ok || why == "" {
		t.Errorf("weights of %d bytes, as much as is available: in memory %v (%q)", avail, ok, why)
	} else if !strings.Contains(why, "available") && !strings.Contains(why, "huge pages") {
		t.Errorf("reason %q", why)
	}
	t.Logf("a 1 MiB model in memory: %v", func() bool { ok, _ := inMemoryWeights(1 << 20); return ok }())
}

func TestReadInt(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]int64{"4294967296\n": 4294967296, "0": 0} {
		p := filepath.Join(dir, "n")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := readInt(p); err != nil || got != want {
			t.Errorf("readInt(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
	p := filepath.Join(dir, "max")
	if err := os.WriteFile(p, []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readInt(p); err == nil {
		t.Error(`readInt("max") succeeded: an unlimited cgroup would read as a limit`)
	}
	if room, ok := cgroupRoom(); ok && room < 0 {
		t.Errorf("cgroupRoom %d", room)
	}
}
