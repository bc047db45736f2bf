package hub

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testRepo = "bartowski/Llama-3.2-1B-Instruct-GGUF"

// content returns n bytes that differ with seed.
func content(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func ggufRepo() map[string][]byte {
	return map[string][]byte{
		"Llama-3.2-1B-Instruct-Q4_K_M.gguf": content(1, 300_000),
		"Llama-3.2-1B-Instruct-Q8_0.gguf":   content(2, 200_000),
		"Llama-3.2-1B-Instruct-IQ4_XS.gguf": content(3, 1000),
		"mmproj-Llama-3.2-1B-Q4_K_M.gguf":   content(4, 1000),
		"README.md":                         []byte("# model card\n"),
		"Llama-3.2-1B-Instruct-Q4_K_S.gguf": content(5, 1000),
	}
}

// readModel reads the file at path and checks it is what the fake Hub holds.
func readModel(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, not the %d bytes the Hub holds", path, len(got), len(want))
	}
}

func TestPullLayoutAndChecksum(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	repo := f.add(testRepo, files)
	f.token = "hf_secret"
	o := f.options(t)
	o.Token = "hf_secret"
	var last Progress
	o.Progress = func(p Progress) { last = p }

	m, err := Pull(context.Background(), testRepo, o) // no quant: Q4_K_M
	if err != nil {
		t.Fatal(err)
	}
	want := files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"]
	readModel(t, m.Path, want)
	if m.Quant != "Q4_K_M" || m.Size != int64(len(want)) || m.Commit != repo.commit || len(m.Files) != 1 {
		t.Errorf("model %+v", m)
	}
	if last.Done != last.Total || last.Total != int64(len(want)) || last.File != "Llama-3.2-1B-Instruct-Q4_K_M.gguf" {
		t.Errorf("last progress %+v", last)
	}
	// The Hugging Face layout: a relative link into blobs, named by sha256.
	rd := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF")
	wantPath := filepath.Join(rd, "snapshots", repo.commit, "Llama-3.2-1B-Instruct-Q4_K_M.gguf")
	if m.Path != wantPath {
		t.Errorf("path %s, want %s", m.Path, wantPath)
	}
	target, err := os.Readlink(m.Path)
	if err != nil || target != "../../blobs/"+sha256hex(want) {
		t.Errorf("snapshot link -> %q (%v)", target, err)
	}
	ref, _ := os.ReadFile(filepath.Join(rd, "refs", "main"))
	if string(ref) != repo.commit {
		t.Errorf("refs/main holds %q, want %s", ref, repo.commit)
	}
	// The token went to the Hub but not to the CDN it redirected to.
	for _, a := range f.cdnAuth {
		if a != "" {
			t.Errorf("the CDN got Authorization %q", a)
		}
	}

	// A second pull asks the Hub for the listing but downloads nothing.
	before := len(f.ranges)
	if _, err := Pull(context.Background(), testRepo+":q4_k_m", o); err != nil {
		t.Fatal(err)
	}
	if len(f.ranges) != before {
		t.Errorf("a second pull downloaded again")
	}
}

func TestPullQuantChoice(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	o := f.options(t)
	for _, c := range []struct{ quant, file string }{
		{"q8_0", "Llama-3.2-1B-Instruct-Q8_0.gguf"},
		{"IQ4_XS", "Llama-3.2-1B-Instruct-IQ4_XS.gguf"},
		{"Q4_K_S", "Llama-3.2-1B-Instruct-Q4_K_S.gguf"},
	} {
		path, err := Resolve(context.Background(), testRepo+":"+c.quant, o)
		if err != nil {
			t.Fatalf("%s: %v", c.quant, err)
		}
		if filepath.Base(path) != c.file {
			t.Errorf("%s: got %s, want %s", c.quant, filepath.Base(path), c.file)
		}
		readModel(t, path, files[c.file])
	}
	_, err := Resolve(context.Background(), testRepo+":Q2_K", o)
	if err == nil || !strings.Contains(err.Error(), "no GGUF file for quantization Q2_K") || !strings.Contains(err.Error(), "Q8_0") {
		t.Errorf("missing quant: %v", err)
	}
	_, err = Resolve(context.Background(), "bartowski/no-such-repo:Q4_K_M", o)
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("missing repo: %v", err)
	}
}

func TestPullMultiPart(t *testing.T) {
	f := newFakeHub(t)
	files := map[string][]byte{
		"Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf": content(1, 5000),
		"Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf": content(2, 5000),
		"Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf": content(3, 100),
		"Big-Q8_0.gguf":                         content(4, 100),
	}
	f.add("org/big", files)
	o := f.options(t)
	m, err := Pull(context.Background(), "org/big:Q4_K_M", o)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 3 || m.Files[0] != "Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf" || m.Size != 10100 {
		t.Fatalf("model %+v", m)
	}
	if !strings.HasSuffix(m.Path, "Big-Q4_K_M-00001-of-00003.gguf") {
		t.Errorf("path %s is not the first part's", m.Path)
	}
	for _, p := range m.Files {
		readModel(t, filepath.Join(filepath.Dir(m.Path), filepath.Base(p)), files[p])
	}
	// A link one directory down climbs one level more.
	target, _ := os.Readlink(m.Path)
	if target != "../../../blobs/"+sha256hex(files[m.Files[0]]) {
		t.Errorf("link in a subdirectory -> %s", target)
	}

	// A set with a part missing from the listing is refused.
	delete(files, "Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf")
	f.add("org/broken", files)
	if _, err := Pull(context.Background(), "org/broken:Q4_K_M", o); err == nil || !strings.Contains(err.Error(), "part Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf is missing") {
		t.Errorf("missing part: %v", err)
	}
}

func TestResumeAfterDroppedConnection(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	f.dropAt, f.drops = 100_000, 2
	o := f.options(t)
	path, err := Resolve(context.Background(), testRepo+":Q4_K_M", o)
	if err != nil {
		t.Fatal(err)
	}
	readModel(t, path, files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"])
	if len(f.ranges) != 3 || f.ranges[0] != "" || f.ranges[1] != "bytes=100000-" || f.ranges[2] != "bytes=200000-" {
		t.Errorf("Range headers %q, want none, then from 100000 and 200000", f.ranges)
	}
}

// A Content-Range whose total is not the listed size is of another file:
// the download starts over rather than append its bytes.
func TestResumeOtherTotalRestarts(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	f.dropAt, f.drops, f.badTotal = 100_000, 1, 1
	o := f.options(t)
	path, err := Resolve(context.Background(), testRepo+":Q4_K_M", o)
	if err != nil {
		t.Fatal(err)
	}
	readModel(t, path, files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"])
	if len(f.ranges) != 3 || f.ranges[1] != "bytes=100000-" || f.ranges[2] != "" {
		t.Errorf("Range headers %q, want none, from 100000, then none", f.ranges)
	}
}

func TestResumeAcrossRuns(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	want := files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"]
	f.dropAt, f.drops = 123_456, 1
	o := f.options(t)
	o.Retries = 1
	_, err := Resolve(context.Background(), testRepo, o)
	if err == nil || !strings.Contains(err.Error(), "kept for resuming") {
		t.Fatalf("cut download: %v", err)
	}
	// What a killed download leaves never looks like a model.
	rd := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF")
	blob := filepath.Join(rd, "blobs", sha256hex(want))
	if fi, err := os.Stat(blob + ".incomplete"); err != nil || fi.Size() != 123_456 {
		t.Fatalf("partial download: %v", err)
	}
	if _, err := os.Stat(blob); err == nil {
		t.Fatal("the blob exists before its download finished")
	}
	if _, err := os.Stat(filepath.Join(rd, "snapshots")); err == nil {
		t.Fatal("a snapshot exists before its download finished")
	}
	o.Offline = true
	if _, err := Resolve(context.Background(), testRepo, o); !errors.Is(err, ErrNotCached) {
		t.Fatalf("offline resolve of a partial download: %v", err)
	}

	o.Offline = false
	path, err := Resolve(context.Background(), testRepo, o)
	if err != nil {
		t.Fatal(err)
	}
	readModel(t, path, want)
	if f.ranges[len(f.ranges)-1] != "bytes=123456-" {
		t.Errorf("second run asked %q, want bytes=123456-", f.ranges[len(f.ranges)-1])
	}
	if _, err := os.Stat(blob + ".incomplete"); !os.IsNotExist(err) {
		t.Errorf("the .incomplete file is still there: %v", err)
	}
}

func TestWrongChecksumLeavesNothing(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	r := f.add(testRepo, files)
	bad := sha256hex([]byte("something else"))
	r.sums["Llama-3.2-1B-Instruct-Q4_K_M.gguf"] = bad
	o := f.options(t)
	_, err := Resolve(context.Background(), testRepo, o)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("wrong checksum: %v", err)
	}
	rd := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF")
	blobs, _ := os.ReadDir(filepath.Join(rd, "blobs"))
	if len(blobs) != 0 {
		t.Errorf("blobs left behind: %v", blobs)
	}
	if _, err := os.Stat(filepath.Join(rd, "snapshots")); err == nil {
		t.Error("a snapshot was made for a file that failed its checksum")
	}
}

func TestGitFileChecksum(t *testing.T) {
	// A small GGUF kept in git, not LFS: its blob is named by the git blob id.
	f := newFakeHub(t)
	data := content(9, 777)
	r := f.add("org/tiny", map[string][]byte{"tiny-f32.gguf": data})
	r.git["tiny-f32.gguf"] = true
	o := f.options(t)
	m, err := Pull(context.Background(), "org/tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	readModel(t, m.Path, data)
	if target, _ := os.Readlink(m.Path); target != "../../blobs/"+gitBlobID(data) {
		t.Errorf("link -> %s, want the git blob id", target)
	}
	if m.Quant != "F32" {
		t.Errorf("quant %q", m.Quant)
	}
}

func TestGatedRepoNeedsToken(t *testing.T) {
	f := newFakeHub(t)
	f.add(testRepo, ggufRepo())
	f.token = "hf_right"
	o := f.options(t)
	for _, tok := range []string{"", "hf_wrong"} {
		o.Token = tok
		_, err := Pull(context.Background(), testRepo, o)
		if !errors.Is(err, errGated) || !strings.Contains(err.Error(), "HF_TOKEN") {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	o.Token = "hf_right"
	if _, err := Pull(context.Background(), testRepo, o); err != nil {
		t.Error(err)
	}
}

func TestResolveUsesTheCache(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	o := f.options(t)
	first, err := Resolve(context.Background(), testRepo+":Q8_0", o)
	if err != nil {
		t.Fatal(err)
	}
	calls := f.apiCalls
	second, err := Resolve(context.Background(), testRepo+":q8_0", o)
	if err != nil || second != first {
		t.Fatalf("second resolve: %s, %v", second, err)
	}
	if f.apiCalls != calls {
		t.Errorf("a cached model asked the Hub again")
	}
	// Without a quantization, a cache holding only Q8_0 does not answer for
	// the default Q4_K_M online...
	if p, err := Resolve(context.Background(), testRepo, o); err != nil || filepath.Base(p) != "Llama-3.2-1B-Instruct-Q4_K_M.gguf" {
		t.Errorf("default quant online: %s, %v", p, err)
	}
	// ...and offline takes what the cache has, with no Hub at all.
	f.hub.Close()
	o.Offline = true
	if p, err := Resolve(context.Background(), testRepo, o); err != nil || filepath.Base(p) != "Llama-3.2-1B-Instruct-Q4_K_M.gguf" {
		t.Errorf("offline: %s, %v", p, err)
	}
	if p, err := Resolve(context.Background(), testRepo+":Q8_0", o); err != nil || p != first {
		t.Errorf("offline Q8_0: %s, %v", p, err)
	}
	if _, err := Resolve(context.Background(), testRepo+":IQ4_XS", o); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline, not cached: %v", err)
	}
}

func TestFindsOtherToolsDownloads(t *testing.T) {
	// A file huggingface-cli fetched: refs/main, a snapshot link, a blob.
	dir := t.TempDir()
	commit := strings.Repeat("ab", 20)
	data := content(7, 4000)
	rd := filepath.Join(dir, "models--TheBloke--TinyLlama-1.1B-Chat-v1.0-GGUF")
	must(t, os.MkdirAll(filepath.Join(rd, "blobs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(rd, "refs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(rd, "snapshots", commit), 0o755))
	must(t, os.WriteFile(filepath.Join(rd, "blobs", sha256hex(data)), data, 0o644))
	must(t, os.WriteFile(filepath.Join(rd, "refs", "main"), []byte(commit), 0o644))
	must(t, os.Symlink("../../blobs/"+sha256hex(data), filepath.Join(rd, "snapshots", commit, "tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf")))
	// No endpoint that answers: the cache must be enough.
	o := Options{Endpoint: "http://127.0.0.1:1", CacheDir: dir}
	p, err := Resolve(context.Background(), "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF:Q4_K_M", o)
	if err != nil {
		t.Fatal(err)
	}
	readModel(t, p, data)
	models, err := List(dir)
	if err != nil || len(models) != 1 || models[0].Quant != "Q4_K_M" || models[0].Size != 4000 || models[0].Repo != "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF" {
		t.Errorf("list: %+v, %v", models, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOptionsFromEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_ENDPOINT", "http://mirror.local:8080")
	t.Setenv("GOTOK_OFFLINE", "")
	t.Setenv("HF_HUB_OFFLINE", "1")
	must(t, os.WriteFile(filepath.Join(home, "token"), []byte("hf_fromfile\n"), 0o600))
	o := OptionsFromEnv()
	if o.CacheDir != filepath.Join(home, "hub") || o.Token != "hf_fromfile" || o.Endpoint != "http://mirror.local:8080" || !o.Offline {
		t.Errorf("%+v", o)
	}
	t.Setenv("HF_HUB_CACHE", "/elsewhere")
	t.Setenv("HF_TOKEN", "hf_env")
	t.Setenv("HF_HUB_OFFLINE", "0")
	t.Setenv("GOTOK_OFFLINE", "true")
	o = OptionsFromEnv()
	if o.CacheDir != "/elsewhere" || o.Token != "hf_env" || !o.Offline {
		t.Errorf("%+v", o)
	}
	t.Setenv("HF_HOME", "")
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	t.Setenv("GOTOK_OFFLINE", "")
	if o = OptionsFromEnv(); o.CacheDir != "/xdg/huggingface/hub" || o.Offline {
		t.Errorf("%+v", o)
	}
}

func TestConcurrentPulls(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	o := f.options(t)
	const n = 4
	paths := make([]string, n)
	errs := make([]error, n)
	done := make(chan int)
	for i := range n {
		go func() {
			paths[i], errs[i] = Resolve(context.Background(), testRepo, o)
			done <- i
		}()
	}
	for range n {
		<-done
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		readModel(t, paths[i], files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"])
	}
	// The blob lock made the others wait for the first download.
	if len(f.ranges) != 1 {
		t.Errorf("%d downloads of one file, want 1", len(f.ranges))
	}
	entries, _ := os.ReadDir(filepath.Dir(paths[0]))
	if len(entries) != 1 {
		t.Errorf("snapshot holds %v, want the one link (no temporary names left)", entries)
	}
}

func TestStalledConnectionRetried(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	f.dropAt, f.stalls = 50_000, 1
	o := f.options(t)
	o.StallTimeout = 200 * time.Millisecond
	start := time.Now()
	path, err := Resolve(context.Background(), testRepo, o)
	if err != nil {
		t.Fatal(err)
	}
	readModel(t, path, files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"])
	if len(f.ranges) != 2 || f.ranges[1] != "bytes=50000-" {
		t.Errorf("Range headers %q", f.ranges)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: the stall was waited out, not cut", d)
	}
}

func TestOverlongDownloadDeleted(t *testing.T) {
	f := newFakeHub(t)
	f.add(testRepo, ggufRepo())
	f.extraLen = 10
	o := f.options(t)
	_, err := Resolve(context.Background(), testRepo, o)
	if !errors.Is(err, errTooLong) {
		t.Fatalf("overlong download: %v", err)
	}
	blobs, _ := os.ReadDir(filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF", "blobs"))
	if len(blobs) != 0 {
		t.Errorf("left %v", blobs)
	}
}

func TestCancelKeepsPartial(t *testing.T) {
	f := newFakeHub(t)
	files := ggufRepo()
	f.add(testRepo, files)
	f.dropAt, f.stalls = 70_000, 1
	o := f.options(t)
	ctx, cancel := context.WithCancel(context.Background())
	o.Progress = func(p Progress) {
		if p.Done == 70_000 {
			cancel() // as Ctrl-C would, mid-file
		}
	}
	_, err := Resolve(ctx, testRepo, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v", err)
	}
	blob := filepath.Join(o.CacheDir, "models--bartowski--Llama-3.2-1B-Instruct-GGUF", "blobs", sha256hex(files["Llama-3.2-1B-Instruct-Q4_K_M.gguf"]))
	if fi, err := os.Stat(blob + ".incomplete"); err != nil || fi.Size() != 70_000 {
		t.Errorf("partial file after cancel: %v", err)
	}
	if _, err := os.Stat(blob); err == nil {
		t.Error("a cancelled download left a complete-looking blob")
	}
}
