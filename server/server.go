// Package server serves a gotok model over HTTP with OpenAI's API: chat
// and text completions (streamed as server-sent events or not, with
// log-probabilities, and JSON output held to a schema by constrained
// sampling), the model list, tokenize/detokenize, a health check for load
// balancers and Prometheus metrics, including the ones an inference
// gateway's endpoint picker reads.
//
//	srv, err := server.New(m, server.Options{ModelName: "smollm2"})
//	err = srv.Serve(ctx, listener) // until ctx ends, then drains
//
// One Server serves one model: Options.Parallel requests are admitted at
// once, and generate together on a model that batches (the CPU engine) or
// take turns on one that does not.
package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gotok"
)

// Options configures a Server. The zero value is usable.
type Options struct {
	// ModelName is the id of /v1/models and the "model" requests must
	// name (empty in a request is accepted). Default: "gotok".
	ModelName string
	// APIKey, when set, is required as "Authorization: Bearer KEY" on the
	// API (not on /health and /metrics).
	APIKey string
	// Parallel is how many requests are admitted at once (default 1);
	// they generate together when the model batches (load it with
	// gotok.Options.Sequences ≥ Parallel), else take turns.
	Parallel int
	// Queue is how many more may wait for a slot (0: the default, 64;
	// negative: none); beyond it a request gets 503 with Retry-After.
	Queue int
	// MaxBodyBytes bounds a request body (default 4 MiB).
	MaxBodyBytes int64
	// RequestTimeout bounds one request, queueing included (default 10
	// minutes).
	RequestTimeout time.Duration
	// DrainTimeout bounds how long Serve lets running requests finish
	// after its context ends (default 30 s); then they are cancelled.
	// (Run takes its own, which also bounds a load.)
	DrainTimeout time.Duration
	// CORSOrigins are the origins allowed to call the API from a browser
	// ("*" for any); none by default.
	CORSOrigins []string
	// ChatTemplate replaces the model's chat template: the name of one of
	// package chat's built-in formats, or a Jinja text (one with a "{%" or
	// "{{"). Anything else (a mistyped name) and a Jinja text that does not
	// parse make New fail: the operator's choice is never replaced by a
	// fallback.
	ChatTemplate string
	// FallbackTemplate is the built-in format used when the model's
	// template neither renders nor is recognized (default "chatml", as
	// llama-server).
	FallbackTemplate string
	// Logger receives one line per request and the server's notices (nil:
	// discarded).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.ModelName == "" {
		o.ModelName = "gotok"
	}
	if o.Parallel <= 0 {
		o.Parallel = 1
	}
	if o.Queue < 0 {
		o.Queue = 0
	} else if o.Queue == 0 {
		o.Queue = 64
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Minute
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.FallbackTemplate == "" {
		o.FallbackTemplate = "chatml"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ModelNameFromPath is the default model id for a GGUF file: its name
// without the extension.
func ModelNameFromPath(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// Server is an http.Handler serving one model.
type Server struct {
	o       Options
	model   *gotok.Model
	prompts *prompter
	sched   *scheduler
	metrics *metrics
	mux     *http.ServeMux
	created int64
	// kvUsed is the tokens in the KV cache of the running generation; 0
	// while none runs, though the engine keeps the last one's for prefix
	// reuse (vLLM too counts cached prefix blocks as free).
	kvUsed   atomic.Int64
	draining atomic.Bool
}

// New prepares a Server for a loaded model.
func New(m *gotok.Model, o Options) (*Server, error) {
	if m == nil {
		return nil, errors.New("server: no model")
	}
	o.defaults()
	src, _ := m.ChatTemplate()
	p, err := newPrompter(src, o.ChatTemplate, o.FallbackTemplate, m.Tokenizer(), o.Logger)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{
		o:       o,
		model:   m,
		prompts: p,
		sched:   newScheduler(o.Parallel, o.Queue, m.Batches()),
		created: time.Now().Unix(),
	}
	s.metrics = newMetrics(o.ModelName, s.sched, s.load, o.Parallel)
	s.mux = http.NewServeMux()
	s.route("/v1/chat/completions", http.MethodPost, apiRoute, s.handleChat)
	s.route("/v1/completions", http.MethodPost, apiRoute, s.handleCompletion)
	s.route("/v1/models", http.MethodGet, apiRoute, s.handleModels)
	s.route("/tokenize", http.MethodPost, apiRoute, s.handleTokenize)
	s.route("/detokenize", http.MethodPost, apiRoute, s.handleDetokenize)
	s.route("/health", http.MethodGet, 0, s.handleHealth)
	metricsHandler := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
	s.route("/metrics", http.MethodGet, 0, func(w http.ResponseWriter, r *http.Request) error {
		metricsHandler.ServeHTTP(w, r)
		return nil
	})
	s.route("/", "", 0, func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{Status: http.StatusNotFound, Type: typeNotFound, Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)}
	})
	return s, nil
}

// load is what the metrics report of the model's work: requests running
// and waiting, and the KV cache's use (0 to 1).
func (s *Server) load() (running, waiting int64, kvUse float64, eng gotok.EngineStats) {
	waiting = s.sched.waiting()
	if !s.model.Batches() {
		if n := s.model.ContextLen(); n > 0 {
			kvUse = float64(s.kvUsed.Load()) / float64(n)
		}
		return s.sched.running.Load(), waiting, kvUse, eng
	}
	eng = s.model.EngineStats()
	if eng.KVBlocks > 0 {
		kvUse = float64(eng.KVBlocksUsed) / float64(eng.KVBlocks)
	}
	return int64(eng.Running), waiting + int64(eng.Waiting), kvUse, eng
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// handlerFunc is an endpoint: an error it returns before writing is sent
// in OpenAI's shape.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// routeFlags say what route checks before an endpoint's handler.
type routeFlags int

const (
	// requireKey: the API key, when the server has one.
	requireKey routeFlags = 1 << iota
	// refuseDraining: 503 once draining, so that clients go elsewhere
	// (/health reports draining itself; /metrics is scraped to the end).
	refuseDraining

	apiRoute = requireKey | refuseDraining // the OpenAI API and tokenize
)

// route registers an endpoint behind what every request gets: the method
// check, CORS, the flags' checks, the body limit, panic recovery, the log
// line and the metrics.
func (s *Server) route(path, method string, flags routeFlags, h handlerFunc) {
	endpoint := path
	if path == "/" {
		endpoint = "other"
	}
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		info := &requestInfo{}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.o.Logger.Error("panic serving request", "path", r.URL.Path, "panic", p)
				if !rec.wrote {
					writeError(rec, fmt.Errorf("internal error: %v", p))
				}
			}
			elapsed := time.Since(start)
			s.metrics.requests.WithLabelValues(endpoint, strconv.Itoa(rec.status)).Inc()
			s.metrics.requestSeconds.WithLabelValues(endpoint).Observe(elapsed.Seconds())
			s.logRequest(r, rec.status, elapsed, info)
		}()
		if s.cors(rec, r) {
			return
		}
		var err error
		switch {
		case method != "" && r.Method != method:
			rec.Header().Set("Allow", method)
			err = &apiError{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Message: fmt.Sprintf("%s takes %s, not %s", path, method, r.Method)}
		case flags&refuseDraining != 0 && s.draining.Load():
			rec.Header().Set("Connection", "close")
			err = &apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Message: "server is shutting down"}
		case flags&requireKey != 0 && !s.authorized(r):
			err = withCode(&apiError{Status: http.StatusUnauthorized, Type: typeAuthentication, Message: "missing or wrong API key: send Authorization: Bearer KEY"}, "invalid_api_key")
		default:
			if err = s.readBody(rec, r); err == nil {
				err = h(rec, r)
			}
		}
		if err != nil {
			info.err = err
			if !rec.wrote {
				writeError(rec, err)
			}
		}
	})
}

// bodyTimeout bounds reading a request body, so that a client sending
// it slowly cannot hold a handler.
const bodyTimeout = time.Minute

// readBody reads the whole body, bounded in size and time, and replaces
// r.Body with it. The read deadline is lifted afterwards: a connection
// read that times out later would cancel the request's context mid-stream.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) error {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyTimeout)) // unsupported by some writers: then none
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
	rc.SetReadDeadline(time.Time{})
	r.Body.Close()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest,
			Message: fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit)}
	case err != nil:
		return &apiError{Status: http.StatusRequestTimeout, Type: typeInvalidRequest, Message: "reading the request body: " + err.Error()}
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	return nil
}

// authorized checks the Bearer key in constant time.
func (s *Server) authorized(r *http.Request) bool {
	if s.o.APIKey == "" {
		return true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(key), []byte(s.o.APIKey)) == 1
}

// cors adds the CORS headers for an allowed origin and answers a
// preflight (reporting true when it did).
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.o.CORSOrigins) == 0 {
		return false
	}
	allowed := false
	for _, o := range s.o.CORSOrigins {
		if o == "*" || o == origin {
			allowed = true
		}
	}
	if !allowed {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// requestInfo collects what the log line reports about a generation.
type requestInfo struct {
	id                             string // the response's id
	promptTokens, completionTokens int
	ttft                           time.Duration
	finish                         string
	stream                         bool
	err                            error
}

type requestInfoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	if i, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return i
	}
	return &requestInfo{}
}

func (s *Server) logRequest(r *http.Request, status int, elapsed time.Duration, info *requestInfo) {
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
		slog.String("remote", r.RemoteAddr),
	}
	if info.promptTokens > 0 {
		attrs = append(attrs,
			slog.String("id", info.id),
			slog.Bool("stream", info.stream),
			slog.Int("prompt_tokens", info.promptTokens),
			slog.Int("completion_tokens", info.completionTokens),
			slog.Duration("ttft", info.ttft),
			slog.String("finish", info.finish))
	}
	level := slog.LevelInfo
	if info.err != nil {
		attrs = append(attrs, slog.String("err", info.err.Error()))
		if status >= 500 {
			level = slog.LevelError
		}
	}
	s.o.Logger.LogAttrs(context.Background(), level, "request", attrs...)
}

// recorder keeps the status for the log and metrics, and passes Flush
// through for streaming.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	r.wrote = true
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// handleHealth is the readiness and liveness check: 200 once the model is
// loaded (a Server exists only then), 503 while draining so that load
// balancers stop sending.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	if s.draining.Load() {
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Message: "server is shutting down"}
	}
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write([]byte(`{"status":"ok"}` + "\n"))
	return err
}

// Serve serves on ln until ctx ends, then drains (see Run).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return run(ctx, ln, s.o.Logger, s.o.DrainTimeout, s, func(context.Context) (*Server, error) { return s, nil })
}

// ErrLoadAbandoned is Run's error when ctx ended while the model loaded
// and the load did not return within the drain timeout.
var ErrLoadAbandoned = errors.New("server: the model load did not stop within the drain timeout; abandoned")

// Run serves on ln while load prepares the Server: until it returns,
// /health and every endpoint answer 503 (the model is loading), so that a
// readiness probe waits. When ctx ends it drains: new requests are
// refused, /health reports 503, running requests finish for up to drain
// (0: 30 s), what is left is cancelled, and Run returns.
//
// If ctx ends while load runs, load's context is cancelled and Run waits
// for it up to drain. A load that returns in time ends Run with no error
// (or its own, unless it is the context's). One that does not is left
// running and Run returns ErrLoadAbandoned: the load must then release
// what it made itself (it sees its context ended), and Run never serves
// its Server. gotok.Load cannot be cancelled, so gotok serve exits with
// the load still running.
func Run(ctx context.Context, ln net.Listener, log *slog.Logger, drain time.Duration, load func(context.Context) (*Server, error)) error {
	return run(ctx, ln, log, drain, nil, load)
}

// run is Run; with ready set (Serve: a Server already made) it serves
// ready from the first connection, with no window of 503s before the load
// goroutine has stored it.
func run(ctx context.Context, ln net.Listener, log *slog.Logger, drain time.Duration, ready *Server, load func(context.Context) (*Server, error)) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if drain <= 0 {
		drain = 30 * time.Second
	}
	var current atomic.Pointer[Server]
	if ready != nil {
		current.Store(ready)
	}
	baseCtx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s := current.Load(); s != nil {
				s.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Retry-After", "5")
			writeError(w, withCode(&apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Message: "the model is loading"}, "loading"))
		}),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	loadCtx, cancelLoad := context.WithCancel(context.Background())
	defer cancelLoad()
	loaded := make(chan error, 1)
	go func() {
		s, err := load(loadCtx)
		if err == nil {
			if loadCtx.Err() != nil {
				s.draining.Store(true) // loaded during the shutdown: serve nothing new
			}
			current.Store(s)
			log.Info("ready", "addr", ln.Addr().String())
		}
		loaded <- err
	}()
	// stopLoad cancels a load still running and waits for it up to drain.
	stopLoad := func() error {
		cancelLoad()
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case err := <-loaded:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-t.C:
			return ErrLoadAbandoned
		}
	}
	select { // wait for the model
	case err := <-errc:
		return errors.Join(err, stopLoad())
	case err := <-loaded:
		if err != nil {
			hs.Close()
			<-errc
			return err
		}
	case <-ctx.Done():
		log.Info("stopping while the model loads", "timeout", drain)
		if err := stopLoad(); err != nil {
			hs.Close()
			<-errc
			return err
		}
	}
	if ctx.Err() == nil {
		select { // serve
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
	}
	if s := current.Load(); s != nil {
		s.draining.Store(true)
		log.Info("draining", "running", s.sched.running.Load(), "waiting", s.sched.waiting(), "timeout", drain)
	}
	drainCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := hs.Shutdown(drainCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("drain timed out: cancelling the requests left")
		cancelAll()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel2()
		if err = hs.Shutdown(ctx2); err != nil {
			hs.Close()
		}
	}
	<-errc // http.ErrServerClosed
	log.Info("drained")
	return err
}

// Draining reports whether Serve has begun shutting down.
func (s *Server) Draining() bool { return s.draining.Load() }

// queueFull is the 503, with Retry-After, for a full queue.
func (s *Server) queueFull(w http.ResponseWriter) error {
	w.Header().Set("Retry-After", "1")
	return withCode(&apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable,
		Message: fmt.Sprintf("server busy: %d requests running and %d waiting; retry later", s.o.Parallel, s.o.Queue)}, "queue_full")
}
