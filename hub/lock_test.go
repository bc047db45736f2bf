//go:build unix

package hub

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A pull that finds another download of its file under way says so and
// waits for it, as long as its context allows.
func TestPullWaitsForLockAndCancels(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	o := f.options(t)
	want := files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"]
	c, err := openRepo(o.CacheDir, testRepo, true)
	must(t, err)
	defer c.Close()
	unlock, err := c.lock(context.Background(), sha256hex(want), nil)
	must(t, err)

	var mu sync.Mutex
	var reports []Progress
	waiting := make(chan struct{}, 1)
	o.Progress = func(p Progress) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
		if p.Waiting {
			waiting <- struct{}{}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := Pull(ctx, testRepo, o)
		errc <- err
	}()
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("no Waiting report while another holds the lock")
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("cancelled wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait for the lock ignored the context")
	}

	// Once the lock is free, a pull goes ahead.
	errc2 := make(chan error, 1)
	go func() {
		_, err := Pull(context.Background(), testRepo, o)
		errc2 <- err
	}()
	<-waiting
	unlock()
	if err := <-errc2; err != nil {
		t.Fatal(err)
	}
}

// rm refuses while a pull of the repository holds its lock, and deletes
// nothing; after it, rm goes ahead.
func TestRemoveDuringPull(t *testing.T) {
	f := newFakeHub(t)
	f.add(testRepo, ggufRepo())
	o := f.options(t)
	m, err := Pull(context.Background(), testRepo, o)
	must(t, err)
	c, err := openRepo(o.CacheDir, testRepo, false)
	must(t, err)
	defer c.Close()
	unlock, err := c.lockRepo(context.Background(), false) // as a pull holds it
	must(t, err)
	if _, err := Remove(o.CacheDir, testRepo); err == nil || !strings.Contains(err.Error(), "a pull of "+testRepo+" is in progress") {
		t.Errorf("rm during a pull: %v", err)
	}
	readModel(t, m.Path, ggufRepo()["Llama-3.2-1B-Instruct-Q4_K_M.gguf"])
	unlock()
	if _, err := Remove(o.CacheDir, testRepo); err != nil {
		t.Errorf("rm after the pull: %v", err)
	}
}

// Resuming reports that it reads back what an earlier download left.
func TestResumeReportsChecking(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	want := files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"]
	o := f.options(t)
	blobs := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF", "blobs")
	must(t, os.MkdirAll(blobs, 0o755))
	must(t, os.WriteFile(filepath.Join(blobs, sha256hex(want)+".incomplete"), want[:1000], 0o644))
	var reports []Progress
	o.Progress = func(p Progress) { reports = append(reports, p) }
	m, err := Pull(context.Background(), testRepo, o)
	must(t, err)
	readModel(t, m.Path, want)
	if len(reports) < 2 || !reports[0].Checking || reports[0].Done != 0 || reports[1].Checking || reports[1].Done != 1000 {
		t.Errorf("reports %+v, want Checking from 0, then the download from 1000", reports[:min(len(reports), 3)])
	}
}
