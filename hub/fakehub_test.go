package hub

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHub is a Hugging Face Hub on loopback: the model info API answers in
// the real API's JSON shapes, and /resolve/ redirects to a second server,
// a CDN, which serves the bytes (with Range) and can be told to cut
// connections, lie about checksums and so on.
type fakeHub struct {
	t   *testing.T
	hub *httptest.Server
	cdn *httptest.Server

	mu       sync.Mutex
	repos    map[string]*fakeRepo
	token    string   // when set, /resolve/ wants "Bearer token" (a gated repository)
	dropAt   int64    // the CDN cuts a response after this many body bytes...
	drops    int      // ...this many times...
	stalls   int      // ...or goes silent after them, this many times
	extraLen int      // the CDN sends this many bytes more than the file has
	badTotal int      // the CDN answers this many Range requests with another file's bytes and total
	ranges   []string // Range headers the CDN saw ("" for none)
	cdnAuth  []string // Authorization headers the CDN saw
	apiCalls int
}

type fakeRepo struct {
	commit string
	files  map[string][]byte
	git    map[string]bool   // files kept in git (no lfs block)
	sums   map[string]string // listed sha256 overrides (a wrong checksum)
	extra  []string          // names listed but not served (hostile names)
}

func newFakeHub(t *testing.T) *fakeHub {
	f := &fakeHub{t: t, repos: make(map[string]*fakeRepo)}
	f.cdn = httptest.NewServer(http.HandlerFunc(f.serveCDN))
	f.hub = httptest.NewServer(http.HandlerFunc(f.serveHub))
	t.Cleanup(f.hub.Close)
	t.Cleanup(f.cdn.Close)
	return f
}

// add puts a repository on the fake Hub.
func (f *fakeHub) add(repo string, files map[string][]byte) *fakeRepo {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := sha1.Sum([]byte(repo))
	r := &fakeRepo{commit: hex.EncodeToString(h[:]), files: files, git: map[string]bool{}, sums: map[string]string{}}
	f.repos[repo] = r
	return r
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (f *fakeHub) options(t *testing.T) Options {
	return Options{Endpoint: f.hub.URL, CacheDir: t.TempDir(), RetryWait: time.Millisecond}
}

func (f *fakeHub) authorized(r *http.Request) bool {
	return f.token == "" || r.Header.Get("Authorization") == "Bearer "+f.token
}

func (f *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := strings.TrimPrefix(r.URL.Path, "/")
	if rest, ok := strings.CutPrefix(p, "api/models/"); ok {
		// api/models/{org}/{repo}/revision/{rev}
		el := strings.Split(rest, "/")
		if len(el) != 4 || el[2] != "revision" || r.URL.Query().Get("blobs") != "true" {
			http.NotFound(w, r)
			return
		}
		f.apiCalls++
		f.serveInfo(w, el[0]+"/"+el[1])
		return
	}
	// {org}/{repo}/resolve/{rev}/{file...}
	el := strings.SplitN(p, "/", 5)
	if len(el) != 5 || el[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo := f.repos[el[0]+"/"+el[1]]
	if repo == nil || el[3] != repo.commit && el[3] != "main" {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusUnauthorized)
		return
	}
	// As the Hub: a gated repository's listing is public, its files are not.
	if !f.authorized(r) {
		w.Header().Set("X-Error-Code", "GatedRepo")
		status := http.StatusUnauthorized
		if r.Header.Get("Authorization") != "" {
			status = http.StatusForbidden
		}
		http.Error(w, "Access to model "+el[0]+"/"+el[1]+" is restricted and you are not in the authorized list.", status)
		return
	}
	data, ok := repo.files[el[4]]
	if !ok {
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", repo.commit)
	w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
	w.Header().Set("X-Linked-Etag", `"`+sha256hex(data)+`"`)
	http.Redirect(w, r, f.cdn.URL+"/repos/"+sha256hex(data), http.StatusFound)
}

func (f *fakeHub) serveInfo(w http.ResponseWriter, name string) {
	repo := f.repos[name]
	if repo == nil { // the Hub answers 401, not 404, without a token
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, `{"error":"Repository not found"}`, http.StatusUnauthorized)
		return
	}
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int    `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sibling struct {
		RFilename string `json:"rfilename"`
		Size      int    `json:"size"`
		BlobID    string `json:"blobId"`
		LFS       *lfs   `json:"lfs,omitempty"`
	}
	var sibs []sibling
	for fname, data := range repo.files {
		s := sibling{RFilename: fname, Size: len(data), BlobID: gitBlobID(data)}
		if !repo.git[fname] {
			sum := sha256hex(data)
			if o, ok := repo.sums[fname]; ok {
				sum = o
			}
			s.LFS = &lfs{SHA256: sum, Size: len(data), PointerSize: 135}
			s.BlobID = gitBlobID([]byte("version https://git-lfs.github.com/spec/v1\noid sha256:" + sum))
		}
		sibs = append(sibs, s)
	}
	for _, x := range repo.extra {
		sibs = append(sibs, sibling{RFilename: x, Size: 4, LFS: &lfs{SHA256: sha256hex([]byte("evil")), Size: 4}})
	}
	json.NewEncoder(w).Encode(map[string]any{
		"_id": "66f5a0c1", "id": name, "modelId": name, "author": strings.Split(name, "/")[0],
		"sha": repo.commit, "lastModified": "2024-09-25T19:53:42.000Z", "private": false,
		"gated": false, "disabled": false, "downloads": 1, "likes": 0, "library_name": "gguf",
		"tags": []string{"gguf"}, "siblings": sibs,
	})
}

func (f *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.ranges = append(f.ranges, r.Header.Get("Range"))
	f.cdnAuth = append(f.cdnAuth, r.Header.Get("Authorization"))
	var data []byte
	for _, repo := range f.repos {
		for _, d := range repo.files {
			if "/repos/"+sha256hex(d) == r.URL.Path {
				data = d
			}
		}
	}
	cut, stall := int64(-1), false
	if f.drops > 0 {
		f.drops--
		cut = f.dropAt
	} else if f.stalls > 0 {
		f.stalls--
		cut, stall = f.dropAt, true
	}
	otherFile := false
	if data != nil && f.badTotal > 0 && r.Header.Get("Range") != "" {
		f.badTotal--
		otherFile = true
	}
	if data != nil && f.extraLen > 0 {
		data = append(append([]byte(nil), data...), make([]byte, f.extraLen)...)
	}
	f.mu.Unlock()
	if data == nil {
		http.NotFound(w, r)
		return
	}
	if otherFile { // a longer file, served from the asked offset on
		data = append(bytes.Repeat([]byte{'x'}, len(data)), make([]byte, 1000)...)
		var start int
		fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[start:])
		return
	}
	if stall {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data[:cut])
		w.(http.Flusher).Flush()
		select { // silent until the client gives up
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	if cut < 0 {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		return
	}
	http.ServeContent(&cutWriter{ResponseWriter: w, left: cut}, r, "", time.Time{}, bytes.NewReader(data))
}

// cutWriter sends left body bytes and then drops the connection, as a
// network failure mid-file does.
type cutWriter struct {
	http.ResponseWriter
	left int64
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if int64(len(b)) <= c.left {
		c.left -= int64(len(b))
		return c.ResponseWriter.Write(b)
	}
	n, _ := c.ResponseWriter.Write(b[:c.left])
	c.left = 0
	c.ResponseWriter.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(c.ResponseWriter).Hijack()
	if err == nil {
		conn.Close()
	}
	return n, fmt.Errorf("connection cut")
}
