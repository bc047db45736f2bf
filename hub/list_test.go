package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListAndRemove(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	f.add("org/big", map[string][]byte{
		"Big-Q8_0-00001-of-00002.gguf": content(1, 3000),
		"Big-Q8_0-00002-of-00002.gguf": content(2, 2000),
	})
	o := f.options(t)
	for _, name := range []string{testRepo + ":Q4_K_M", testRepo + ":Q8_0", "org/big:Q8_0"} {
		if _, err := Pull(context.Background(), name, o); err != nil {
			t.Fatal(err)
		}
	}
	models, err := List(o.CacheDir)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		repo, quant string
		size        int64
		parts       int
	}
	var got []row
	for _, m := range models {
		got = append(got, row{m.Repo, m.Quant, m.Size, len(m.Files)})
		if _, err := os.Stat(m.Path); err != nil {
			t.Errorf("listed path: %v", err)
		}
	}
	want := []row{
		{testRepo, "Q4_K_M", 300_000, 1},
		{testRepo, "Q8_0", 200_000, 1},
		{"org/big", "Q8_0", 5000, 2},
	}
	if len(got) != len(want) {
		t.Fatalf("list %+v, want %+v", got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("list %+v lacks %+v", got, w)
		}
	}

	// rm one quantization: its link and blob go, the other's stay.
	rd := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF")
	removed, err := Remove(o.CacheDir, testRepo+":q8_0")
	if err != nil || len(removed) != 1 {
		t.Fatalf("rm: %v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(rd, "blobs", sha256hex(files["Llama-3.2-1B-Instruct-Q8_0.gguf"]))); !os.IsNotExist(err) {
		t.Errorf("the removed model's blob is still there: %v", err)
	}
	o.Offline = true
	if _, err := Resolve(context.Background(), testRepo+":Q4_K_M", o); err != nil {
		t.Errorf("the other quantization went too: %v", err)
	}
	if _, err := Remove(o.CacheDir, testRepo+":Q8_0"); !errors.Is(err, ErrNotCached) {
		t.Errorf("rm twice: %v", err)
	}
	// rm the whole repository: its directory goes.
	if _, err := Remove(o.CacheDir, "org/big"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(o.CacheDir, "models--org--big")); !os.IsNotExist(err) {
		t.Errorf("repository directory left: %v", err)
	}

	if models, _ := List(o.CacheDir); len(models) != 1 || models[0].Quant != "Q4_K_M" {
		t.Errorf("after rm: %+v", models)
	}
	if _, err := Remove(o.CacheDir, "../x"); err == nil {
		t.Error("rm of a bad name")
	}
}

func TestListEmptyCache(t *testing.T) {
	models, err := List(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(models) != 0 {
		t.Errorf("%v, %v", models, err)
	}
}

func TestRemoveEmptiesDirectories(t *testing.T) {
	f := newFakeHub(t)
	r := f.add("org/big", map[string][]byte{
		"Q4_K_M/Big-Q4_K_M-00001-of-00002.gguf": content(1, 300),
		"Q4_K_M/Big-Q4_K_M-00002-of-00002.gguf": content(2, 300),
		"Big-Q8_0.gguf":                         content(3, 100),
	})
	o := f.options(t)
	for _, name := range []string{"org/big:Q4_K_M", "org/big:Q8_0"} {
		if _, err := Pull(context.Background(), name, o); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := Remove(o.CacheDir, "org/big:Q4_K_M")
	if err != nil || len(removed) != 2 {
		t.Fatalf("rm: %v, %v", removed, err)
	}
	snap := filepath.Join(o.CacheDir, "models--org--big", "snapshots", r.commit)
	entries, _ := os.ReadDir(snap)
	if len(entries) != 1 || entries[0].Name() != "Big-Q8_0.gguf" {
		t.Errorf("snapshot after rm holds %v, want Big-Q8_0.gguf alone", entries)
	}
	blobs, _ := os.ReadDir(filepath.Join(o.CacheDir, "models--org--big", "blobs"))
	if len(blobs) != 1 || blobs[0].Name() != sha256hex(content(3, 100)) {
		t.Errorf("blobs after rm: %v", blobs)
	}
}

func TestRemoveQuantKeepsProjector(t *testing.T) {
	f := newFakeHub(t)
	f.add("org/vl", map[string][]byte{
		"model-F16.gguf":        content(1, 300),
		"mmproj-model-f16.gguf": content(2, 200),
	})
	o := f.options(t)
	if _, err := Pull(context.Background(), "org/vl:F16", o); err != nil {
		t.Fatal(err)
	}
	// The projector got into the cache some other way (huggingface-cli).
	c, err := openRepo(o.CacheDir, "org/vl", false)
	must(t, err)
	sum := sha256hex(content(2, 200))
	must(t, c.root.WriteFile(blobName(sum), content(2, 200), 0o644))
	commit, err := c.readRef(revision)
	must(t, err)
	must(t, c.link(commit, "mmproj-model-f16.gguf", sum))
	c.Close()

	removed, err := Remove(o.CacheDir, "org/vl:F16")
	if err != nil || len(removed) != 1 || filepath.Base(removed[0]) != "model-F16.gguf" {
		t.Fatalf("rm :F16 removed %v, %v; want model-F16.gguf alone", removed, err)
	}
	snap := filepath.Join(o.CacheDir, "models--org--vl", "snapshots", commit)
	if _, err := os.ReadFile(filepath.Join(snap, "mmproj-model-f16.gguf")); err != nil {
		t.Errorf("the projector went too: %v", err)
	}
}

// A repository directory moved to another disk and linked back, as
// huggingface_hub allows, is listed, resolved offline, pulled into and
// removed from; what lies below it stays confined as before.
func TestSymlinkedRepoDir(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	o := f.options(t)
	if _, err := Pull(context.Background(), testRepo+":Q8_0", o); err != nil {
		t.Fatal(err)
	}
	rd := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF")
	moved := filepath.Join(t.TempDir(), "elsewhere")
	must(t, os.Rename(rd, moved))
	must(t, os.Symlink(moved, rd))

	if models, err := List(o.CacheDir); err != nil || len(models) != 1 || models[0].Quant != "Q8_0" {
		t.Errorf("list of a linked repository: %+v, %v", models, err)
	}
	off := o
	off.Offline = true
	p, err := Resolve(context.Background(), testRepo+":Q8_0", off)
	if err != nil {
		t.Fatalf("offline resolve through a linked repository: %v", err)
	}
	readModel(t, p, files["Llama-3.2-1B-Instruct-Q8_0.gguf"])
	m, err := Pull(context.Background(), testRepo+":Q4_K_M", o)
	if err != nil {
		t.Fatalf("pull into a linked repository: %v", err)
	}
	readModel(t, m.Path, files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"])
	if _, err := os.Stat(filepath.Join(moved, "blobs", sha256hex(files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"]))); err != nil {
		t.Errorf("the blob is not in the linked directory: %v", err)
	}
	if _, err := Remove(o.CacheDir, testRepo); err != nil {
		t.Fatalf("rm of a linked repository: %v", err)
	}
	if _, err := os.Lstat(rd); !os.IsNotExist(err) {
		t.Errorf("the link is left after rm: %v", err)
	}
	if entries, err := os.ReadDir(moved); err != nil || len(entries) != 0 {
		t.Errorf("the linked directory holds %v after rm (%v)", entries, err)
	}
}

// Offline, a model List shows is found even when refs/main moved on to a
// snapshot that lacks it.
func TestCachedFromOlderSnapshot(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	r := f.add(testRepo, files)
	o := f.options(t)
	if _, err := Pull(context.Background(), testRepo+":Q4_K_M", o); err != nil {
		t.Fatal(err)
	}
	old := r.commit
	f.mu.Lock()
	r.commit = strings.Repeat("e", 40)
	f.mu.Unlock()
	if _, err := Pull(context.Background(), testRepo+":Q8_0", o); err != nil {
		t.Fatal(err)
	}
	o.Offline = true
	m, err := Pull(context.Background(), testRepo+":Q4_K_M", o)
	if err != nil {
		t.Fatalf("offline, the older snapshot's model: %v", err)
	}
	if m.Commit != old {
		t.Errorf("found at commit %s, want %s", m.Commit, old)
	}
	readModel(t, m.Path, files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"])
	if m, err := Pull(context.Background(), testRepo+":Q8_0", o); err != nil || m.Commit != r.commit {
		t.Errorf("the newer snapshot's model: %+v, %v", m, err)
	}
}

// Where snapshot entries are hard links to their blobs (the fallback on
// file systems without symbolic links), rm keeps the blobs still in use.
func TestRemoveKeepsHardLinkedBlobs(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	r := f.add(testRepo, files)
	o := f.options(t)
	for _, q := range []string{"Q4_K_M", "Q8_0"} {
		if _, err := Pull(context.Background(), testRepo+":"+q, o); err != nil {
			t.Fatal(err)
		}
	}
	rd := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF")
	entry := filepath.Join(rd, "snapshots", r.commit, "Llama-3.2-1B-Instruct-Q4_K_M.gguf")
	blob := filepath.Join(rd, "blobs", sha256hex(files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"]))
	must(t, os.Remove(entry))
	must(t, os.Link(blob, entry))
	if _, err := Remove(o.CacheDir, testRepo+":Q8_0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(blob); err != nil {
		t.Errorf("rm deleted the blob a hard link still uses: %v", err)
	}
}
