package hub

import (
	"os"
	"path"
)

// lock takes the lock of one blob, as huggingface_hub does, so that two
// processes pulling the same file do not write the same .incomplete file:
// the second waits and then finds the blob there.
func (c *cache) lock(hash string) (unlock func(), err error) {
	dir := path.Join(".locks", repoDir(c.repo))
	if err := c.hub.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := c.hub.OpenFile(path.Join(dir, hash+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
