package server

import (
	"strings"
	"testing"
)

// FuzzDecodeChatRequest feeds the chat decoder arbitrary bodies: it
// returns a request or an *apiError, never panics, and what it accepts is
// in range. `go test` runs the seeds; `go test -fuzz FuzzDecodeChatRequest
// ./server` explores.
func FuzzDecodeChatRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":1e400,"temperature":-0}`,
		`{"messages":[{"role":"user","content":"x"}],"stop":["a","b"],"seed":-9223372036854775808,"top_k":2147483647}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`,
		`{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":20,"n":1}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
		`{"messages":[{"role":"user","content":null}],"stop":null}`,
		`{"messages":[[[[[[[[[[]]]]]]]]]]}`,
		`{"messages":{}}`,
		``, `null`, `[]`, `{`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeChatRequest(strings.NewReader(string(body)))
		if err != nil {
			if _, ok := err.(*apiError); !ok {
				t.Fatalf("error %T %v is not an *apiError", err, err)
			}
			return
		}
		if len(req.Messages) == 0 {
			t.Fatal("accepted a request without messages")
		}
		if mt := req.maxTokens(); mt < 0 {
			t.Fatalf("accepted max tokens %d", mt)
		}
		if req.Temperature != nil && !(*req.Temperature >= 0 && *req.Temperature <= 2) {
			t.Fatalf("accepted temperature %v", *req.Temperature)
		}
		if req.N != nil && *req.N != 1 {
			t.Fatalf("accepted n %d", *req.N)
		}
		// What is accepted maps onto engine options or a clear refusal.
		if _, err := generateOptions(&req.samplingRequest, logprobRequest{want: req.Logprobs != nil && *req.Logprobs}, req.maxTokens(), 512); err != nil {
			if _, ok := err.(*apiError); !ok {
				t.Fatalf("options error %T %v is not an *apiError", err, err)
			}
		}
		req.chatMessages()
	})
}
