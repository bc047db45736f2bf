package hub

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// List returns the GGUF models in a hub cache directory, whoever fetched
// them: one entry per model file (a multi-part model once, with all its
// parts) and snapshot, sorted by repository and file. Entries whose files
// are missing or link outside the cache are left out.
func List(cacheDir string) ([]Model, error) {
	dirs, err := os.ReadDir(cacheDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	var models []Model
	for _, d := range dirs {
		repo, ok := repoOfDir(d.Name())
		if !ok {
			continue
		}
		// A repository directory may be a link to one on another disk.
		c, err := openRepo(cacheDir, repo, false)
		if err != nil {
			continue
		}
		models = append(models, c.repoModels()...)
		c.Close()
	}
	return models, nil
}

// repoModels lists the complete models of the repository, those of the
// snapshot refs/main points at first.
func (c *cache) repoModels() []Model {
	var models []Model
	seen := make(map[string]bool)
	for _, commit := range c.snapshots() {
		names, err := c.snapshotFiles(commit)
		if err != nil {
			continue
		}
		slices.Sort(names)
	files:
		for _, name := range names {
			if !isModelFile(name) || seen[name] {
				continue
			}
			parts := partNames(name)
			m := Model{Repo: c.repo, Quant: QuantOf(name), Commit: commit, Files: parts,
				Path: c.path(path.Join(snapshotDir(commit), name))}
			for _, p := range parts {
				size, err := c.fileSize(commit, p)
				if err != nil {
					continue files
				}
				m.Size += size
			}
			seen[name] = true
			models = append(models, m)
		}
	}
	return models
}

// Remove deletes a model from the cache: with a quantization, the GGUF
// files naming it (every part); without, every GGUF file of the
// repository, from every snapshot. Blobs no longer linked from any
// snapshot go too, and a repository left with no files goes whole. It
// returns the snapshot entries it removed. Only the cache directory is
// touched: entries are removed as links, never followed.
func Remove(cacheDir, name string) ([]string, error) {
	n, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	c, err := openRepo(cacheDir, n.Repo, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove %s: %w", n, ErrNotCached)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	unlock, err := c.lockRepo(context.Background(), true)
	if errors.Is(err, errBusy) {
		return nil, fmt.Errorf("remove %s: a pull of %s is in progress; try again when it is done", n, n.Repo)
	}
	if err != nil {
		return nil, fmt.Errorf("remove %s: %w", n, err)
	}
	defer unlock()
	snaps, err := fs.ReadDir(c.root.FS(), "snapshots")
	if err != nil {
		return nil, fmt.Errorf("remove %s: %w (%v)", n, ErrNotCached, err)
	}
	var removed []string
	for _, s := range snaps {
		names, err := c.snapshotFiles(s.Name())
		if err != nil {
			return removed, err
		}
		for _, f := range names {
			if !removable(f, n.Quant) {
				continue
			}
			entry := path.Join(snapshotDir(s.Name()), f)
			if err := c.root.Remove(entry); err != nil {
				return removed, fmt.Errorf("remove %s: %w", n, err)
			}
			removed = append(removed, path.Join(repoDir(n.Repo), entry))
			// Directories the entry leaves empty go too (Remove fails on
			// one that is not), up to the snapshot's own.
			for d := path.Dir(entry); d != "snapshots"; d = path.Dir(d) {
				if c.root.Remove(d) != nil {
					break
				}
			}
		}
	}
	if len(removed) == 0 {
		return nil, fmt.Errorf("remove %s: %w", n, ErrNotCached)
	}
	return removed, c.collect()
}

// removable says whether rm of quant (all GGUF files for "") takes the
// snapshot file f: with a quantization, only model files naming it and
// their parts, never a vision projector that happens to name it too.
func removable(f, quant string) bool {
	if !strings.HasSuffix(strings.ToLower(f), ".gguf") {
		return false
	}
	return quant == "" || matchesQuant(f, quant) && isModelFile(partNames(f)[0])
}

// collect deletes the blobs of the repository that no snapshot entry
// links to, or is (a hard link, where the file system has no symbolic
// links), and the whole repository directory when no snapshot holds a
// file any more.
func (c *cache) collect() error {
	blobs, err := fs.ReadDir(c.root.FS(), "blobs")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hub cache %s: %w", c.path("blobs"), err)
	}
	blobInfo := make(map[string]os.FileInfo, len(blobs))
	for _, b := range blobs {
		if fi, err := c.root.Lstat(blobName(b.Name())); err == nil && fi.Mode().IsRegular() {
			blobInfo[b.Name()] = fi
		}
	}
	used := make(map[string]bool)
	files := 0
	err = fs.WalkDir(c.root.FS(), "snapshots", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		files++
		if b := c.blobOf(p); b != "" {
			used[b] = true
			return nil
		}
		if fi, err := c.root.Lstat(p); err == nil && fi.Mode().IsRegular() {
			for name, bi := range blobInfo {
				if os.SameFile(fi, bi) {
					used[name] = true
				}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hub cache %s: %w", c.path("snapshots"), err)
	}
	if files == 0 {
		return c.removeAll()
	}
	for _, b := range blobs {
		if !used[b.Name()] && !strings.HasSuffix(b.Name(), ".incomplete") {
			if err := c.root.Remove(blobName(b.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeAll deletes the repository's directory: what is in it, through
// the root, and then the directory, or the link to it a user made.
func (c *cache) removeAll() error {
	entries, err := fs.ReadDir(c.root.FS(), ".")
	if err != nil {
		return fmt.Errorf("hub cache %s: %w", c.path(""), err)
	}
	for _, e := range entries {
		if err := c.root.RemoveAll(e.Name()); err != nil {
			return err
		}
	}
	return c.hub.Remove(repoDir(c.repo))
}
