package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// repoInfo is what gotok needs of GET /api/models/{repo}/revision/{rev}?blobs=true.
type repoInfo struct {
	Commit string     // the commit the revision points at
	Files  []repoFile // the repository's GGUF files at that commit
}

// repoFile is one sibling of the model info.
type repoFile struct {
	Name   string // the path inside the repository
	Size   int64
	SHA256 string // of an LFS file's content, from lfs.sha256; "" for a file kept in git
	BlobID string // the git blob id (sha1), the checksum of a file kept in git
}

// One sibling of the Hub's model info ("sha" is the commit): with
// ?blobs=true each carries its size, its git blob id and, for an LFS file,
// the sha256 of its content.
type apiSibling struct {
	RFilename string  `json:"rfilename"`
	Size      *int64  `json:"size"`
	BlobID    string  `json:"blobId"`
	LFS       *apiLFS `json:"lfs"`
}

type apiLFS struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Bounds on what a model info may hold. The largest repositories list a
// few thousand files in well under a MiB; a listing is read entry by entry
// and only its GGUF files are kept, so that neither its bytes nor its
// entries can make it take more memory than these allow.
const (
	maxInfoBytes = 16 << 20
	maxSiblings  = 200_000
	maxFileSize  = 1 << 40 // 1 TiB: no model file comes near, and offsets stay far from overflowing
)

// errNotJSON says the endpoint answered with something else, as a captive
// portal's login page or a web server that is not a Hub does.
var errNotJSON = errors.New("the endpoint did not answer with JSON (is HF_ENDPOINT right?)")

// ErrNotFound is returned, wrapped, for a repository, revision or file the
// Hub does not have; errAuth and errGated tell the other reasons it refuses.
var (
	ErrNotFound  = errors.New("not found on the Hub (check the name)")
	errAuth      = errors.New("the Hub refused access: the repository does not exist, or is private or gated (check the name; set HF_TOKEN to a token with access)")
	errGated     = errors.New("a gated repository: accept its terms on the Hub and set HF_TOKEN to a token of that account")
	errDowngrade = errors.New("https never downgrades to http")
	// The Hub's answer to a request without a token (or with one that has
	// no access) for a private repository as for a missing one.
	errNotFoundOrPrivate = fmt.Errorf("%w; if it is private, set HF_TOKEN to a token with access", ErrNotFound)
)

// client talks to one Hub endpoint.
type client struct {
	endpoint string // without a trailing '/'
	token    string
	http     *http.Client
	stall    time.Duration
}

func newClient(o *Options) (*client, error) {
	ep := o.Endpoint
	if ep == "" {
		ep = DefaultEndpoint
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("hub endpoint %q: want an http or https URL", ep)
	}
	base := o.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	hc := *base
	hc.CheckRedirect = checkRedirect(base.CheckRedirect)
	return &client{endpoint: strings.TrimSuffix(ep, "/"), token: o.Token, http: &hc, stall: o.stallTimeout()}, nil
}

// checkRedirect refuses a redirect from https to plain http, so that what a
// TLS endpoint vouches for is never fetched in the clear, and drops the
// token when a redirect leaves the endpoint's host (downloads go to a CDN
// on signed URLs that need none).
func checkRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		for _, v := range via {
			if v.URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refused redirect from %s to %s: %w", v.URL.Host, req.URL.Redacted(), errDowngrade)
			}
		}
		if req.URL.Host != via[0].URL.Host {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

// get sends a GET request. A connection on which no byte comes for
// c.stall, waiting for the answer or reading its body, is cut with
// errStalled: a download retries it, nothing waits on it forever.
func (c *client) get(ctx context.Context, u string, header http.Header) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(c.stall, func() { cancel(errStalled) })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		timer.Stop()
		cancel(nil)
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", "gotok")
	resp, err := c.http.Do(req)
	if err != nil {
		timer.Stop()
		if errors.Is(context.Cause(ctx), errStalled) {
			err = fmt.Errorf("%s: %w", req.URL.Redacted(), errStalled)
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel, timer: timer, stall: c.stall}
	return resp, nil
}

// errStalled says a connection went silent.
var errStalled = errors.New("the connection stalled (no data for too long)")

// watchedBody restarts the stall timer on every read.
type watchedBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	stall  time.Duration
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.stall)
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.ctx), errStalled) {
		err = errStalled
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// statusError turns a refusal into an error that says what to do. What
// the server wrote is quoted, never printed raw: it ends up on a terminal.
func statusError(resp *http.Response, what string) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	detail := strings.TrimSpace(string(msg))
	if len(detail) > 200 {
		detail = detail[:200] + "..."
	}
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	// The Hub names its reason in X-Error-Code; it answers 401, not 404,
	// for a repository that does not exist, to not tell it from a private one.
	var reason error
	switch code := resp.Header.Get("X-Error-Code"); {
	case resp.StatusCode == http.StatusUnauthorized && code == "RepoNotFound":
		reason = errNotFoundOrPrivate
	case code == "RepoNotFound" || code == "EntryNotFound" || code == "RevisionNotFound":
		reason = ErrNotFound
	case code == "GatedRepo":
		reason = errGated
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		reason = errAuth
	case resp.StatusCode == http.StatusNotFound:
		reason = ErrNotFound
	default:
		reason = errors.New(status)
	}
	if detail != "" {
		return fmt.Errorf("%s: %w (%s: %q)", what, reason, status, detail)
	}
	return fmt.Errorf("%s: %w (%s)", what, reason, status)
}

func escapePath(p string) string {
	elems := strings.Split(p, "/")
	for i, e := range elems {
		elems[i] = url.PathEscape(e)
	}
	return strings.Join(elems, "/")
}

// repoInfo fetches the commit and the GGUF files of repo at rev.
func (c *client) repoInfo(ctx context.Context, repo, rev string) (*repoInfo, error) {
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", c.endpoint, escapePath(repo), url.PathEscape(rev))
	what := fmt.Sprintf("model info of %s at %s", repo, rev)
	resp, err := c.get(ctx, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, what)
	}
	if ct := resp.Header.Get("Content-Type"); strings.Contains(strings.ToLower(ct), "html") {
		return nil, fmt.Errorf("%s: %w (Content-Type %q)", what, errNotJSON, ct)
	}
	info, err := parseRepoInfo(io.LimitReader(resp.Body, maxInfoBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return info, nil
}

// parseRepoInfo reads a model info, one sibling at a time, keeping the
// GGUF files: those are all a pull may download, so an odd name elsewhere
// in the repository (runs/12:00:00/log.txt) is skipped, while an unsafe
// GGUF name refuses the listing whole.
func parseRepoInfo(r io.Reader) (*repoInfo, error) {
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotJSON
	}
	info := &repoInfo{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case "sha":
			if err := dec.Decode(&info.Commit); err != nil {
				return nil, fmt.Errorf("sha: %w", err)
			}
		case "siblings":
			if info.Files, err = parseSiblings(dec); err != nil {
				return nil, err
			}
		default:
			var skip json.RawMessage // bounded by maxInfoBytes, and dropped
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, err
	}
	if err := checkHex("commit", info.Commit, 40); err != nil {
		return nil, err
	}
	return info, nil
}

// parseSiblings reads the siblings array, checking each entry as it comes.
func parseSiblings(dec *json.Decoder) ([]repoFile, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("siblings: not a list (%v)", err)
	}
	var files []repoFile
	for n := 0; dec.More(); n++ {
		if n == maxSiblings {
			return nil, fmt.Errorf("siblings: more than %d files", maxSiblings)
		}
		var s apiSibling
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("siblings: %w", err)
		}
		if !strings.HasSuffix(strings.ToLower(s.RFilename), ".gguf") {
			continue
		}
		f, err := checkSibling(s)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, err
	}
	return files, nil
}

// checkSibling checks the name, size and checksum of a file that may be
// downloaded, before any of them touches the disk.
func checkSibling(s apiSibling) (repoFile, error) {
	if err := checkFileName(s.RFilename); err != nil {
		return repoFile{}, err
	}
	f := repoFile{Name: s.RFilename, Size: -1, BlobID: s.BlobID}
	if s.Size != nil {
		f.Size = *s.Size
	}
	if s.LFS != nil {
		if err := checkHex("sha256 of "+s.RFilename, s.LFS.SHA256, 64); err != nil {
			return repoFile{}, err
		}
		f.SHA256, f.Size = s.LFS.SHA256, s.LFS.Size
	}
	if f.Size > maxFileSize || f.Size < -1 || s.LFS != nil && f.Size < 0 {
		return repoFile{}, fmt.Errorf("%q: the listed size %d is out of range (0 to 1 TiB)", s.RFilename, f.Size)
	}
	return f, nil
}

// fileURL is where a repository file's content is downloaded from; the Hub
// answers with a redirect to its CDN.
func (c *client) fileURL(repo, commit, name string) string {
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.endpoint, escapePath(repo), commit, escapePath(name))
}
