package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gotok"
)

// job is one generation a handler asks for.
type job struct {
	start  time.Time // the request's arrival, for time to first token
	prompt []int32
	opts   gotok.GenerateOptions
}

// checkContext refuses a request whose prompt and completion limit do not
// fit the context (0: until full, which needs room for one token).
func (s *Server) checkContext(param string, prompt, maxTokens int) error {
	n := s.model.ContextLen()
	if prompt+max(maxTokens, 1) > n {
		return withCode(invalid(param,
			"this model's context is %d tokens, but %d were requested (%d in the prompt, %d in the completion): shorten the prompt or lower max_tokens",
			n, prompt+max(maxTokens, 1), prompt, max(maxTokens, 1)), "context_length_exceeded")
	}
	return nil
}

// admit takes a slot or explains why not: 503 with Retry-After when the
// queue is full.
func (s *Server) admit(ctx context.Context, w http.ResponseWriter) (func(), error) {
	release, err := s.sched.admit(ctx)
	if errors.Is(err, errQueueFull) {
		return nil, s.queueFull(w)
	}
	if err != nil {
		return nil, requestEnded(err)
	}
	return release, nil
}

// requestEnded is the error for a request whose context ended: the client
// left (nothing to answer, but the log says so) or the timeout struck.
func requestEnded(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &apiError{Status: http.StatusGatewayTimeout, Type: typeServer, Message: "request timed out"}
	}
	return &apiError{Status: 499, Type: typeInvalidRequest, Message: "client closed the request"}
}

// run generates j on the engine, passing each token to emit (its text may
// be empty: part of a character, or held back by a stop string), and
// records the metrics. With a prompt callback it first scores the prompt
// (Model.PromptLogprobs, j.opts.TopLogprobs alternatives) in the same turn
// on the engine and passes it the result.
func (s *Server) run(ctx context.Context, j job, prompt func(scored []gotok.Token) error, emit func(t gotok.Token) error) (gotok.Stats, error) {
	info := infoOf(ctx)
	info.promptTokens = len(j.prompt)
	var st gotok.Stats
	var genErr, emitErr error
	first := true
	err := s.sched.run(ctx, func() {
		s.kvUsed.Store(int64(len(j.prompt)))
		// The cache the engine keeps for prefix reuse is free to be
		// overwritten: vLLM counts cached prefix blocks as free, and an
		// endpoint picker must not see an idle server as full.
		defer s.kvUsed.Store(0)
		if prompt != nil {
			scored, err := s.model.PromptLogprobs(ctx, j.prompt, j.opts.TopLogprobs)
			if err != nil {
				genErr = err
				return
			}
			if emitErr = prompt(scored); emitErr != nil {
				genErr = emitErr
				return
			}
		}
		st, genErr = s.model.GenerateTokens(ctx, j.prompt, j.opts, func(t gotok.Token) error {
			if first {
				first = false
				info.ttft = time.Since(j.start)
				s.metrics.ttft.Observe(info.ttft.Seconds())
			}
			if t.ID >= 0 {
				s.kvUsed.Add(1)
			}
			emitErr = emit(t)
			return emitErr
		})
	})
	if err != nil {
		return st, requestEnded(err)
	}
	info.completionTokens = st.GeneratedTokens
	info.finish = finishReason(st.StopReason)
	s.metrics.promptTokens.Add(float64(st.PromptTokens - st.PromptReused))
	s.metrics.genTokens.Add(float64(st.GeneratedTokens))
	if r := st.DecodeTokensPerSecond(); r > 0 {
		s.metrics.tokensPerSec.Observe(r)
	}
	if genErr != nil {
		var encErr *encodeError
		if errors.As(emitErr, &encErr) {
			return st, encErr // a bug of the server's, not the client's leaving: 500
		}
		if emitErr != nil && errors.Is(genErr, emitErr) {
			// The response could not be written: the client is gone.
			return st, &apiError{Status: 499, Type: typeInvalidRequest, Message: "client stopped reading: " + emitErr.Error()}
		}
		if errors.Is(genErr, context.Canceled) || errors.Is(genErr, context.DeadlineExceeded) {
			return st, requestEnded(genErr)
		}
		var apiErr *apiError
		if errors.As(genErr, &apiErr) {
			return st, apiErr
		}
		return st, fmt.Errorf("generation failed: %w", genErr)
	}
	return st, nil
}

// finishReason is OpenAI's name for the engine's stop reason.
func finishReason(stop string) string {
	switch stop {
	case gotok.StopEOS, gotok.StopString, gotok.StopConstraint:
		return "stop"
	case gotok.StopMaxTokens, gotok.StopContext:
		return "length"
	case "":
		return ""
	}
	return stop
}

func usageOf(st gotok.Stats) *usage {
	return &usage{PromptTokens: st.PromptTokens, CompletionTokens: st.GeneratedTokens, TotalTokens: st.PromptTokens + st.GeneratedTokens}
}

// sse writes server-sent events, each under a write deadline so that a
// client that stops reading cannot hold the engine.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

const writeTimeout = 30 * time.Second

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// send writes v as an event. An *encodeError is v that JSON cannot
// write; any other error is the connection's.
func (e *sse) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return &encodeError{err}
	}
	return e.raw(data)
}

// encodeError is a response that could not be written as JSON.
type encodeError struct{ err error }

func (e *encodeError) Error() string { return "encode response: " + e.err.Error() }
func (e *encodeError) Unwrap() error { return e.err }

func (e *sse) raw(data []byte) error {
	e.rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // unsupported by some writers: then none
	if _, err := fmt.Fprintf(e.w, "data: %s\n\n", data); err != nil {
		return err
	}
	return e.rc.Flush()
}

// fail ends a stream with an error event: the status has gone out.
func (e *sse) fail(err error) {
	var apiErr *apiError
	if !errors.As(err, &apiErr) {
		apiErr = &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: err.Error()}
	}
	e.send(struct {
		Error *apiError `json:"error"`
	}{apiErr})
	e.done()
}

func (e *sse) done() { e.raw([]byte("[DONE]")) }
