package hub

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The cache is Hugging Face's (huggingface_hub, huggingface-cli, llama.cpp
// and LM Studio share it), so a file one of them fetched is found here:
//
//	{hub}/models--{org}--{repo}/blobs/{sha256 or git blob id}
//	{hub}/models--{org}--{repo}/blobs/{hash}.incomplete    a download in progress
//	{hub}/models--{org}--{repo}/snapshots/{commit}/{file}  -> ../../blobs/{hash}
//	{hub}/models--{org}--{repo}/refs/{revision}            the commit, as text
//	{hub}/.locks/models--{org}--{repo}/{hash}.lock
//
// A cache is the directory of one repository in it. Every access goes
// through an os.Root opened there: a path that climbs out with "..", or a
// symbolic link planted below to point outside, fails there instead of
// reading or writing elsewhere. The repository directory itself may be a
// link (a user who moved a large model to another disk, as
// huggingface_hub allows), which is followed, once, when it is opened.
type cache struct {
	dir  string   // the hub cache directory
	repo string   // "org/repo"
	hub  *os.Root // at dir, for .locks
	root *os.Root // at dir/models--org--repo
}

// openRepo opens the cache directory of repo, creating it if create is set.
func openRepo(dir, repo string, create bool) (*cache, error) {
	if dir == "" {
		return nil, errors.New("no Hugging Face cache directory: set HF_HOME or HF_HUB_CACHE")
	}
	rd := filepath.Join(dir, repoDir(repo))
	if create {
		if err := os.MkdirAll(rd, 0o755); err != nil {
			return nil, fmt.Errorf("hub cache: %w", err)
		}
	}
	hub, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	root, err := os.OpenRoot(rd)
	if err != nil {
		hub.Close()
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	return &cache{dir: dir, repo: repo, hub: hub, root: root}, nil
}

func (c *cache) Close() error {
	c.hub.Close()
	return c.root.Close()
}

// repoDir is the cache directory of a model repository, "models--org--repo".
func repoDir(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// repoOfDir is repoDir's inverse; ok is false for anything else.
func repoOfDir(dir string) (repo string, ok bool) {
	rest, ok := strings.CutPrefix(dir, "models--")
	if !ok {
		return "", false
	}
	org, name, ok := strings.Cut(rest, "--")
	if !ok || checkRepoPart(org) != nil || checkRepoPart(name) != nil {
		return "", false
	}
	return org + "/" + name, true
}

// blobName and snapshotDir are paths inside a repository's directory.
func blobName(hash string) string      { return "blobs/" + hash }
func snapshotDir(commit string) string { return "snapshots/" + commit }

// path is the file system path of a name inside the repository's directory.
func (c *cache) path(name string) string {
	return filepath.Join(c.dir, repoDir(c.repo), filepath.FromSlash(name))
}

// readRef returns the commit a revision of repo points at.
func (c *cache) readRef(rev string) (string, error) {
	b, err := c.root.ReadFile(path.Join("refs", rev))
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(b))
	if err := checkHex("commit in refs/"+rev, commit, 40); err != nil {
		return "", err
	}
	return commit, nil
}

// writeRef records the commit of a revision (written aside, then renamed).
func (c *cache) writeRef(rev, commit string) error {
	dir := "refs"
	if err := c.root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path.Join(dir, "."+rev+"."+rand.Text()+".tmp")
	if err := c.root.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		c.root.Remove(tmp)
		return err
	}
	if err := c.root.Rename(tmp, path.Join(dir, rev)); err != nil {
		c.root.Remove(tmp)
		return err
	}
	return nil
}

// snapshotFiles lists the files of a snapshot, as repository paths.
func (c *cache) snapshotFiles(commit string) ([]string, error) {
	dir := snapshotDir(commit)
	var files []string
	err := fs.WalkDir(c.root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			files = append(files, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return files, err
}

// fileSize returns the size of a snapshot file: the blob it links to must
// be a regular file inside the cache.
func (c *cache) fileSize(commit, name string) (int64, error) {
	fi, err := c.root.Stat(path.Join(snapshotDir(commit), name))
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", name)
	}
	return fi.Size(), nil
}

// hasBlob says whether a complete blob of this size is in the cache. Blobs
// are renamed into place only after their checksum matched, so the name
// and size are enough.
func (c *cache) hasBlob(hash string, size int64) bool {
	fi, err := c.root.Lstat(blobName(hash))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

// link makes snapshots/{commit}/{name} point at the blob: a relative
// symbolic link, made under a temporary name and renamed over the old
// entry so that no reader sees it half made. Where the file system has no
// symbolic links, a hard link to the blob takes its place.
func (c *cache) link(commit, name, hash string) error {
	p := path.Join(snapshotDir(commit), name)
	if err := c.root.MkdirAll(path.Dir(p), 0o755); err != nil {
		return err
	}
	// ../ for each level between the link and the repository directory.
	up := strings.Repeat("../", strings.Count(name, "/")+2)
	target := up + "blobs/" + hash
	tmp := path.Join(path.Dir(p), "."+path.Base(p)+"."+rand.Text()+".tmp")
	if err := c.root.Symlink(target, tmp); err != nil {
		if err := c.root.Link(blobName(hash), tmp); err != nil {
			return fmt.Errorf("link %s to its blob: %w", name, err)
		}
	}
	if err := c.root.Rename(tmp, p); err != nil {
		c.root.Remove(tmp)
		return err
	}
	return nil
}

// blobOf returns the blob a snapshot entry links to, or "" if it is not a
// link into the repository's blobs.
func (c *cache) blobOf(entry string) string {
	target, err := c.root.Readlink(entry)
	if err != nil || path.IsAbs(target) {
		return ""
	}
	dir, blob := path.Split(path.Join(path.Dir(entry), target))
	if dir != "blobs/" {
		return ""
	}
	return blob
}

// snapshots returns the commits of the repository's snapshots, the one
// refs/main points at first.
func (c *cache) snapshots() []string {
	entries, err := fs.ReadDir(c.root.FS(), "snapshots")
	if err != nil {
		return nil
	}
	main, _ := c.readRef(revision)
	var commits []string
	for _, e := range entries {
		if checkHex("commit", e.Name(), 40) == nil {
			commits = append(commits, e.Name())
		}
	}
	slices.SortStableFunc(commits, func(a, b string) int {
		switch {
		case a == main:
			return -1
		case b == main:
			return 1
		}
		return 0
	})
	return commits
}
