package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Every error path, over raw HTTP: the status, and OpenAI's error shape
// with the type, param and code a client branches on.
func TestErrorPaths(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{MaxBodyBytes: 64 << 10})
	chat := func(extra string) string {
		return `{"messages":[{"role":"user","content":"Hi"}]` + extra + `}`
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		param, code              string
	}{
		{"bad json", "POST", "/v1/chat/completions", `{"messages":`, 400, "", ""},
		{"empty body", "POST", "/v1/chat/completions", ``, 400, "", ""},
		{"not an object", "POST", "/v1/chat/completions", `[1,2]`, 400, "", ""},
		{"trailing data", "POST", "/v1/chat/completions", chat("") + `{}`, 400, "", ""},
		{"no messages", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", ""},
		{"no role", "POST", "/v1/chat/completions", `{"messages":[{"content":"x"}]}`, 400, "messages[0].role", ""},
		{"tool role", "POST", "/v1/chat/completions", `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages[0].role", ""},
		{"image part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content", ""},
		{"content number", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "", ""},
		{"huge max_tokens", "POST", "/v1/chat/completions", chat(`,"max_tokens":1e30`), 400, "", ""},
		{"big int max_tokens", "POST", "/v1/chat/completions", chat(`,"max_tokens":99999999999999999999`), 400, "", ""},
		{"zero max_tokens", "POST", "/v1/chat/completions", chat(`,"max_tokens":0`), 400, "max_tokens", ""},
		{"negative max_completion_tokens", "POST", "/v1/chat/completions", chat(`,"max_completion_tokens":-5`), 400, "max_completion_tokens", ""},
		{"temperature", "POST", "/v1/chat/completions", chat(`,"temperature":7`), 400, "temperature", ""},
		{"temperature string", "POST", "/v1/chat/completions", chat(`,"temperature":"hot"`), 400, "", ""},
		{"top_p", "POST", "/v1/chat/completions", chat(`,"top_p":1.5`), 400, "top_p", ""},
		{"repetition_penalty 0", "POST", "/v1/completions", `{"prompt":"x","repetition_penalty":0}`, 400, "repetition_penalty", ""},
		{"min_tokens negative", "POST", "/v1/completions", `{"prompt":"x","min_tokens":-1}`, 400, "min_tokens", ""},
		{"min_tokens above max_tokens", "POST", "/v1/completions", `{"prompt":"x","min_tokens":5,"max_tokens":4}`, 400, "min_tokens", ""},
		{"top_p 0", "POST", "/v1/completions", `{"prompt":"x","top_p":0}`, 400, "top_p", ""},
		{"top_k", "POST", "/v1/chat/completions", chat(`,"top_k":-2`), 400, "top_k", ""},
		{"min_p", "POST", "/v1/chat/completions", chat(`,"min_p":-0.1`), 400, "min_p", ""},
		{"presence", "POST", "/v1/chat/completions", chat(`,"presence_penalty":3`), 400, "presence_penalty", ""},
		{"frequency", "POST", "/v1/chat/completions", chat(`,"frequency_penalty":-3`), 400, "frequency_penalty", ""},
		{"n", "POST", "/v1/chat/completions", chat(`,"n":2`), 400, "n", ""},
		{"stop number", "POST", "/v1/chat/completions", chat(`,"stop":5`), 400, "", ""},
		{"five stops", "POST", "/v1/chat/completions", chat(`,"stop":["a","b","c","d","e"]`), 400, "stop", ""},
		{"seed float", "POST", "/v1/chat/completions", chat(`,"seed":1.5`), 400, "", ""},
		{"tools", "POST", "/v1/chat/completions", chat(`,"tools":[{"type":"function","function":{"name":"f"}}]`), 400, "tools", "unsupported_parameter"},
		{"logit_bias", "POST", "/v1/chat/completions", chat(`,"logit_bias":{"1":5}`), 400, "logit_bias", "unsupported_parameter"},
		{"top_logprobs alone", "POST", "/v1/chat/completions", chat(`,"top_logprobs":3`), 400, "top_logprobs", ""},
		{"top_logprobs range", "POST", "/v1/chat/completions", chat(`,"logprobs":true,"top_logprobs":30`), 400, "top_logprobs", ""},
		{"json_schema missing", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema"}`), 400, "response_format.json_schema", ""},
		{"json_schema no schema", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`), 400, "response_format.json_schema.schema", ""},
		{"json_schema not object", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":[1]}`), 400, "response_format.json_schema", ""},
		{"json_schema pattern", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"a+"}}}`), 400, "response_format.json_schema.schema", ""},
		{"json_schema bad", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"nothing"}}}`), 400, "response_format.json_schema.schema", ""},
		{"format type", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"xml"}`), 400, "response_format.type", ""},
		{"wrong model", "POST", "/v1/chat/completions", chat(`,"model":"gpt-4o"`), 404, "", "model_not_found"},
		{"context", "POST", "/v1/chat/completions", chat(`,"max_tokens":100000`), 400, "messages", "context_length_exceeded"},
		{"too large", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 70<<10) + `"}]}`, 413, "", ""},
		{"get chat", "GET", "/v1/chat/completions", ``, 405, "", ""},
		{"post models", "POST", "/v1/models", `{}`, 405, "", ""},
		{"unknown path", "GET", "/v2/nothing", ``, 404, "", ""},
		{"no prompt", "POST", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", ""},
		{"prompt object", "POST", "/v1/completions", `{"prompt":{"a":1}}`, 400, "", ""},
		{"prompt batch", "POST", "/v1/completions", `{"prompt":["a","b"]}`, 400, "", ""},
		{"prompt empty ids", "POST", "/v1/completions", `{"prompt":[]}`, 400, "prompt", ""},
		{"prompt bad id", "POST", "/v1/completions", `{"prompt":[1,99999]}`, 400, "prompt", ""},
		{"prompt negative id", "POST", "/v1/completions", `{"prompt":[-1]}`, 400, "prompt", ""},
		{"suffix", "POST", "/v1/completions", `{"prompt":"a","suffix":"b"}`, 400, "suffix", "unsupported_parameter"},
		{"completion logprobs range", "POST", "/v1/completions", `{"prompt":"a","logprobs":6}`, 400, "logprobs", ""},
		{"best_of", "POST", "/v1/completions", `{"prompt":"a","best_of":3}`, 400, "best_of", ""},
		{"completion context", "POST", "/v1/completions", `{"prompt":"a","max_tokens":600}`, 400, "prompt", "context_length_exceeded"},
		{"tokenize nothing", "POST", "/tokenize", `{}`, 400, "prompt", ""},
		{"tokenize both", "POST", "/tokenize", `{"prompt":"a","messages":[{"role":"user","content":"b"}]}`, 400, "prompt", ""},
		{"detokenize bad id", "POST", "/detokenize", `{"tokens":[100000]}`, 400, "tokens", ""},
		{"detokenize strings", "POST", "/detokenize", `{"tokens":["a"]}`, 400, "", ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d: %s", tt.name, resp.StatusCode, tt.status, body)
			continue
		}
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%s: not an OpenAI error: %s", tt.name, body)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tt.name, ct)
		}
		if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
			t.Errorf("%s: param %v, want %q (%s)", tt.name, e.Error.Param, tt.param, e.Error.Message)
		}
		if tt.code != "" && (e.Error.Code == nil || *e.Error.Code != tt.code) {
			t.Errorf("%s: code %v, want %q (%s)", tt.name, e.Error.Code, tt.code, e.Error.Message)
		}
	}
}

// Bytes that are not UTF-8 in a message are not an error, nor a crash.
func TestInvalidUTF8(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	resp := post(t, ts, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\xc3\"}],\"max_tokens\":3}")
	if body := readBody(t, resp); resp.StatusCode != 200 {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	resp = post(t, ts, "/v1/completions", "{\"prompt\":\"\xf0\x9f\",\"max_tokens\":3}")
	if body := readBody(t, resp); resp.StatusCode != 200 {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
}

func TestAPIKey(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{APIKey: "s3cret"})
	do := func(path, auth string) int {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		return resp.StatusCode
	}
	for _, tt := range []struct {
		path, auth string
		want       int
	}{
		{"/v1/models", "", 401},
		{"/v1/models", "Bearer wrong", 401},
		{"/v1/models", "Bearer s3cret2", 401},
		{"/v1/models", "s3cret", 401},
		{"/v1/models", "Bearer s3cret", 200},
		{"/health", "", 200},
		{"/metrics", "", 200},
	} {
		if got := do(tt.path, tt.auth); got != tt.want {
			t.Errorf("%s with %q: %d, want %d", tt.path, tt.auth, got, tt.want)
		}
	}
	// The SDK sends the key as a Bearer token.
	c := client(ts)
	if _, err := c.Models.List(t.Context()); err == nil {
		t.Error("wrong key accepted through the SDK")
	}
	c = client(ts, optionAPIKey("s3cret"))
	if _, err := c.Models.List(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestCORS(t *testing.T) {
	_, off, _ := storiesServer(t, Options{})
	_, on, _ := storiesServer(t, Options{CORSOrigins: []string{"https://app.example"}})
	preflight := func(ts string, origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", ts+"/v1/chat/completions", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := preflight(off.URL, "https://app.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS answered while off")
	}
	if resp := preflight(on.URL, "https://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS allowed an origin not listed")
	}
	if resp := preflight(on.URL, "https://app.example"); resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// A schema made to be costly (a chain of anyOf through $defs, near the
// body limit) is refused with a 400 quickly, before the request waits for
// the engine.
func TestHostileSchemaRefused(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	var b strings.Builder
	b.WriteString(`{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"#/$defs/a0","$defs":{`)
	i := 0
	for ; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, `"a%d":{"anyOf":[{"$ref":"#/$defs/a%d"},{"type":"null"}]},`, i, i+1)
	}
	fmt.Fprintf(&b, `"a%d":{"type":"null"}}}}}}`, i)
	t0 := time.Now()
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != 400 || !strings.Contains(body, "response_format.json_schema.schema") {
		t.Errorf("status %d: %.300s", resp.StatusCode, body)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("refused after %v", d)
	}
}
