// Command loadgen measures gotok serve under concurrent streaming chat
// requests on loopback: time to first token (p50, p99) and tokens per
// second at each concurrency, bounded in requests and time.
//
//	go run ./cmd/loadgen -m ../shared/models/stories260K.gguf -streams 1,8,32
//
// With -m it serves the model in-process on 127.0.0.1; with -url it loads
// a running server, which must be on a loopback address.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gotok"
	"gotok/server"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type config struct {
	model, device, target, prompt string
	streams                       []int
	requests, maxTokens, ctx      int
	threads                       int
	temp                          float64
	first                         int // the first request's number

	timeout time.Duration
}

func run(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	var c config
	var streams string
	fs.StringVar(&c.model, "m", "", "GGUF model to serve in-process on loopback")
	fs.StringVar(&c.device, "device", "auto", "with -m: cpu, cuda or auto")
	fs.IntVar(&c.ctx, "ctx", 0, "with -m: context length (0: the model's, at most 4096)")
	fs.IntVar(&c.threads, "t", 0, "with -m on the CPU: threads (0: all cores)")
	fs.StringVar(&c.target, "url", "", "a running server's base URL (loopback only), instead of -m")
	fs.StringVar(&streams, "streams", "1,8,32", "concurrent streams, one run each")
	fs.IntVar(&c.requests, "requests", 0, "requests per run (0: 4 per stream, at least 8)")
	fs.IntVar(&c.maxTokens, "n", 64, "max_tokens per request")
	fs.StringVar(&c.prompt, "p", "Once upon a time, there was a little dog.", "the user message")
	fs.Float64Var(&c.temp, "temp", 0, "sampling temperature (0: greedy; a model of random weights may need 1 to say anything visible)")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "bound on each run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, s := range strings.Split(streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 256 {
			return fmt.Errorf("-streams: %q is not a count from 1 to 256", s)
		}
		c.streams = append(c.streams, n)
	}
	if (c.model == "") == (c.target == "") {
		return errors.New("give -m MODEL or -url URL")
	}
	base := c.target
	if c.model != "" {
		m, err := gotok.Load(c.model, gotok.Options{Device: c.device, ContextLen: c.ctx, Threads: c.threads, Sequences: slices.Max(c.streams)})
		if err != nil {
			return err
		}
		defer m.Close()
		maxStreams := slices.Max(c.streams)
		s, err := server.New(m, server.Options{ModelName: "loadgen", Parallel: maxStreams, Queue: maxStreams, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		defer func() { cancel(); <-done }()
		base = "http://" + ln.Addr().String()
	} else if err := checkLoopback(base); err != nil {
		return err
	}
	fmt.Fprintf(out, "| streams | requests | failed | TTFT p50 | TTFT p99 | tokens/s per stream (median) | tokens/s total |\n|---|---|---|---|---|---|---|\n")
	for run, n := range c.streams {
		c.first = run * 1_000_000 // no prompt repeats an earlier run's
		r, err := measure(base, c, n)
		if err != nil {
			return fmt.Errorf("%d streams: %w", n, err)
		}
		// A failed request counts in no column but its own: a server
		// that fails some requests (llama-server's chat output parser
		// refuses some random models' text) is still measured on the rest.
		if r.failed > 0 {
			fmt.Fprintf(errOut, "loadgen: %d streams: %d of %d requests failed, the first: %v\n", n, r.failed, r.requests, r.firstErr)
		}
		fmt.Fprintf(out, "| %d | %d | %d | %s | %s | %.0f | %.0f |\n", n, r.requests, r.failed,
			ms(percentile(r.ttft, 50)), ms(percentile(r.ttft, 99)), median(r.perStream), r.total)
	}
	return nil
}

func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-url %s is not on loopback: loadgen only loads this machine", raw)
}

type result struct {
	requests  int
	failed    int   // requests that ended in an error (their tokens not counted)
	firstErr  error // the first of those
	ttft      []time.Duration
	perStream []float64 // each request's decode rate: tokens after the first per second
	total     float64   // all tokens over the run's wall time
}

// measure runs requests through n concurrent streams.
func measure(base string, c config, n int) (result, error) {
	requests := c.requests
	if requests == 0 {
		requests = max(4*n, 8)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// Each request numbers its message, so that its prompt differs from
	// every other one (of this run and earlier ones) after the template's
	// opening and the engine's prefix cache cannot skip the prefill.
	body := func(i int) []byte {
		b, _ := json.Marshal(map[string]any{
			"messages":       []map[string]string{{"role": "user", "content": fmt.Sprintf("%d. %s", c.first+i, c.prompt)}},
			"max_tokens":     c.maxTokens,
			"ignore_eos":     true, // every request makes its max_tokens, as benchmarks count them
			"temperature":    c.temp,
			"stream":         true,
			"stream_options": map[string]bool{"include_usage": true},
		})
		return b
	}
	jobs := make(chan int, requests)
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	var (
		mu     sync.Mutex
		res    = result{requests: requests}
		tokens int
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range jobs {
				ttft, rate, count, err := stream(ctx, base, body(i))
				mu.Lock()
				if err != nil {
					res.failed++
					if res.firstErr == nil {
						res.firstErr = err
					}
				} else {
					res.ttft = append(res.ttft, ttft)
					res.perStream = append(res.perStream, rate)
					tokens += count
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if res.failed == requests {
		return res, fmt.Errorf("every request failed: %w", res.firstErr)
	}
	res.total = float64(tokens) / time.Since(start).Seconds()
	return res, nil
}

// client opens a connection per request: a server that closes idle
// keep-alive connections (llama-server does, between runs) would otherwise
// fail the next POST on a dead one, which Go does not retry.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// stream runs one streaming chat request and times it.
func stream(ctx context.Context, base string, body []byte) (ttft time.Duration, rate float64, tokens int, err error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		return 0, 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	var firstAt, lastAt time.Time
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return 0, 0, 0, err
		}
		if chunk.Error != nil {
			return 0, 0, 0, errors.New(chunk.Error.Message)
		}
		if chunk.Usage != nil {
			tokens = chunk.Usage.CompletionTokens
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			if firstAt.IsZero() {
				firstAt = time.Now()
			}
			lastAt = time.Now()
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, 0, err
	}
	if firstAt.IsZero() {
		return 0, 0, 0, errors.New("no token came back")
	}
	if d := lastAt.Sub(firstAt); tokens > 1 && d > 0 {
		rate = float64(tokens-1) / d.Seconds()
	}
	return firstAt.Sub(start), rate, tokens, nil
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100 // nearest rank
	return s[max(i-1, 0)]
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
