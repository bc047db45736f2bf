package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// List returns the GGUF models in a hub cache directory, whoever fetched
// them: one entry per model file (a multi-part model once, with all its
// parts) and snapshot, sorted by repository and file. Entries whose files
// are missing or link outside the cache are left out.
func List(cacheDir string) ([]Model, error) {
	c, err := openCache(cacheDir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	dirs, err := fs.ReadDir(c.root.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	var models []Model
	for _, d := range dirs {
		repo, ok := repoOfDir(d.Name())
		if !ok || !d.IsDir() {
			continue
		}
		models = append(models, c.repoModels(repo)...)
	}
	return models, nil
}

// repoModels lists the complete models of one repository, those of the
// snapshot refs/main points at first.
func (c *cache) repoModels(repo string) []Model {
	snaps, err := fs.ReadDir(c.root.FS(), path.Join(repoDir(repo), "snapshots"))
	if err != nil {
		return nil
	}
	main, _ := c.readRef(repo, revision)
	slices.SortStableFunc(snaps, func(a, b fs.DirEntry) int {
		switch {
		case a.Name() == main:
			return -1
		case b.Name() == main:
			return 1
		}
		return 0
	})
	var models []Model
	seen := make(map[string]bool)
	for _, s := range snaps {
		commit := s.Name()
		if checkHex("commit", commit, 40) != nil {
			continue
		}
		names, err := c.snapshotFiles(repo, commit)
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
			m := Model{Repo: repo, Quant: QuantOf(name), Commit: commit, Files: parts,
				Path: c.path(path.Join(snapshotDir(repo, commit), name))}
			for _, p := range parts {
				size, err := c.fileSize(repo, commit, p)
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
	c, err := openCache(cacheDir, false)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rd := repoDir(n.Repo)
	snaps, err := fs.ReadDir(c.root.FS(), path.Join(rd, "snapshots"))
	if err != nil {
		return nil, fmt.Errorf("remove %s: %w (%v)", n, ErrNotCached, err)
	}
	var removed []string
	for _, s := range snaps {
		names, err := c.snapshotFiles(n.Repo, s.Name())
		if err != nil {
			return removed, err
		}
		for _, f := range names {
			if !removable(f, n.Quant) {
				continue
			}
			entry := path.Join(snapshotDir(n.Repo, s.Name()), f)
			if err := c.root.Remove(entry); err != nil {
				return removed, fmt.Errorf("remove %s: %w", n, err)
			}
			removed = append(removed, entry)
			// Directories the entry leaves empty go too (Remove fails on
			// one that is not), up to the snapshot's own.
			for d := path.Dir(entry); d != path.Join(rd, "snapshots"); d = path.Dir(d) {
				if c.root.Remove(d) != nil {
					break
				}
			}
		}
	}
	if len(removed) == 0 {
		return nil, fmt.Errorf("remove %s: %w", n, ErrNotCached)
	}
	return removed, c.collect(n.Repo)
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

// collect deletes the blobs of repo that no snapshot links to, and the
// whole repository directory when no snapshot holds a file any more.
func (c *cache) collect(repo string) error {
	rd := repoDir(repo)
	linked := make(map[string]bool)
	files := 0
	err := fs.WalkDir(c.root.FS(), path.Join(rd, "snapshots"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files++
			if b := c.blobOf(repo, p); b != "" {
				linked[b] = true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hub cache %s: %w", rd, err)
	}
	if files == 0 {
		return c.root.RemoveAll(rd)
	}
	blobs, err := fs.ReadDir(c.root.FS(), path.Join(rd, "blobs"))
	if err != nil {
		return fmt.Errorf("hub cache %s: %w", rd, err)
	}
	for _, b := range blobs {
		if !linked[b.Name()] && !strings.HasSuffix(b.Name(), ".incomplete") {
			if err := c.root.Remove(path.Join(rd, "blobs", b.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
