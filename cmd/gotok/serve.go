package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"gotok"
	"gotok/backend"
	"gotok/chat"
	"gotok/server"
)

func newServeCmd() *cobra.Command {
	var (
		lf       loadFlags
		o        server.Options
		host     string
		port     int
		cors     string
		logJSON  bool
		apiKeyFn string
		kvFlag   int
	)
	cmd := &cobra.Command{
		Use:   "serve -m MODEL [--host 127.0.0.1] [--port 8080]",
		Short: "Serve the model over HTTP with OpenAI's API",
		Long: `serve loads the model and answers OpenAI-compatible requests:
POST /v1/chat/completions and /v1/completions (streamed with "stream": true),
GET /v1/models, POST /tokenize and /detokenize, GET /health (200 once the
model is loaded, 503 while loading or draining) and GET /metrics
(Prometheus, including the gauges an inference gateway's endpoint picker
reads).

The chat prompt is written with the model's own tokenizer.chat_template
(Jinja); --chat-template replaces it with a built-in format or a Jinja file
(one that does not parse stops startup).

On the CPU, --parallel N requests generate together (continuous batching:
one step reads the weights once for all of them; prompts are read in chunks
between decode steps), their keys and values in one KV cache pool of
--kv-tokens (default N × --ctx) whose blocks a prompt that starts like an
earlier one reuses; on the GPU they take turns until its engine batches.
--queue more wait, the rest get 503 with Retry-After. SIGTERM or Ctrl-C drains: new requests are refused, running
ones finish (up to --drain-timeout), then the server exits.

Example:
  gotok serve -m SmolLM2-135M-Instruct.Q4_0.gguf --port 8080
  curl -N localhost:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"Hi"}],"stream":true}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 0 || port > 65535 {
				return fmt.Errorf("--port %d is not a TCP port", port)
			}
			if o.Parallel < 1 || kvFlag < 0 {
				return fmt.Errorf("--parallel must be at least 1 and --kv-tokens not negative")
			}
			key, err := apiKey(cmd.Flags().Changed("api-key"), o.APIKey, apiKeyFn)
			if err != nil {
				return err
			}
			o.APIKey = key
			o.CORSOrigins = corsOrigins(cors)
			path, err := resolveModel(cmd.Context(), lf.model, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if o.ModelName == "" {
				o.ModelName = server.ModelNameFromPath(path)
			}
			if o.ChatTemplate != "" && !isBuiltinTemplate(o.ChatTemplate) {
				data, err := os.ReadFile(o.ChatTemplate)
				if err != nil {
					return fmt.Errorf("--chat-template is neither a built-in format nor a readable file: %w", err)
				}
				// Checked before the model loads; the server refuses it too.
				if _, err := chat.ParseJinja(string(data), chat.SpecialTokens{}); err != nil {
					return fmt.Errorf("--chat-template %s: %w", o.ChatTemplate, err)
				}
				o.ChatTemplate = string(data)
			}
			if o.Queue == 0 {
				o.Queue = -1 // --queue 0: no queue (0 is the library's default)
			}
			level := slog.LevelInfo
			if lf.verbose {
				level = slog.LevelDebug
			}
			var h slog.Handler = slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})
			if logJSON {
				h = slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})
			}
			log := slog.New(h)
			o.Logger = log

			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return err
			}
			log.Info("listening", "addr", ln.Addr().String(), "model", path)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var model *gotok.Model // the load's, once Run has waited for it
			err = server.Run(ctx, ln, log, o.DrainTimeout, func(ctx context.Context) (*server.Server, error) {
				start := time.Now()
				// gotok.Load cannot be cancelled: a SIGTERM during it ends
				// Run after --drain-timeout, and the process with it.
				m, err := gotok.Load(path, gotok.Options{Device: lf.device, ContextLen: lf.ctx, Threads: lf.threads, Logger: log,
					Sequences: o.Parallel, KVTokens: kvFlag, Mmap: lf.mmap, KVType: lf.kvType})
				if err != nil {
					return nil, err
				}
				if ctx.Err() != nil { // stopped while loading: Run may be gone
					m.Close()
					return nil, ctx.Err()
				}
				model = m
				attrs := []any{"path", path, "ctx", m.ContextLen(), "took", time.Since(start).Round(time.Millisecond)}
				if r, ok := m.Backend().(backend.MemoryReporter); ok {
					attrs = append(attrs, "memory", memoryLine(r.Memory()))
				}
				log.Info("model loaded", attrs...)
				return server.New(m, o)
			})
			if errors.Is(err, server.ErrLoadAbandoned) {
				return err // the load still runs and owns its model
			}
			if model != nil {
				model.Close()
			}
			return err
		},
	}
	f := cmd.Flags()
	lf.add(f)
	f.StringVar(&host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	f.IntVar(&port, "port", 8080, "TCP port")
	f.StringVar(&o.ModelName, "name", "", "model id served in /v1/models and expected in requests (default: the file name)")
	f.StringVar(&o.APIKey, "api-key", "", "require Authorization: Bearer KEY (default: $GOTOK_API_KEY)")
	f.StringVar(&apiKeyFn, "api-key-file", "", "read the API key from a file (a Kubernetes secret)")
	f.IntVar(&o.Parallel, "parallel", 4, "requests generating at once (batched on the CPU; taking turns on the GPU)")
	f.IntVar(&kvFlag, "kv-tokens", 0, "KV cache pool shared by the running requests, in tokens (0: --parallel × --ctx)")
	f.IntVar(&o.Queue, "queue", 64, "requests that may wait beyond --parallel before 503s")
	f.Int64Var(&o.MaxBodyBytes, "max-body", 4<<20, "largest request body in bytes")
	f.DurationVar(&o.RequestTimeout, "timeout", 10*time.Minute, "longest a request may take, queueing included")
	f.DurationVar(&o.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long running requests may finish")
	f.StringVar(&cors, "cors", "", "comma-separated origins allowed by CORS (\"*\": any; default: CORS off)")
	f.StringVar(&o.ChatTemplate, "chat-template", "", "built-in chat format name, or a Jinja file, replacing the model's template")
	f.BoolVar(&logJSON, "log-json", false, "log JSON lines instead of text")
	return cmd
}

func isBuiltinTemplate(name string) bool {
	for _, n := range chat.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// apiKey is the key the API requires: --api-key, else --api-key-file,
// else $GOTOK_API_KEY, else none. A key that is given but blank is an
// error: taking it for "no key" would silently serve without auth.
func apiKey(flagSet bool, flagKey, file string) (string, error) {
	if flagSet {
		if strings.TrimSpace(flagKey) == "" {
			return "", errors.New("--api-key is empty: give a key, or leave the flag out to serve without one")
		}
		return flagKey, nil
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--api-key-file: %w", err)
		}
		key := strings.TrimSpace(string(data))
		if key == "" {
			return "", fmt.Errorf("--api-key-file %s is empty: it must hold the API key", file)
		}
		return key, nil
	}
	if env, ok := os.LookupEnv("GOTOK_API_KEY"); ok {
		key := strings.TrimSpace(env)
		if key == "" {
			return "", errors.New("GOTOK_API_KEY is set but blank: give a key, or unset it to serve without one")
		}
		return key, nil
	}
	return "", nil
}

// corsOrigins splits --cors: "a, b" is two origins, not "a" and " b".
func corsOrigins(list string) []string {
	var out []string
	for _, origin := range strings.Split(list, ",") {
		if origin = strings.TrimSpace(origin); origin != "" {
			out = append(out, origin)
		}
	}
	return out
}
