package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotok/hub"
)

// serveTinyHub puts a generated tiny model on a fake Hub on loopback as
// org/tiny-GGUF, file tiny-Q8_0.gguf, and points the environment at it.
func serveTinyHub(t *testing.T) (cache string, model []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "tiny", "--type", "q8_0"); err != nil {
		t.Fatal(err)
	}
	model, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(model)
	commit := strings.Repeat("1f", 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/org/tiny-GGUF/revision/main":
			fmt.Fprintf(w, `{"id":"org/tiny-GGUF","sha":%q,"siblings":[{"rfilename":"README.md","size":3,"blobId":%q},{"rfilename":"tiny-Q8_0.gguf","size":%d,"lfs":{"sha256":%q,"size":%d,"pointerSize":134}}]}`,
				commit, strings.Repeat("2", 40), len(model), hex.EncodeToString(sum[:]), len(model))
		case "/org/tiny-GGUF/resolve/" + commit + "/tiny-Q8_0.gguf":
			http.Redirect(w, r, "/cdn/blob", http.StatusFound)
		case "/cdn/blob":
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(model))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	cache = t.TempDir()
	for k, v := range map[string]string{"HF_ENDPOINT": srv.URL, "HF_HUB_CACHE": cache, "HF_HOME": t.TempDir(), "HF_TOKEN": "",
		"HUGGING_FACE_HUB_TOKEN": "", "HF_TOKEN_PATH": "", "GOTOK_OFFLINE": "", "HF_HUB_OFFLINE": "", "GOTOK_MODEL": ""} {
		t.Setenv(k, v)
	}
	return cache, model
}

func TestPullRunListRm(t *testing.T) {
	cache, model := serveTinyHub(t)
	out, errOut, err := cli(t, "pull", "org/tiny-GGUF:q8_0")
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSpace(out)
	want := filepath.Join(cache, "models--org--tiny-GGUF", "snapshots", strings.Repeat("1f", 20), "tiny-Q8_0.gguf")
	if path != want {
		t.Errorf("pull printed %q, want %q", path, want)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, model) {
		t.Error("the pulled file differs from the served one")
	}
	// Not a terminal: plain lines, no bar.
	if !strings.Contains(errOut, "gotok: pulling tiny-Q8_0.gguf (") || !strings.Contains(errOut, "gotok: org/tiny-GGUF:Q8_0: tiny-Q8_0.gguf") || strings.Contains(errOut, "\r") {
		t.Errorf("pull's stderr:\n%s", errOut)
	}

	_, _, err = cli(t, "info", "-m", "org/missing")
	if err == nil || !strings.Contains(err.Error(), "org/missing: no such file, and model info of org/missing at main: not found on the Hub") {
		t.Errorf("-m of neither a file nor a Hub model: %v", err)
	}

	// -m takes the name, from the cache, with the Hub gone.
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	out, _, err = cli(t, "run", "-m", "org/tiny-GGUF:Q8_0", "-p", "hi", "-n", "4", "--device", "cpu", "--temp", "0")
	if err != nil {
		t.Fatalf("run -m org/tiny-GGUF:Q8_0: %v", err)
	}
	t.Setenv("GOTOK_MODEL", "org/tiny-GGUF:Q8_0")
	if _, _, err := cli(t, "info"); err != nil {
		t.Errorf("info with GOTOK_MODEL a Hub name: %v", err)
	}

	out, _, err = cli(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(strings.Split(out, "\n")[1]); len(f) != 5 || f[0] != "org/tiny-GGUF" || f[1] != "Q8_0" || f[4] != path {
		t.Errorf("list:\n%s", out)
	}

	if out, _, err = cli(t, "rm", "org/tiny-GGUF:Q8_0"); err != nil || !strings.Contains(out, "removed org/tiny-GGUF:Q8_0 (1 files)") {
		t.Fatalf("rm: %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(cache, "models--org--tiny-GGUF")); !os.IsNotExist(err) {
		t.Errorf("rm left the repository: %v", err)
	}
	t.Setenv("GOTOK_OFFLINE", "1")
	_, _, err = cli(t, "run", "-m", "org/tiny-GGUF:Q8_0", "-p", "hi")
	if err == nil || !strings.Contains(err.Error(), "not in the cache") {
		t.Errorf("offline run of a removed model: %v", err)
	}
	if _, _, err := cli(t, "rm", "org/tiny-GGUF"); err == nil {
		t.Error("rm of a model not cached")
	}
}

func TestResolveModelPrefersFiles(t *testing.T) {
	t.Setenv("GOTOK_OFFLINE", "1")
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir)
	// A file that happens to look like a Hub name is a file.
	os.MkdirAll("org", 0o755)
	os.WriteFile(filepath.Join("org", "repo"), []byte("x"), 0o644)
	for in, want := range map[string]string{"org/repo": "org/repo", "models/missing.gguf": "models/missing.gguf", "../x/y/z": "../x/y/z"} {
		if got, err := resolveModel(t.Context(), in, os.Stderr); err != nil || got != want {
			t.Errorf("resolveModel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := resolveModel(t.Context(), "org/other:Q4_K_M", os.Stderr); err == nil {
		t.Error("a Hub name not cached, offline: no error")
	}
}

func TestLineProgress(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	report := lineProgress(&buf, 5*time.Second, func() time.Time { return clock })
	mib := int64(1 << 20)
	report(hub.Progress{File: "dir/m.gguf", Done: 10 * mib, Total: 100 * mib})
	clock = clock.Add(time.Second)
	report(hub.Progress{File: "dir/m.gguf", Done: 20 * mib, Total: 100 * mib}) // too soon: no line
	clock = clock.Add(4 * time.Second)
	report(hub.Progress{File: "dir/m.gguf", Done: 60 * mib, Total: 100 * mib})
	clock = clock.Add(5 * time.Second)
	report(hub.Progress{File: "dir/m.gguf", Done: 100 * mib, Total: 100 * mib})
	want := `gotok: pulling dir/m.gguf (100.0 MiB, resuming at 10.0 MiB)
gotok: m.gguf: 60.0 MiB of 100.0 MiB (60%), 10.0 MiB/s, 4s left
gotok: m.gguf: 100.0 MiB in 10s (9.0 MiB/s)
`
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// A download that resumed and then started over (the server ignored the
// Range) shows no negative rate or count.
func TestProgressStartingOver(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	report := lineProgress(&buf, 5*time.Second, func() time.Time { return clock })
	mib := int64(1 << 20)
	report(hub.Progress{File: "m.gguf", Done: 50 * mib, Total: 100 * mib})
	report(hub.Progress{File: "m.gguf", Done: 0, Total: 100 * mib})
	clock = clock.Add(5 * time.Second)
	report(hub.Progress{File: "m.gguf", Done: 10 * mib, Total: 100 * mib})
	if got := buf.String(); !strings.Contains(got, "10.0 MiB of 100.0 MiB (10%), 2.0 MiB/s, 45s left") {
		t.Errorf("line progress:\n%s", got)
	}

	buf.Reset()
	bar := barProgress(&buf)
	bar(hub.Progress{File: "m.gguf", Done: 50 * mib, Total: 100 * mib})
	bar(hub.Progress{File: "m.gguf", Done: 0, Total: 100 * mib})
	bar(hub.Progress{File: "m.gguf", Done: 100 * mib, Total: 100 * mib})
	// A new bar for the whole file, not the old one's half.
	if got := buf.String(); !strings.Contains(got, "100% |") || !strings.Contains(got, "(105/105 MB") {
		t.Errorf("bar progress:\n%q", got)
	}
}

func TestProgressNotices(t *testing.T) {
	for name, report := range map[string]func(io.Writer) func(hub.Progress){
		"line": func(w io.Writer) func(hub.Progress) { return lineProgress(w, time.Second, time.Now) },
		"bar":  barProgress,
	} {
		var buf bytes.Buffer
		r := report(&buf)
		r(hub.Progress{File: "m.gguf", Total: 100, Waiting: true})
		r(hub.Progress{File: "m.gguf", Total: 100, Checking: true})
		r(hub.Progress{File: "m.gguf", Done: 50, Total: 100, Checking: true})
		got := buf.String()
		want := "gotok: waiting for another download of m.gguf\ngotok: checking the partial download of m.gguf\n"
		if got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
