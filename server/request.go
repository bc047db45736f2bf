package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"gotok/chat"
)

// samplingRequest holds the generation parameters chat and completion
// requests share. Pointers tell "absent" from zero.
type samplingRequest struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MinP                *float64        `json:"min_p"`
	Seed                *int64          `json:"seed"`
	Stop                stopList        `json:"stop"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	N                   *int            `json:"n"`
	ResponseFormat      *responseFormat `json:"response_format"`
	LogitBias           map[string]any  `json:"logit_bias"`

	// vLLM's extensions.
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	IgnoreEOS         bool     `json:"ignore_eos"`
	MinTokens         *int     `json:"min_tokens"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// responseFormat is {"type": "text" | "json_object" | "json_schema",
// "json_schema": {"name", "schema", "strict"}}.
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema"`
}

// stopList is "stop": a string or a list of them.
type stopList []string

func (s *stopList) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return errors.New("stop must be a string or a list of strings")
	}
	*s = list
	return nil
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	samplingRequest
	Messages    []chatMessage `json:"messages"`
	Logprobs    *bool         `json:"logprobs"`
	TopLogprobs *int          `json:"top_logprobs"`
	Tools       []any         `json:"tools"`
	ToolChoice  any           `json:"tool_choice"`
}

type chatMessage struct {
	Role    string      `json:"role"`
	Content chatContent `json:"content"`
}

// chatContent is a message's content: a string, or a list of parts of
// which gotok takes the text ones.
type chatContent struct {
	text string
	err  error
}

func (c *chatContent) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(data, &c.text); err == nil {
		return nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return errors.New("content must be a string or a list of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			c.err = fmt.Errorf("content part of type %q is not supported (only text)", p.Type)
			return nil
		}
		b.WriteString(*p.Text)
	}
	c.text = b.String()
	return nil
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	samplingRequest
	Prompt   completionPrompt `json:"prompt"`
	Echo     bool             `json:"echo"`
	Logprobs *int             `json:"logprobs"`
	Suffix   *string          `json:"suffix"`
	BestOf   *int             `json:"best_of"`
}

// completionPrompt is "prompt": a string, a list of token ids, or a list
// of one of either (a batch of one).
type completionPrompt struct {
	text   string
	tokens []int64
	isIDs  bool
	set    bool
}

func (p *completionPrompt) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		return nil
	}
	p.set = true
	if err := json.Unmarshal(data, &p.text); err == nil {
		return nil
	}
	if err := json.Unmarshal(data, &p.tokens); err == nil {
		p.isIDs = true
		return nil
	}
	var texts []string
	if err := json.Unmarshal(data, &texts); err == nil {
		if len(texts) != 1 {
			return fmt.Errorf("prompt: a batch of %d prompts is not supported (send one)", len(texts))
		}
		p.text = texts[0]
		return nil
	}
	var batches [][]int64
	if err := json.Unmarshal(data, &batches); err == nil {
		if len(batches) != 1 {
			return fmt.Errorf("prompt: a batch of %d prompts is not supported (send one)", len(batches))
		}
		p.tokens, p.isIDs = batches[0], true
		return nil
	}
	return errors.New("prompt must be a string, a list of token ids, or a list of one of either")
}

// decodeJSON reads one JSON value into v, refusing trailing data. Every
// failure is a 400.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return invalid("", "request body is empty: want a JSON object")
		}
		return invalid("", "request body is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "request body has data after the JSON object")
	}
	return nil
}

// DecodeChatRequest reads and checks a chat completion request body: what
// it returns is safe to generate from (within the context still to be
// checked against the prompt's length).
func decodeChatRequest(r io.Reader) (*chatRequest, error) {
	var req chatRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "messages must be a non-empty list")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		case "developer": // OpenAI's newer name for system
		case "":
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "messages[%d] has no role", i)
		default:
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "messages[%d] has role %q: want system, user or assistant", i, m.Role)
		}
		if m.Content.err != nil {
			return nil, invalid(fmt.Sprintf("messages[%d].content", i), "messages[%d]: %v", i, m.Content.err)
		}
	}
	if len(req.Tools) > 0 {
		return nil, notSupported("tools", "tool calling (tools)")
	}
	if req.ToolChoice != nil && req.ToolChoice != "none" {
		return nil, notSupported("tool_choice", "tool calling (tool_choice)")
	}
	if req.TopLogprobs != nil && (*req.TopLogprobs < 0 || *req.TopLogprobs > 20) {
		return nil, invalid("top_logprobs", "top_logprobs is %d: want 0 to 20", *req.TopLogprobs)
	}
	if req.TopLogprobs != nil && *req.TopLogprobs > 0 && (req.Logprobs == nil || !*req.Logprobs) {
		return nil, invalid("top_logprobs", "top_logprobs needs logprobs: true")
	}
	if err := req.samplingRequest.check(); err != nil {
		return nil, err
	}
	return &req, nil
}

func decodeCompletionRequest(r io.Reader) (*completionRequest, error) {
	var req completionRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if !req.Prompt.set {
		return nil, invalid("prompt", "prompt is required")
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > 5) {
		return nil, invalid("logprobs", "logprobs is %d: want 0 to 5", *req.Logprobs)
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, notSupported("suffix", "suffix (fill-in-the-middle)")
	}
	if req.BestOf != nil && *req.BestOf != 1 {
		return nil, invalid("best_of", "best_of is %d: only 1 is supported", *req.BestOf)
	}
	if err := req.samplingRequest.check(); err != nil {
		return nil, err
	}
	return &req, nil
}

// check validates the ranges OpenAI documents (and gotok's own limits).
func (s *samplingRequest) check() error {
	if s.N != nil && *s.N != 1 {
		return invalid("n", "n is %d: only n = 1 is supported", *s.N)
	}
	for _, p := range []struct {
		name     string
		v        *int
		min, max int
	}{
		{"max_tokens", s.MaxTokens, 1, math.MaxInt32},
		{"max_completion_tokens", s.MaxCompletionTokens, 1, math.MaxInt32},
		{"top_k", s.TopK, -1, math.MaxInt32}, // -1 and 0: off (vLLM's -1)
	} {
		if p.v != nil && (*p.v < p.min || *p.v > p.max) {
			return invalid(p.name, "%s is %d: want %d to %d", p.name, *p.v, p.min, p.max)
		}
	}
	for _, p := range []struct {
		name     string
		v        *float64
		min, max float64
	}{
		{"temperature", s.Temperature, 0, 2},
		{"min_p", s.MinP, 0, 1},
		{"presence_penalty", s.PresencePenalty, -2, 2},
		{"frequency_penalty", s.FrequencyPenalty, -2, 2},
	} {
		if p.v != nil && !(*p.v >= p.min && *p.v <= p.max) { // NaN fails too
			return invalid(p.name, "%s is %v: want %v to %v", p.name, *p.v, p.min, p.max)
		}
	}
	if r := s.RepetitionPenalty; r != nil && !(*r > 0 && *r <= math.MaxFloat32) {
		return invalid("repetition_penalty", "repetition_penalty is %v: want a finite number above 0 (1: off)", *r)
	}
	if m := s.MinTokens; m != nil && (*m < 0 || s.maxTokens() > 0 && *m > s.maxTokens()) {
		return invalid("min_tokens", "min_tokens is %d: want 0 to max_tokens (%d)", *m, s.maxTokens())
	}
	// top_p 0 would keep no token: vLLM refuses it, where gotok's sampler
	// would take it for "off".
	if s.TopP != nil && !(*s.TopP > 0 && *s.TopP <= 1) {
		return invalid("top_p", "top_p must be in (0, 1], got %v", *s.TopP)
	}
	if len(s.Stop) > 4 {
		return invalid("stop", "stop has %d strings: at most 4", len(s.Stop))
	}
	if len(s.LogitBias) > 0 {
		return notSupported("logit_bias", "logit_bias")
	}
	if rf := s.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text", "json_object", "json_schema":
		default:
			return invalid("response_format.type", "response_format type %q: want text, json_object or json_schema", rf.Type)
		}
		if rf.Type == "json_schema" && len(rf.JSONSchema) == 0 {
			return invalid("response_format.json_schema", "response_format json_schema needs a json_schema object")
		}
	}
	return nil
}

// maxTokens is the request's completion limit (0: until the context is
// full); max_completion_tokens wins over the older max_tokens.
func (s *samplingRequest) maxTokens() int {
	switch {
	case s.MaxCompletionTokens != nil:
		return *s.MaxCompletionTokens
	case s.MaxTokens != nil:
		return *s.MaxTokens
	}
	return 0
}

// chatMessages converts the messages for the template; "developer" is
// OpenAI's newer name for a system message.
func (req *chatRequest) chatMessages() []chat.Message {
	msgs := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		msgs[i] = chat.Message{Role: role, Content: m.Content.text}
	}
	return msgs
}
