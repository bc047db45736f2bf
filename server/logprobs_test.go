package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"gotok"
)

// Chat log-probabilities through the SDK: one entry per token, the
// engine's own numbers, the greedy token the likeliest, streamed as not.
func TestChatLogprobs(t *testing.T) {
	m := loadModel(t, storiesPath(t), 512)
	_, ts, _ := testServer(t, m, Options{})
	c := client(ts)
	params := openai.ChatCompletionNewParams{
		Model:       "stories260K",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		MaxTokens:   openai.Int(10),
		Temperature: openai.Float(0),
		Logprobs:    openai.Bool(true),
		TopLogprobs: openai.Int(3),
	}
	got, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	lps := got.Choices[0].Logprobs.Content
	if int64(len(lps)) != got.Usage.CompletionTokens || len(lps) == 0 {
		t.Fatalf("%d logprob entries for %d tokens", len(lps), got.Usage.CompletionTokens)
	}
	var text []byte
	for i, e := range lps {
		if e.Logprob > 0 || len(e.TopLogprobs) != 3 {
			t.Fatalf("entry %d: logprob %v, %d alternatives", i, e.Logprob, len(e.TopLogprobs))
		}
		for k := 1; k < 3; k++ {
			if e.TopLogprobs[k].Logprob > e.TopLogprobs[k-1].Logprob {
				t.Errorf("entry %d: alternatives out of order", i)
			}
		}
		if e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob {
			t.Errorf("entry %d: greedy token %q (%v) is not the likeliest %q (%v)", i, e.Token, e.Logprob, e.TopLogprobs[0].Token, e.TopLogprobs[0].Logprob)
		}
		for _, b := range e.Bytes {
			text = append(text, byte(b))
		}
	}
	if string(text) != got.Choices[0].Message.Content {
		t.Errorf("the tokens' bytes %q are not the reply %q", text, got.Choices[0].Message.Content)
	}

	// The engine, asked directly for the same prompt, gives the same numbers.
	prompt := got.Usage.PromptTokens
	var engine []float32
	tokens := tokenizeChat(t, ts, `[{"role":"user","content":"Once upon a time"}]`)
	if int64(len(tokens)) != prompt {
		t.Fatalf("tokenize gives %d tokens, the reply's usage %d", len(tokens), prompt)
	}
	if _, err := m.GenerateTokens(context.Background(), tokens, gotok.GenerateOptions{MaxTokens: 10, Logprobs: true, Stop: []string{"<|im_end|>", "<|im_start|>"}},
		func(tk gotok.Token) error {
			if tk.ID >= 0 {
				engine = append(engine, tk.Logprob)
			}
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	// To float32 rounding: a later request reuses the first one's cached
	// prompt, and its last prompt token's attention then sums its
	// positions in other tiles than the prompt's pass did.
	const rounding = 1e-5
	for i := range min(len(engine), len(lps)) {
		if math.Abs(lps[i].Logprob-float64(engine[i])) > rounding {
			t.Errorf("token %d: served logprob %v, engine %v", i, lps[i].Logprob, engine[i])
		}
	}

	// Streamed, the same entries arrive chunk by chunk.
	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	var streamed []openai.ChatCompletionTokenLogprob
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			streamed = append(streamed, ch.Choices[0].Logprobs.Content...)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(streamed) != len(lps) {
		t.Fatalf("streamed %d entries, want %d", len(streamed), len(lps))
	}
	for i := range lps {
		if streamed[i].Token != lps[i].Token || math.Abs(streamed[i].Logprob-lps[i].Logprob) > rounding || len(streamed[i].TopLogprobs) != 3 {
			t.Errorf("streamed entry %d: %+v, want %+v", i, streamed[i], lps[i])
		}
	}
}

// tokenizeChat is /tokenize of a conversation.
func tokenizeChat(t *testing.T, ts *httptest.Server, messages string) []int32 {
	t.Helper()
	resp := post(t, ts, "/tokenize", `{"messages":`+messages+`}`)
	var got tokenizeResponse
	if err := json.Unmarshal([]byte(readBody(t, resp)), &got); err != nil {
		t.Fatal(err)
	}
	return got.Tokens
}

func TestCompletionLogprobs(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	resp := post(t, ts, "/v1/completions", `{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"logprobs":2}`)
	body := readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var got struct {
		Choices []struct {
			Text     string
			Logprobs completionLogprobs
		}
		Usage usage
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	lp := got.Choices[0].Logprobs
	n := got.Usage.CompletionTokens
	if len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
		t.Fatalf("logprobs %+v for %d tokens", lp, n)
	}
	if strings.Join(lp.Tokens, "") != got.Choices[0].Text {
		t.Errorf("tokens %q do not spell %q", lp.Tokens, got.Choices[0].Text)
	}
	for i := range n {
		if *lp.TokenLogprobs[i] > 0 || len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 2 {
			t.Errorf("token %d: %v %v", i, *lp.TokenLogprobs[i], lp.TopLogprobs[i])
		}
		if best, ok := lp.TopLogprobs[i][lp.Tokens[i]]; !ok || best != *lp.TokenLogprobs[i] {
			t.Errorf("token %d: greedy %q not the likeliest in %v", i, lp.Tokens[i], lp.TopLogprobs[i])
		}
		if i > 0 && lp.TextOffset[i] != lp.TextOffset[i-1]+len(lp.Tokens[i-1]) {
			t.Errorf("text offsets %v", lp.TextOffset)
		}
	}
}

// response_format json_schema: the reply parses and validates, through the
// SDK, streamed and not; json_object gives an object.
func TestResponseFormat(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	c := client(ts)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "maxLength": 12},
			"age":  map[string]any{"type": "integer"},
			"pets": map[string]any{"type": "array", "items": map[string]any{"enum": []string{"cat", "dog"}}, "maxItems": 3},
		},
		"required":             []string{"name", "age", "pets"},
		"additionalProperties": false,
	}
	params := openai.ChatCompletionNewParams{
		Model:       "stories260K",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe Lily as JSON.")},
		MaxTokens:   openai.Int(300),
		Temperature: openai.Float(0.7),
		Seed:        openai.Int(3),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema, Strict: openai.Bool(true)}}},
	}
	check := func(what, content, finish string) {
		t.Helper()
		if finish != "stop" {
			t.Fatalf("%s: finish %q, content %q", what, finish, content)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(content), &v); err != nil {
			t.Fatalf("%s: %q does not parse: %v", what, content, err)
		}
		name, ok1 := v["name"].(string)
		age, ok2 := v["age"].(float64)
		pets, ok3 := v["pets"].([]any)
		if !ok1 || !ok2 || !ok3 || len(v) != 3 || len([]rune(name)) > 12 || age != math.Trunc(age) || len(pets) > 3 {
			t.Errorf("%s: %q does not validate", what, content)
		}
		for _, p := range pets {
			if p != "cat" && p != "dog" {
				t.Errorf("%s: pet %v", what, p)
			}
		}
	}
	got, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	check("json_schema", got.Choices[0].Message.Content, string(got.Choices[0].FinishReason))

	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	check("json_schema streamed", acc.Choices[0].Message.Content, string(acc.Choices[0].FinishReason))
	if acc.Choices[0].Message.Content != got.Choices[0].Message.Content {
		t.Errorf("streamed %q, not streamed %q", acc.Choices[0].Message.Content, got.Choices[0].Message.Content)
	}

	params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	params.MaxTokens = openai.Int(200)
	got, err = c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	content := got.Choices[0].Message.Content
	if got.Choices[0].FinishReason == "stop" {
		var v map[string]any
		if err := json.Unmarshal([]byte(content), &v); err != nil {
			t.Errorf("json_object: %q does not parse: %v", content, err)
		}
	} else if !strings.HasPrefix(strings.TrimLeft(content, " \n\t"), "{") {
		t.Errorf("json_object cut at the limit does not start an object: %q", content)
	} else {
		t.Logf("json_object reply cut at max_tokens: %q", content)
	}
}

// text_offset counts the pieces of the tokens before, even when the
// engine holds text back: here "e" waits to see whether "!" follows
// (the stop string "e!"), and goes out with the next token.
func TestCompletionTextOffsetHeldBack(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	for _, stream := range []bool{false, true} {
		body := `{"prompt":"Once upon","max_tokens":4,"temperature":0,"logprobs":0,"stop":["e!"],"stream":` + strconv.FormatBool(stream) + `}`
		resp := post(t, ts, "/v1/completions", body)
		text := readBody(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, text)
		}
		var tokens []string
		var offsets []int
		chunks := []string{text}
		if stream {
			chunks = nil
			for line := range strings.Lines(text) {
				if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && d != "[DONE]" {
					chunks = append(chunks, d)
				}
			}
		}
		for _, c := range chunks {
			var got struct {
				Choices []struct{ Logprobs *completionLogprobs }
			}
			if err := json.Unmarshal([]byte(c), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Choices) > 0 && got.Choices[0].Logprobs != nil {
				tokens = append(tokens, got.Choices[0].Logprobs.Tokens...)
				offsets = append(offsets, got.Choices[0].Logprobs.TextOffset...)
			}
		}
		if len(tokens) != 4 {
			t.Fatalf("stream %v: tokens %q", stream, tokens)
		}
		want := []int{0}
		for _, tk := range tokens[:len(tokens)-1] {
			want = append(want, want[len(want)-1]+len(tk))
		}
		if !slices.Equal(offsets, want) {
			t.Errorf("stream %v: tokens %q, text_offset %v, want %v", stream, tokens, offsets, want)
		}
	}
}

// Log-probabilities JSON cannot write (-Inf, NaN) go out as vLLM's
// -9999, in both shapes.
func TestNonFiniteLogprobs(t *testing.T) {
	m := loadModel(t, storiesPath(t), 64)
	tok := m.Tokenizer()
	inf, nan := float32(math.Inf(-1)), float32(math.NaN())
	tk := gotok.Token{ID: 5, Logprob: inf, Top: []gotok.TokenLogprob{{ID: 6, Text: tok.Piece(6), Logprob: nan}}}
	c := &completionLogprobs{}
	c.add(tok, tk, 0)
	for _, v := range []any{chatLogprob(tok, tk), c} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if strings.Count(string(data), "-9999") != 2 {
			t.Errorf("%s: want -9999 twice", data)
		}
	}
}

// A stream event JSON cannot write is the server's error (500), not the
// client's leaving (499).
func TestStreamEncodeError(t *testing.T) {
	s, _, _ := storiesServer(t, Options{})
	ev := startSSE(httptest.NewRecorder())
	prompt := s.model.Encode("Once", gotok.GenerateOptions{})
	_, err := s.run(context.Background(), job{prompt: prompt, opts: gotok.GenerateOptions{MaxTokens: 2}}, nil, func(gotok.Token) error {
		return ev.send(math.Inf(1))
	})
	var e *apiError
	if errors.As(err, &e) || err == nil || !strings.Contains(err.Error(), "encode response") {
		t.Errorf("run: %v (%#v), want an encode error (500)", err, e)
	}
}

// Without logprobs asked for, every choice has "logprobs": null.
func TestLogprobsNull(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"Once","max_tokens":2}`},
		{"/v1/completions", `{"prompt":"Once","max_tokens":2,"stream":true}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"stream":true}`},
	} {
		resp := post(t, ts, c.path, c.body)
		body := readBody(t, resp)
		if resp.StatusCode != 200 || !strings.Contains(body, `"logprobs":null`) || strings.Contains(body, `"logprobs":{`) {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
		}
	}
}

// echo with logprobs: the prompt's entries come first, the first token's
// null, the others Model.PromptLogprobs's numbers, then the generated
// tokens'; streamed, the echo chunk carries the prompt's.
func TestEchoLogprobs(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	m2 := loadModel(t, storiesPath(t), 512)
	prompt := m2.PromptTokens("Once upon a time", gotok.GenerateOptions{})
	scored, err := m2.PromptLogprobs(context.Background(), prompt, 2)
	if err != nil {
		t.Fatal(err)
	}
	tok := m2.Tokenizer()
	for _, stream := range []bool{false, true} {
		resp := post(t, ts, "/v1/completions", `{"prompt":"Once upon a time","max_tokens":3,"temperature":0,"echo":true,"logprobs":2,"stream":`+strconv.FormatBool(stream)+`}`)
		body := readBody(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		chunks := []string{body}
		if stream {
			chunks = nil
			for line := range strings.Lines(body) {
				if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && d != "[DONE]" {
					chunks = append(chunks, d)
				}
			}
		}
		var lp completionLogprobs
		text := ""
		for _, c := range chunks {
			var got struct {
				Choices []struct {
					Text     string
					Logprobs *completionLogprobs
				}
			}
			if err := json.Unmarshal([]byte(c), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Choices) == 0 {
				continue
			}
			text += got.Choices[0].Text
			if l := got.Choices[0].Logprobs; l != nil {
				lp.Tokens = append(lp.Tokens, l.Tokens...)
				lp.TokenLogprobs = append(lp.TokenLogprobs, l.TokenLogprobs...)
				lp.TopLogprobs = append(lp.TopLogprobs, l.TopLogprobs...)
				lp.TextOffset = append(lp.TextOffset, l.TextOffset...)
			}
		}
		if !strings.HasPrefix(text, "Once upon a time") {
			t.Errorf("stream %v: text %q does not echo the prompt", stream, text)
		}
		if n := len(prompt) + 3; len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
			t.Fatalf("stream %v: %d entries, want %d: %+v", stream, len(lp.Tokens), n, lp)
		}
		if lp.Tokens[0] != tok.Piece(prompt[0]) || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil || lp.TextOffset[0] != 0 {
			t.Errorf("stream %v: first entry %q %v %v %d, want the first token with nulls", stream, lp.Tokens[0], lp.TokenLogprobs[0], lp.TopLogprobs[0], lp.TextOffset[0])
		}
		offset := len(tok.Piece(prompt[0]))
		for i, sc := range scored {
			e := i + 1
			if lp.Tokens[e] != sc.Text || lp.TokenLogprobs[e] == nil || *lp.TokenLogprobs[e] != sc.Logprob || lp.TextOffset[e] != offset {
				t.Errorf("stream %v: entry %d: %q %v at %d, want %q %v at %d", stream, e, lp.Tokens[e], lp.TokenLogprobs[e], lp.TextOffset[e], sc.Text, sc.Logprob, offset)
			}
			if len(lp.TopLogprobs[e]) != len(sc.Top) {
				t.Errorf("stream %v: entry %d: top %v, want %v", stream, e, lp.TopLogprobs[e], sc.Top)
			}
			for _, alt := range sc.Top {
				if got, ok := lp.TopLogprobs[e][alt.Text]; !ok || got != alt.Logprob {
					t.Errorf("stream %v: entry %d: top %v lacks %q %v", stream, e, lp.TopLogprobs[e], alt.Text, alt.Logprob)
				}
			}
			offset += len(sc.Text)
		}
		if g := len(prompt); lp.TextOffset[g] != len("Once upon a time") || lp.TokenLogprobs[g] == nil {
			t.Errorf("stream %v: first generated entry at %d (%v), want at the echo's end", stream, lp.TextOffset[g], lp.TokenLogprobs[g])
		}
	}
}
