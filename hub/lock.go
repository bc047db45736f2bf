package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"
)

// The locks, in {hub}/.locks/models--{org}--{repo}/, are flock(2) locks:
// they go with the process that holds them, however it ends.
//
//	{hash}.lock      one blob's download, as huggingface_hub takes it
//	gotok-repo.lock  shared by pulls, exclusive for rm, so that rm never
//	                 deletes a blob a pull has just downloaded and not yet linked

// lockPoll is how often a busy lock is tried again.
const lockPoll = 100 * time.Millisecond

// errBusy says a lock is held by another process.
var errBusy = errors.New("held by another process")

// lock takes the lock of one blob, so that two processes pulling the same
// file do not write the same .incomplete file: the second waits, calling
// waiting once, and then finds the blob there. ctx ends the wait.
func (c *cache) lock(ctx context.Context, hash string, waiting func()) (unlock func(), err error) {
	return c.lockFile(ctx, hash+".lock", true, true, waiting)
}

// lockRepo takes the repository's lock: shared by pulls, which wait for
// it, exclusive for rm, which does not but fails with errBusy.
func (c *cache) lockRepo(ctx context.Context, exclusive bool) (unlock func(), err error) {
	return c.lockFile(ctx, "gotok-repo.lock", exclusive, !exclusive, nil)
}

// lockFile takes a lock, waiting for it (polling, until ctx ends) if wait
// is set and failing with errBusy if not.
func (c *cache) lockFile(ctx context.Context, name string, exclusive, wait bool, waiting func()) (unlock func(), err error) {
	dir := path.Join(".locks", repoDir(c.repo))
	if err := c.hub.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := path.Join(dir, name)
	f, err := c.hub.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	unlock = func() { f.Close() } // closing the file releases the lock
	for first := true; ; first = false {
		ok, err := tryLock(f, exclusive)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", c.hubPath(p), err)
		}
		if ok {
			return unlock, nil
		}
		if !wait {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", c.hubPath(p), errBusy)
		}
		if first && waiting != nil {
			waiting()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock %s: %w", c.hubPath(p), ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// hubPath is the file system path of a name inside the hub cache directory.
func (c *cache) hubPath(name string) string { return filepath.Join(c.dir, filepath.FromSlash(name)) }
