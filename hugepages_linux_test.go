package gotok

import (
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
