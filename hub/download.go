package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// Progress tells how the download of one file goes.
type Progress struct {
	File  string // the repository path of the file
	Done  int64  // bytes on disk, including those of an earlier, resumed download
	Total int64  // the file's size
	// Waiting is set, with Done 0, when another process is downloading
	// the file: this one waits for it to finish.
	Waiting bool
	// Checking is set while what an earlier download left is read back to
	// be hashed, before the download resumes; Done counts the bytes read.
	Checking bool
}

// checksum returns the blob name of a file and a hash that must sum to it:
// the sha256 of the content for an LFS file (the Hub's X-Linked-Etag), the
// git blob id (sha1 of "blob {size}\0" and the content) for a file kept in
// git, as huggingface_hub names its blobs.
func checksum(f repoFile) (string, hash.Hash, error) {
	if f.Size < 0 {
		return "", nil, fmt.Errorf("%s: the Hub gave no size for it", f.Name)
	}
	if f.SHA256 != "" {
		return f.SHA256, sha256.New(), nil
	}
	if checkHex("git blob id of "+f.Name, f.BlobID, 40) != nil {
		return "", nil, fmt.Errorf("%s: the Hub gave no checksum to verify it by", f.Name)
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", f.Size)
	return f.BlobID, h, nil
}

// fetch makes sure the blob of f is in the cache: downloaded into
// blobs/{hash}.incomplete (resumed from what an earlier attempt left there),
// checked against the Hub's checksum, and only then renamed to blobs/{hash}.
// A download cut off leaves only the .incomplete file, which nothing reads
// as a model; a checksum mismatch leaves nothing.
func (cl *client) fetch(ctx context.Context, c *cache, commit string, f repoFile, o *Options) (string, error) {
	sum, h, err := checksum(f)
	if err != nil {
		return "", err
	}
	if c.hasBlob(sum, f.Size) {
		return sum, nil
	}
	unlock, err := c.lock(ctx, sum, func() {
		if o.Progress != nil {
			o.Progress(Progress{File: f.Name, Total: f.Size, Waiting: true})
		}
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.Name, err)
	}
	defer unlock()
	if c.hasBlob(sum, f.Size) { // another process finished it while we waited
		return sum, nil
	}
	blob := blobName(sum)
	part := blob + ".incomplete"
	if err := c.root.MkdirAll(path.Dir(blob), 0o755); err != nil {
		return "", err
	}
	if fi, err := c.root.Lstat(part); err == nil && !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %s is not a regular file; refusing to write through it", f.Name, c.path(part))
	}
	w, err := c.root.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer w.Close()
	// Hash what an earlier attempt left, so the sum covers the whole file.
	have, err := hashPartial(ctx, w, h, f, o)
	if err != nil {
		return "", fmt.Errorf("%s: reading the partial download: %w", f.Name, err)
	}
	if have > f.Size {
		if have, err = restart(w, h, f); err != nil {
			return "", err
		}
	}
	if err := cl.download(ctx, w, h, have, c.repo, commit, f, o); err != nil {
		if errors.Is(err, errTooLong) { // nothing of it can be trusted
			w.Close()
			c.root.Remove(part)
		}
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		w.Close()
		c.root.Remove(part)
		return "", fmt.Errorf("%s: checksum mismatch: the Hub lists %s, the download sums to %s; the download was deleted", f.Name, sum, got)
	}
	if err := w.Sync(); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := c.root.Rename(part, blob); err != nil {
		return "", err
	}
	return sum, nil
}

// hashPartial hashes what an earlier download left in w, reporting
// Checking progress every 256 MiB (gigabytes take a while), and returns
// its size.
func hashPartial(ctx context.Context, w *os.File, h hash.Hash, f repoFile, o *Options) (int64, error) {
	fi, err := w.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var have, next int64
	for {
		if have >= next && fi.Size() > 0 && o.Progress != nil {
			o.Progress(Progress{File: f.Name, Done: have, Total: f.Size, Checking: true})
			next += 256 << 20
		}
		n, err := w.Read(buf)
		h.Write(buf[:n])
		have += int64(n)
		if err == io.EOF {
			return have, nil
		}
		if err != nil {
			return have, err
		}
		if ctx.Err() != nil {
			return have, ctx.Err()
		}
	}
}

// restart empties the partial file and resets the hash of a checksum whose
// header (a git blob's) was already written.
func restart(w *os.File, h hash.Hash, f repoFile) (int64, error) {
	if err := w.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := w.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	h.Reset()
	if f.SHA256 == "" {
		fmt.Fprintf(h, "blob %d\x00", f.Size)
	}
	return 0, nil
}

// download appends the rest of f to w from byte have on, retrying with an
// HTTP Range request where a connection breaks. It gives up after
// o.retries() attempts in a row that brought no new bytes.
func (cl *client) download(ctx context.Context, w *os.File, h hash.Hash, have int64, repo, commit string, f repoFile, o *Options) error {
	report := func() {
		if o.Progress != nil {
			o.Progress(Progress{File: f.Name, Done: have, Total: f.Size})
		}
	}
	report()
	failures := 0
	for have != f.Size {
		before := have
		err := cl.getRange(ctx, w, h, &have, repo, commit, f, report)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (%d of %d bytes kept for resuming)", f.Name, ctx.Err(), have, f.Size)
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("%s: %w", f.Name, perm.err)
		}
		if have > before {
			failures = 0
		}
		failures++
		if failures >= o.retries() {
			return fmt.Errorf("%s: %w (gave up after %d attempts; %d of %d bytes kept for resuming)", f.Name, err, failures, have, f.Size)
		}
		select {
		case <-time.After(o.retryWait() * time.Duration(failures)):
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", f.Name, ctx.Err())
		}
	}
	return nil
}

// errTooLong says the server sent more bytes than the file has.
var errTooLong = errors.New("the server sent too much")

// permanentError is an answer no retry will change.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

// getRange makes one request for the bytes from *have on and appends what
// comes to w and h, advancing *have.
func (cl *client) getRange(ctx context.Context, w *os.File, h hash.Hash, have *int64, repo, commit string, f repoFile, report func()) error {
	header := http.Header{}
	if *have > 0 {
		header.Set("Range", "bytes="+strconv.FormatInt(*have, 10)+"-")
	}
	resp, err := cl.get(ctx, cl.fileURL(repo, commit, f.Name), header)
	if errors.Is(err, errDowngrade) {
		return &permanentError{err}
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		cr := resp.Header.Get("Content-Range")
		start, total, ok := parseContentRange(cr)
		if !ok || start != *have {
			return fmt.Errorf("asked for bytes from %d on, got Content-Range %q", *have, cr)
		}
		if total != f.Size {
			// Another file than the one listed: what was kept may be of
			// it too. The next attempt starts from the first byte.
			if *have, err = restart(w, h, f); err != nil {
				return &permanentError{err}
			}
			report()
			return fmt.Errorf("got Content-Range %q, but the Hub lists %d bytes; restarting from the first byte", cr, f.Size)
		}
	case http.StatusOK:
		if *have > 0 { // the server ignored the Range: start over
			if *have, err = restart(w, h, f); err != nil {
				return &permanentError{err}
			}
			report()
		}
	case http.StatusRequestedRangeNotSatisfiable:
		*have, err = restart(w, h, f)
		if err != nil {
			return &permanentError{err}
		}
		return errors.New("range not satisfiable; restarting")
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return &permanentError{statusError(resp, "download")}
	default:
		return statusError(resp, "download")
	}
	// Read at most one byte more than the file should have left, to notice
	// a server that sends too much.
	body := io.LimitReader(resp.Body, f.Size-*have+1)
	buf := make([]byte, 256<<10)
	for {
		k, rerr := body.Read(buf)
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return &permanentError{fmt.Errorf("writing the download: %w", err)}
			}
			h.Write(buf[:k])
			*have += int64(k)
			report()
			if *have > f.Size {
				return &permanentError{fmt.Errorf("%w: more than the %d bytes the Hub lists; the download was deleted", errTooLong, f.Size)}
			}
		}
		if rerr == io.EOF {
			if *have < f.Size {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// parseContentRange parses the first byte and the total size of
// "bytes START-END/TOTAL"; an unknown total ("*") is not ok.
func parseContentRange(cr string) (start, total int64, ok bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, 0, false
	}
	first, rest, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	_, size, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	total, err2 := strconv.ParseInt(size, 10, 64)
	return start, total, err1 == nil && err2 == nil
}
