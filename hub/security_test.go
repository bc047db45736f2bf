package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestParseNameRefusesEscapes(t *testing.T) {
	for _, s := range []string{
		"", "repo", "org/", "/repo", "org/repo/extra", "../org/repo", "org/..", "org/../x",
		"/abs/path", "org\\repo/x", "org/re\\po", "org/re po", "org--x/repo", "org/repo--x",
		"-org/repo", "org/repo.", "org/repo:", "org/repo:Q4/../../x", "org/repo:a\\b",
		"org/repo:Q4_K_M:x", "C:/x", "org/\x00repo", "org/" + strings.Repeat("a", 97),
	} {
		if n, err := ParseName(s); err == nil {
			t.Errorf("ParseName(%q) = %+v, want an error", s, n)
		}
	}
	for s, want := range map[string]Name{
		"bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M": {"bartowski/Llama-3.2-1B-Instruct-GGUF", "Q4_K_M"},
		"hf.co/unsloth/Qwen3-0.6B-GGUF:UD-Q4_K_XL":    {"unsloth/Qwen3-0.6B-GGUF", "UD-Q4_K_XL"},
		"https://huggingface.co/org/repo":             {"org/repo", ""},
		"Org_1/repo.v2":                               {"Org_1/repo.v2", ""},
	} {
		if n, err := ParseName(s); err != nil || n != want {
			t.Errorf("ParseName(%q) = %+v, %v; want %+v", s, n, err, want)
		}
	}
}

func TestHostileFileNamesRefused(t *testing.T) {
	for _, name := range []string{
		"../../etc/x.gguf", "/abs.gguf", "a/../../x.gguf", "a\\..\\x.gguf", "./x.gguf",
		"a//x.gguf", "C:x.gguf", "x\x00.gguf",
		"x\u202egguf.Q4_K_M.gguf", "x\u0085-Q4_K_M.gguf", "x\x1b[2J.gguf", "Q4_K_M/../../../x-Q4_K_M.gguf",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeHub(t)
			r := f.add("org/evil", map[string][]byte{"model-Q4_K_M.gguf": content(1, 100)})
			r.extra = []string{name}
			parent := t.TempDir()
			o := f.options(t)
			o.CacheDir = filepath.Join(parent, "hub")
			_, err := Pull(context.Background(), "org/evil:Q4_K_M", o)
			if err == nil || !strings.Contains(err.Error(), "unsafe file name") {
				t.Fatalf("listing with %q: %v", name, err)
			}
			// Nothing was written: not even the cache directory.
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("left %v behind", entries)
			}
		})
	}
}

// serveListing answers every request with body.
func serveListing(t *testing.T, body string) Options {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
	t.Cleanup(srv.Close)
	return Options{Endpoint: srv.URL, CacheDir: t.TempDir()}
}

func TestBadListingRefused(t *testing.T) {
	sha := `"sha":"` + strings.Repeat("a", 40) + `"`
	for name, tc := range map[string]struct{ body, want string }{
		"commit":    {`{"sha":"../../x","siblings":[]}`, "commit"},
		"sha256":    {`{` + sha + `,"siblings":[{"rfilename":"m-Q4_K_M.gguf","lfs":{"sha256":"../../../etc","size":4}}]}`, "sha256 of m-Q4_K_M.gguf"},
		"html":      {"\n<!DOCTYPE html><html>", "did not answer with JSON (is HF_ENDPOINT right?)"},
		"array":     {`[]`, "did not answer with JSON"},
		"truncated": {`{` + sha + `,"siblings":[{"rfilename":"m-Q4_K_M.gguf"`, "unexpected EOF"},
		// A size past 1 TiB would overflow the Range arithmetic.
		"huge size": {`{` + sha + `,"siblings":[{"rfilename":"m-Q4_K_M.gguf","size":9223372036854775807,"lfs":{"sha256":"` + strings.Repeat("b", 64) + `","size":9223372036854775807}}]}`, "out of range"},
		"negative":  {`{` + sha + `,"siblings":[{"rfilename":"m-Q4_K_M.gguf","size":-7,"blobId":"` + strings.Repeat("b", 40) + `"}]}`, "out of range"},
		// Too many entries is refused before they fill the memory.
		"entries": {`{` + sha + `,"siblings":[` + strings.Repeat(`{},`, maxSiblings) + `{}]}`, "more than 200000 files"},
	} {
		o := serveListing(t, tc.body)
		if _, err := Pull(context.Background(), "org/repo", o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, tc.want)
		}
	}
}

// A listing of many empty entries within the byte limit is read in
// bounded memory: decoded whole, 12 MiB of "{}," took some 200 MiB.
func TestListingReadInBoundedMemory(t *testing.T) {
	body := []byte(`{"sha":"` + strings.Repeat("a", 40) + `","siblings":[` + strings.Repeat(`{},`, 4<<20) + `{}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	o := Options{Endpoint: srv.URL, CacheDir: t.TempDir()}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Pull(context.Background(), "org/repo", o)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than 200000 files") {
		t.Fatalf("listing of 4M empty entries: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("reading a %d MiB listing allocated %d MiB", len(body)>>20, alloc>>20)
	}
}

// An odd name elsewhere in the repository (legal on the Hub) does not keep
// its model from being pulled; only GGUF files must have safe names.
func TestOddNonModelNamesSkipped(t *testing.T) {
	f := newFakeHub(t)
	data := content(1, 100)
	r := f.add("org/runs", map[string][]byte{"model-Q4_K_M.gguf": data})
	r.extra = []string{"runs/12:00:00/log.txt", "../notes.md", "a\\b.json", "x\u202e.txt", "\xff.bin"}
	m, err := Pull(context.Background(), "org/runs", f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	readModel(t, m.Path, data)
}

// plantRepo makes a cache whose model directory holds what plant puts there.
func plantedCache(t *testing.T) (cacheDir, outside string) {
	t.Helper()
	parent := t.TempDir()
	cacheDir = filepath.Join(parent, "hub")
	outside = filepath.Join(parent, "outside")
	must(t, os.MkdirAll(cacheDir, 0o755))
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "victim"), []byte("keep me"), 0o644))
	return cacheDir, outside
}

func checkVictim(t *testing.T, outside string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(outside, "victim"))
	if err != nil || string(b) != "keep me" {
		t.Errorf("the file outside the cache was touched: %q, %v", b, err)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("files appeared outside the cache: %v", entries)
	}
}

func TestPlantedSymlinksStayInside(t *testing.T) {
	const file = "model-Q4_K_M.gguf"
	data := content(1, 1000)
	sum := sha256hex(data)

	t.Run("blobs dir links outside", func(t *testing.T) {
		f := newFakeHub(t)
		f.add("org/repo", map[string][]byte{file: data})
		cacheDir, outside := plantedCache(t)
		rd := filepath.Join(cacheDir, "models--org--repo")
		must(t, os.MkdirAll(rd, 0o755))
		must(t, os.Symlink(outside, filepath.Join(rd, "blobs")))
		o := f.options(t)
		o.CacheDir = cacheDir
		if _, err := Pull(context.Background(), "org/repo", o); err == nil {
			t.Error("pulled through a blobs link that leaves the cache")
		}
		checkVictim(t, outside)
	})

	t.Run("incomplete file links to a victim", func(t *testing.T) {
		f := newFakeHub(t)
		f.add("org/repo", map[string][]byte{file: data})
		cacheDir, outside := plantedCache(t)
		blobs := filepath.Join(cacheDir, "models--org--repo", "blobs")
		must(t, os.MkdirAll(blobs, 0o755))
		must(t, os.Symlink(filepath.Join(outside, "victim"), filepath.Join(blobs, sum+".incomplete")))
		o := f.options(t)
		o.CacheDir = cacheDir
		if _, err := Pull(context.Background(), "org/repo", o); err == nil {
			t.Error("wrote through a planted .incomplete link")
		}
		checkVictim(t, outside)
	})

	t.Run("snapshot entry links outside", func(t *testing.T) {
		f := newFakeHub(t)
		r := f.add("org/repo", map[string][]byte{file: data})
		cacheDir, outside := plantedCache(t)
		rd := filepath.Join(cacheDir, "models--org--repo")
		snap := filepath.Join(rd, "snapshots", r.commit)
		must(t, os.MkdirAll(snap, 0o755))
		must(t, os.MkdirAll(filepath.Join(rd, "refs"), 0o755))
		must(t, os.WriteFile(filepath.Join(rd, "refs", "main"), []byte(r.commit), 0o644))
		must(t, os.Symlink(filepath.Join(outside, "victim"), filepath.Join(snap, file)))
		must(t, os.Symlink("../../../../outside/victim", filepath.Join(snap, "other-Q8_0.gguf")))
		o := f.options(t)
		o.CacheDir = cacheDir

		// Offline, neither planted link resolves.
		o.Offline = true
		for _, q := range []string{"Q4_K_M", "Q8_0"} {
			if p, err := Resolve(context.Background(), "org/repo:"+q, o); err == nil {
				t.Errorf("offline %s resolved to %s, outside the cache", q, p)
			}
		}
		if models, _ := List(cacheDir); len(models) != 0 {
			t.Errorf("list shows links that leave the cache: %+v", models)
		}
		// Online, the pull replaces the planted link with its own.
		o.Offline = false
		m, err := Pull(context.Background(), "org/repo", o)
		if err != nil {
			t.Fatal(err)
		}
		readModel(t, m.Path, data)
		// rm removes the links themselves, never what they point at.
		if _, err := Remove(cacheDir, "org/repo"); err != nil {
			t.Fatal(err)
		}
		checkVictim(t, outside)
		if _, err := os.Stat(rd); !os.IsNotExist(err) {
			t.Errorf("repository directory left after rm: %v", err)
		}
	})
}

func TestHTTPSNeverRedirectsToHTTP(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the plain http server was asked for %s", r.URL)
	}))
	defer plain.Close()
	data := content(1, 100)
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			w.Write([]byte(`{"sha":"` + strings.Repeat("c", 40) + `","siblings":[{"rfilename":"m-Q4_K_M.gguf","size":100,"lfs":{"sha256":"` + sha256hex(data) + `","size":100}}]}`))
			return
		}
		http.Redirect(w, r, plain.URL+"/cdn/m.gguf", http.StatusFound)
	}))
	defer tls.Close()
	o := Options{Endpoint: tls.URL, CacheDir: t.TempDir(), HTTPClient: tls.Client()}
	_, err := Pull(context.Background(), "org/repo", o)
	if err == nil || !strings.Contains(err.Error(), "https never downgrades to http") {
		t.Fatalf("https to http redirect: %v", err)
	}
}

func TestEndpointChecked(t *testing.T) {
	for _, ep := range []string{"ftp://x", "file:///etc", "not a url", "http://"} {
		o := Options{Endpoint: ep, CacheDir: t.TempDir()}
		if _, err := Pull(context.Background(), "org/repo", o); err == nil || !strings.Contains(err.Error(), "want an http or https URL") {
			t.Errorf("endpoint %q: %v", ep, err)
		}
	}
}

// Server text reaches the terminal only quoted: an escape sequence in an
// error body does not.
func TestServerTextQuoted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "\x1b]0;pwned\x07\x1b[2Jbusy\u202e", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := Pull(context.Background(), "org/repo", Options{Endpoint: srv.URL, CacheDir: t.TempDir()})
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07\u202e") || !strings.Contains(err.Error(), `busy`) {
		t.Errorf("error with the server's text: %q", err)
	}
}

func TestPrivateRepoHint(t *testing.T) {
	f := newFakeHub(t)
	_, err := Pull(context.Background(), "org/private", f.options(t))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "private, set HF_TOKEN") {
		t.Errorf("401 RepoNotFound: %v", err)
	}
}

func TestCheckFileName(t *testing.T) {
	// JSON decoding already turns invalid UTF-8 into U+FFFD; the check
	// stands on its own for names from elsewhere.
	for _, name := range []string{"\xff\xfe.gguf", "a\u200fb.gguf", "a\u00a0b.gguf", "a\tb.gguf", "a\u009bc.gguf"} {
		if checkFileName(name) == nil {
			t.Errorf("checkFileName(%q) passed", name)
		}
	}
	for _, name := range []string{"Q4_K_M/model-Q4_K_M.gguf", "модель-Q8_0.gguf", "model (copy) #2.gguf"} {
		if err := checkFileName(name); err != nil {
			t.Errorf("checkFileName(%q): %v", name, err)
		}
	}
}
