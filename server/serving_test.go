package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"gotok"
	"gotok/model/synth"
	"gotok/quant"
)

// longModel is a generated tiny model with a long context: its random
// weights keep generating, so a stream lasts long enough to interrupt.
func longModel(t *testing.T) *gotok.Model {
	t.Helper()
	shape := synth.Presets["tiny"]
	shape.Context = 4096
	w, err := synth.Generate(synth.Options{Shape: shape, Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "long.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return loadModel(t, path, 4096)
}

// streamLines posts a streaming request and returns a reader of its SSE
// data lines.
func streamLines(t *testing.T, ctx context.Context, url, body string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	return resp, bufio.NewScanner(resp.Body)
}

func nextData(sc *bufio.Scanner) (string, bool) {
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return d, true
		}
	}
	return "", false
}

// waitFor polls cond for up to two seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A client that leaves mid-stream stops its generation: the engine is
// free again long before the tokens it asked for would have been made.
func TestClientDisconnect(t *testing.T) {
	s, ts, logs := testServer(t, longModel(t), Options{ModelName: "long"})
	ctx, cancel := context.WithCancel(context.Background())
	resp, sc := streamLines(t, ctx, ts.URL+"/v1/completions", `{"prompt":"a","max_tokens":4000,"stream":true,"temperature":0}`)
	if _, ok := nextData(sc); !ok {
		t.Fatal("no first chunk")
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the generation to stop", func() bool {
		// Which the server sees first depends on timing: the request's
		// context ending, or a write to the closed connection failing.
		l := logs.String()
		return s.sched.running.Load() == 0 && (strings.Contains(l, "client closed the request") || strings.Contains(l, "client stopped reading"))
	})
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "client closed") || strings.Contains(line, "client stopped") {
			t.Logf("%s", line)
			if strings.Contains(line, "completion_tokens=4000") {
				t.Error("the generation ran to the end after the client left")
			}
		}
	}
	// The engine serves the next request.
	resp2 := post(t, ts, "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	if body := readBody(t, resp2); resp2.StatusCode != 200 {
		t.Errorf("next request: %d %s", resp2.StatusCode, body)
	}
}

// Concurrent clients each get the answer they would get alone.
func TestConcurrentClients(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{Parallel: 4, Queue: 16})
	c := client(ts)
	params := openai.ChatCompletionNewParams{
		Model:     "stories260K",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		MaxTokens: openai.Int(16), Temperature: openai.Float(0),
	}
	want, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 12 {
		wg.Go(func() {
			if i%2 == 0 {
				got, err := c.Chat.Completions.New(t.Context(), params)
				if err != nil {
					errs <- err.Error()
				} else if got.Choices[0].Message.Content != want.Choices[0].Message.Content {
					errs <- "different reply: " + got.Choices[0].Message.Content
				}
				return
			}
			stream := c.Chat.Completions.NewStreaming(t.Context(), params)
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				errs <- err.Error()
			} else if acc.Choices[0].Message.Content != want.Choices[0].Message.Content {
				errs <- "different streamed reply: " + acc.Choices[0].Message.Content
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A full queue turns requests away with 503 and Retry-After; a request
// that waits longer than the timeout gets 504.
func TestQueueFullAndTimeout(t *testing.T) {
	s, ts, _ := storiesServer(t, Options{Parallel: 1, Queue: 1, RequestTimeout: 300 * time.Millisecond})
	release, err := s.sched.admit(context.Background()) // the one slot
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":2}`))
		if err != nil {
			queued <- 0
			return
		}
		resp.Body.Close()
		queued <- resp.StatusCode
	}()
	waitFor(t, "a request in the queue", func() bool { return s.sched.queued.Load() == 1 })
	if got := scrape(t, ts, "vllm:num_requests_waiting"); got != "1" {
		t.Errorf("vllm:num_requests_waiting = %s with one request queued", got)
	}
	resp := post(t, ts, "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	body := readBody(t, resp)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "queue_full") {
		t.Errorf("full queue: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if code := <-queued; code != 504 {
		t.Errorf("queued past the timeout: %d, want 504", code)
	}
	release()
	resp = post(t, ts, "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	if body := readBody(t, resp); resp.StatusCode != 200 {
		t.Errorf("after release: %d %s", resp.StatusCode, body)
	}
}

// scrape returns a metric's value from /metrics (labels ignored).
func scrape(t *testing.T, ts *httptest.Server, name string) string {
	t.Helper()
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(readBody(t, resp)) {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	t.Fatalf("no metric %s", name)
	return ""
}

func TestMetrics(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	resp := post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`)
	readBody(t, resp)
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	for _, want := range []string{
		`gotok_requests_total{code="200",endpoint="/v1/chat/completions"} 1`,
		`gotok_time_to_first_token_seconds_count 1`,
		`gotok_generation_tokens_total 4`,
		`gotok_queue_length{model_name="stories260K"} 0`,
		`vllm:num_requests_waiting{model_name="stories260K"} 0`,
		`vllm:num_requests_running{model_name="stories260K"} 0`,
		`vllm:kv_cache_usage_perc{model_name="stories260K"}`,
		`vllm:gpu_cache_usage_perc{model_name="stories260K"}`,
		`vllm:lora_requests_info{max_lora="0"`,
		`gotok_request_duration_seconds_count{endpoint="/v1/chat/completions"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Idle, the cache kept for prefix reuse counts as free, as in vLLM:
	// an endpoint picker must not see an idle server as full.
	for _, name := range []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "gotok_kv_cache_usage_ratio"} {
		if v := scrape(t, ts, name); v != "0" {
			t.Errorf("%s is %s while idle, want 0", name, v)
		}
	}
}

// Run serves 503 until the model is loaded, then drains on cancel: the
// running stream finishes, new connections are refused.
func TestRunLoadAndDrain(t *testing.T) {
	m := longModel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadNow := make(chan struct{})
	var srv *Server
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ln, nil, 5*time.Second, func(context.Context) (*Server, error) {
			<-loadNow
			s, err := New(m, Options{ModelName: "long", DrainTimeout: 5 * time.Second})
			srv = s
			return s, err
		})
	}()
	health := func() int {
		resp, err := http.Get(url + "/health")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := health(); code != 503 {
		t.Errorf("health while loading: %d, want 503", code)
	}
	close(loadNow)
	waitFor(t, "ready", func() bool { return health() == 200 })

	resp, sc := streamLines(t, context.Background(), url+"/v1/completions", `{"prompt":"a","max_tokens":1500,"stream":true,"temperature":0}`)
	defer resp.Body.Close()
	if _, ok := nextData(sc); !ok {
		t.Fatal("no first chunk")
	}
	cancel() // SIGTERM, in gotok serve
	waitFor(t, "draining", func() bool { return srv.Draining() })
	if srv.sched.running.Load() != 1 {
		t.Error("the stream was over before the drain began: the test proves nothing")
	}
	last, finish := "", ""
	for {
		d, ok := nextData(sc)
		if !ok {
			break
		}
		last = d
		if strings.Contains(d, `"finish_reason":"length"`) {
			finish = "length"
		}
	}
	if last != "[DONE]" || finish != "length" {
		t.Errorf("the running stream did not finish: last %q, finish %q", last, finish)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after draining")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Error("a request was served after the drain")
	}
}

// A drain that outlasts its timeout cancels what is left.
func TestDrainTimeout(t *testing.T) {
	m := longModel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	s, err := New(m, Options{ModelName: "long", DrainTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release, _ := s.sched.admit(context.Background()) // a request that never ends
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	stuck := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":2}`))
		if err != nil {
			stuck <- 0
			return
		}
		resp.Body.Close()
		stuck <- resp.StatusCode
	}()
	waitFor(t, "a queued request", func() bool { return s.sched.queued.Load() == 1 })
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("drain took %v with a 100ms timeout", d)
	}
	<-stuck
	if n := s.sched.queued.Load(); n != 0 {
		t.Errorf("%d requests still queued after the drain", n)
	}
}

// A load that fails ends Run with its error; a cancel during the load
// cancels the load's context and waits for it, up to the drain timeout,
// so that its caller can release what it made; a load that outlasts the
// drain is abandoned.
func TestRunLoadFailsOrIsCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bad := errors.New("no such model")
	if err := Run(context.Background(), ln, nil, 0, func(context.Context) (*Server, error) { return nil, bad }); !errors.Is(err, bad) {
		t.Errorf("Run with a failing load: %v", err)
	}

	// A slow load that ends after the cancel, within the drain: waited for.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	finished := false
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ln, nil, 5*time.Second, func(context.Context) (*Server, error) {
			<-release
			finished = true
			return nil, bad
		})
	}()
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while the load was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; !errors.Is(err, bad) {
		t.Errorf("Run: %v, want the load's error", err)
	}
	if !finished {
		t.Error("the load had not finished when Run returned")
	}

	// A load that honours its context ends Run at once, with no error.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		done <- Run(ctx, ln, nil, time.Minute, func(ctx context.Context) (*Server, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after a cancelled load: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the load stopped")
	}

	// A load that ignores its context is abandoned after the drain timeout.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	stuck := make(chan struct{})
	defer close(stuck)
	go func() {
		done <- Run(ctx, ln, nil, 100*time.Millisecond, func(context.Context) (*Server, error) {
			<-stuck
			return nil, bad
		})
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrLoadAbandoned) {
			t.Errorf("Run with a stuck load: %v, want ErrLoadAbandoned", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run waited for a stuck load past the drain timeout")
	}
}
