// Package hub fetches GGUF models from the Hugging Face Hub by name, as
// "org/repo[:QUANT]", into the Hugging Face cache, and finds them there.
//
// Resolve is the one call a program needs: it returns the path of a model,
// from the cache when it is there and pulled from the Hub when not:
//
//	path, err := hub.Resolve(ctx, "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", hub.OptionsFromEnv())
//
// Downloads resume where an earlier one stopped (HTTP Range), are checked
// against the sha256 the Hub lists for them, and become visible in the cache
// only once they match. Names and file names that would lead outside the
// cache are refused.
package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// DefaultEndpoint is the Hub gotok talks to unless HF_ENDPOINT says otherwise.
const DefaultEndpoint = "https://huggingface.co"

// revision is the branch models are pulled from.
const revision = "main"

// Options says where the Hub and the cache are and how to fetch.
type Options struct {
	// Endpoint is the Hub's URL; "" means DefaultEndpoint. One that is set
	// (a local mirror, say) is used as given, http or https.
	Endpoint string
	// Token is sent to the endpoint (not to the hosts it redirects to), for
	// gated and private repositories.
	Token string
	// CacheDir is the Hugging Face hub cache directory ($HF_HUB_CACHE,
	// by default ~/.cache/huggingface/hub).
	CacheDir string
	// Offline uses only the cache: a model not there is an error.
	Offline bool
	// HTTPClient makes the requests; nil means http.DefaultClient. Its
	// redirect policy is wrapped: https never redirects to http.
	HTTPClient *http.Client
	// Progress, if set, is called as each file downloads, and when a pull
	// waits for another process's download or reads back a partial one
	// (Progress.Waiting, Progress.Checking).
	Progress func(Progress)
	// Retries is how many attempts in a row that bring no new bytes end a
	// download; 0 means 5. RetryWait is the pause after the first failed
	// attempt, growing with each; 0 means one second.
	Retries   int
	RetryWait time.Duration
	// StallTimeout cuts a connection on which no data came for this long
	// (a download then retries); 0 means one minute.
	StallTimeout time.Duration
}

func (o *Options) stallTimeout() time.Duration {
	if o.StallTimeout > 0 {
		return o.StallTimeout
	}
	return time.Minute
}

func (o *Options) retries() int {
	if o.Retries > 0 {
		return o.Retries
	}
	return 5
}

func (o *Options) retryWait() time.Duration {
	if o.RetryWait > 0 {
		return o.RetryWait
	}
	return time.Second
}

// OptionsFromEnv reads the settings huggingface_hub reads: HF_ENDPOINT;
// HF_TOKEN (or HUGGING_FACE_HUB_TOKEN, or the token file huggingface-cli
// login writes, $HF_TOKEN_PATH or $HF_HOME/token); the cache from
// HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME or the home directory; offline mode
// from GOTOK_OFFLINE or HF_HUB_OFFLINE (1, true, yes or on).
func OptionsFromEnv() Options {
	o := Options{Endpoint: os.Getenv("HF_ENDPOINT")}
	o.Token = os.Getenv("HF_TOKEN")
	if o.Token == "" {
		o.Token = os.Getenv("HUGGING_FACE_HUB_TOKEN")
	}
	home := hfHome()
	if o.Token == "" {
		p := os.Getenv("HF_TOKEN_PATH")
		if p == "" && home != "" {
			p = filepath.Join(home, "token")
		}
		if b, err := os.ReadFile(p); err == nil {
			o.Token = strings.TrimSpace(string(b))
		}
	}
	o.CacheDir = os.Getenv("HF_HUB_CACHE")
	if o.CacheDir == "" && home != "" {
		o.CacheDir = filepath.Join(home, "hub")
	}
	o.Offline = envTrue("GOTOK_OFFLINE") || envTrue("HF_HUB_OFFLINE")
	return o
}

// hfHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface; "" when none can be found.
func hfHome() string {
	if h := os.Getenv("HF_HOME"); h != "" {
		return h
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "huggingface")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "huggingface")
	}
	return ""
}

func envTrue(key string) bool {
	switch strings.ToLower(os.Getenv(key)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// Model is a model in the cache.
type Model struct {
	Repo   string   // "org/repo"
	Quant  string   // the quantization its file name states ("Q4_K_M"), or ""
	Commit string   // the snapshot it belongs to
	Files  []string // its files' paths in the repository; several for a multi-part model, the first part first
	Path   string   // the first file's path in the cache: what to load
	Size   int64    // bytes, all parts together
}

// Name is the name that finds this model again.
func (m Model) Name() Name { return Name{Repo: m.Repo, Quant: m.Quant} }

// ErrNotCached is returned, wrapped, by Resolve in offline mode for a model
// the cache does not hold.
var ErrNotCached = errors.New("not in the cache")

// Resolve returns the path of the model a name such as
// "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M" stands for: from the cache
// when it holds a file of that quantization, else pulled from the Hub (as
// Pull). In offline mode it never goes to the Hub. For a multi-part model
// the path is the first part's; the other parts lie beside it. It is safe
// to call from several goroutines and processes at once.
func Resolve(ctx context.Context, name string, o Options) (string, error) {
	n, err := ParseName(name)
	if err != nil {
		return "", err
	}
	// Online, a name without a quantization only takes the cache's file of
	// the default quantization: the Hub may hold a better one than what the
	// cache has.
	if m, err := cached(n, &o, o.Offline); err == nil {
		return m.Path, nil
	} else if o.Offline {
		return "", offline(err)
	}
	m, err := pull(ctx, n, &o)
	if err != nil {
		return "", err
	}
	return m.Path, nil
}

// Pull fetches a model from the Hub into the cache, whatever the cache
// holds already (complete blobs are not fetched again), and returns it. In
// offline mode it returns the cached model, or an error.
func Pull(ctx context.Context, name string, o Options) (Model, error) {
	n, err := ParseName(name)
	if err != nil {
		return Model{}, err
	}
	if o.Offline {
		m, err := cached(n, &o, true)
		if err != nil {
			return Model{}, offline(err)
		}
		return m, nil
	}
	return pull(ctx, n, &o)
}

func offline(err error) error {
	return fmt.Errorf("%w; offline mode (GOTOK_OFFLINE or HF_HUB_OFFLINE) uses only the cache", err)
}

func pull(ctx context.Context, n Name, o *Options) (Model, error) {
	cl, err := newClient(o)
	if err != nil {
		return Model{}, err
	}
	info, err := cl.repoInfo(ctx, n.Repo, revision)
	if err != nil {
		return Model{}, err
	}
	byName := make(map[string]repoFile, len(info.Files))
	var names []string
	for _, f := range info.Files {
		byName[f.Name] = f
		names = append(names, f.Name)
	}
	files, err := chooseFile(names, n.Quant, true)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", n.Repo, err)
	}
	c, err := openRepo(o.CacheDir, n.Repo, true)
	if err != nil {
		return Model{}, err
	}
	defer c.Close()
	unlock, err := c.lockRepo(ctx, false)
	if err != nil {
		return Model{}, fmt.Errorf("pull %s: %w", n, err)
	}
	defer unlock()
	m := Model{Repo: n.Repo, Quant: QuantOf(files[0]), Commit: info.Commit, Files: files}
	for _, name := range files {
		f := byName[name]
		sum, err := cl.fetch(ctx, c, info.Commit, f, o)
		if err != nil {
			return Model{}, fmt.Errorf("pull %s: %w", n, err)
		}
		if err := c.link(info.Commit, name, sum); err != nil {
			return Model{}, fmt.Errorf("pull %s: %w", n, err)
		}
		m.Size += f.Size
	}
	if err := c.writeRef(revision, info.Commit); err != nil {
		return Model{}, fmt.Errorf("pull %s: %w", n, err)
	}
	m.Path = c.path(path.Join(snapshotDir(info.Commit), files[0]))
	return m, nil
}

// cached finds a model in the cache: in the snapshot refs/main points at,
// else in another snapshot, as List shows them (refs/main may have moved
// on to a commit of which only another quantization was pulled). fallback
// lets a name without a quantization take the first model file when there
// is none of DefaultQuant.
func cached(n Name, o *Options, fallback bool) (Model, error) {
	notCached := func(err error) (Model, error) {
		return Model{}, fmt.Errorf("%s: %w (%s): %v", n, ErrNotCached, o.CacheDir, err)
	}
	c, err := openRepo(o.CacheDir, n.Repo, false)
	if err != nil {
		return notCached(err)
	}
	defer c.Close()
	commits := c.snapshots()
	if len(commits) == 0 {
		return notCached(errors.New("no snapshots"))
	}
	var first error // the reason of the snapshot refs/main points at
	for _, commit := range commits {
		m, err := c.snapshotModel(n, commit, fallback)
		if err == nil {
			return m, nil
		}
		if first == nil {
			first = err
		}
	}
	return notCached(first)
}

// snapshotModel finds a model in one snapshot; every part must be there.
func (c *cache) snapshotModel(n Name, commit string, fallback bool) (Model, error) {
	names, err := c.snapshotFiles(commit)
	if err != nil {
		return Model{}, err
	}
	files, err := chooseFile(names, n.Quant, fallback)
	if err != nil {
		return Model{}, err
	}
	m := Model{Repo: n.Repo, Quant: QuantOf(files[0]), Commit: commit, Files: files}
	for _, f := range files {
		size, err := c.fileSize(commit, f)
		if err != nil {
			return Model{}, err
		}
		m.Size += size
	}
	m.Path = c.path(path.Join(snapshotDir(commit), files[0]))
	return m, nil
}
