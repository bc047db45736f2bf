package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gotok"
	"gotok/internal/sharedtest"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/sample"
)

// storiesPath is shared/models/stories260K.gguf, or skips.
func storiesPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(sharedtest.Dir(t, "models/stories260K.gguf"), "models", "stories260K.gguf")
}

// loadModel loads path on the CPU with an f32 KV cache: the tests compare
// texts batched and alone exactly, and on the f16 cache a key or value
// now and then rounds to neighbouring float16 values on one path only.
func loadModel(t *testing.T, path string, ctxLen int) *gotok.Model {
	t.Helper()
	m, err := gotok.Load(path, gotok.Options{Device: "cpu", ContextLen: ctxLen, Threads: 1, KVType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// logBuffer collects the server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testServer serves m over loopback.
func testServer(t *testing.T, m *gotok.Model, o Options) (*Server, *httptest.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if o.ModelName == "" {
		o.ModelName = "stories260K"
	}
	s, err := New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts, logs
}

func storiesServer(t *testing.T, o Options) (*Server, *httptest.Server, *logBuffer) {
	return testServer(t, loadModel(t, storiesPath(t), 512), o)
}

func client(ts *httptest.Server, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(ts.URL + "/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
	}, opts...)...)
}

// tinyWithTemplate writes a generated tiny model whose metadata carries a
// Jinja chat template; its random weights rarely end a reply early.
func tinyWithTemplate(t *testing.T, template string) string {
	t.Helper()
	w, err := synth.Generate(synth.Options{Shape: synth.Presets["tiny"], Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if template != "" {
		w.Set("tokenizer.chat_template", template)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The engine's own greedy continuation is what the server must return.
func TestCompletionMatchesEngine(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	m2 := loadModel(t, storiesPath(t), 512)
	var want strings.Builder
	if _, err := m2.Generate(context.Background(), "Once upon a time", gotok.GenerateOptions{MaxTokens: 20, ParseSpecial: true},
		func(s string) error { want.WriteString(s); return nil }); err != nil {
		t.Fatal(err)
	}
	c := client(ts)
	ctx := context.Background()
	params := openai.CompletionNewParams{
		Model:       "stories260K",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens:   openai.Int(20),
		Temperature: openai.Float(0),
	}
	got, err := c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != want.String() {
		t.Errorf("completion %q, engine %q", got.Choices[0].Text, want.String())
	}
	if got.Choices[0].FinishReason != "length" || got.Usage.CompletionTokens != 20 || got.Usage.PromptTokens != 5 {
		t.Errorf("finish %q usage %+v", got.Choices[0].FinishReason, got.Usage)
	}

	// Streamed, the pieces add up to the same text.
	stream := c.Completions.NewStreaming(ctx, params)
	var streamed strings.Builder
	finish := ""
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			streamed.WriteString(ch.Choices[0].Text)
			if ch.Choices[0].FinishReason != "" {
				finish = string(ch.Choices[0].FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if streamed.String() != want.String() || finish != "length" {
		t.Errorf("streamed %q (finish %q), want %q", streamed.String(), finish, want.String())
	}

	// echo puts the prompt first; token ids are a prompt too.
	params.Echo = openai.Bool(true)
	params.Prompt = openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: tokenIDs(t, m2, "Once upon a time")}
	got, err = c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got.Choices[0].Text, want.String()) || !strings.Contains(got.Choices[0].Text, "Once upon a time") {
		t.Errorf("echo with token ids: %q", got.Choices[0].Text)
	}
}

func tokenIDs(t *testing.T, m *gotok.Model, text string) []int64 {
	var ids []int64
	for _, id := range m.Encode(text, gotok.GenerateOptions{}) {
		ids = append(ids, int64(id))
	}
	return ids
}

func TestChatSDK(t *testing.T) {
	_, ts, logs := storiesServer(t, Options{})
	c := client(ts)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: "stories260K",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You tell stories."),
			openai.UserMessage("Tell me about a cat."),
			openai.AssistantMessage("Once upon a time, there was a cat."),
			openai.UserMessage("What did the cat do?"),
		},
		MaxCompletionTokens: openai.Int(12),
		Temperature:         openai.Float(0.8),
		TopP:                openai.Float(0.9),
		Seed:                openai.Int(7),
		Stop:                openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"\n\n\n"}},
		PresencePenalty:     openai.Float(0.5),
		FrequencyPenalty:    openai.Float(0.5),
	}
	got, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Role != "assistant" || got.Choices[0].Message.Content == "" {
		t.Fatalf("reply %+v", got.Choices)
	}
	if got.Object != "chat.completion" || got.Model != "stories260K" || got.Usage.CompletionTokens == 0 ||
		got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Errorf("response %+v", got)
	}

	// The same seed streams the same reply, with the usage at the end.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != got.Choices[0].Message.Content {
		t.Errorf("streamed %q, not streamed %q", acc.Choices[0].Message.Content, got.Choices[0].Message.Content)
	}
	if acc.Usage.CompletionTokens != got.Usage.CompletionTokens || acc.Choices[0].FinishReason != got.Choices[0].FinishReason {
		t.Errorf("streamed usage %+v finish %q, want %+v %q", acc.Usage, acc.Choices[0].FinishReason, got.Usage, got.Choices[0].FinishReason)
	}
	if !strings.Contains(logs.String(), "path=/v1/chat/completions status=200") {
		t.Errorf("no request log line in\n%s", logs)
	}

	models, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "stories260K" {
		t.Errorf("models %+v", models.Data)
	}
}

// A model's own Jinja template writes the prompt.
func TestChatJinjaTemplate(t *testing.T) {
	const tmpl = `{% for m in messages %}{{ '<' + m['role'] + '>' + m['content'] | trim + '\n' }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`
	m := loadModel(t, tinyWithTemplate(t, tmpl), 0)
	_, ts, logs := testServer(t, m, Options{ModelName: "tiny"})
	want := m.Encode("<system>Be brief.\n<user>Hi\n<assistant>", gotok.GenerateOptions{ParseSpecial: true})
	resp := post(t, ts, "/tokenize", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":" Hi "}]}`)
	body := readBody(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(body, `"count":`+itoa(len(want))) {
		t.Errorf("tokenize: %d %s, want %d tokens", resp.StatusCode, body, len(want))
	}
	c := client(ts)
	got, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage(" Hi ")},
		MaxTokens: openai.Int(4), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage.PromptTokens != int64(len(want)) {
		t.Errorf("prompt tokens %d, want %d", got.Usage.PromptTokens, len(want))
	}
	if !strings.Contains(logs.String(), "used=jinja") {
		t.Errorf("log does not say the Jinja template is used:\n%s", logs)
	}

	// A template that raises refuses the conversation with a 400.
	m2 := loadModel(t, tinyWithTemplate(t, `{{ raise_exception("roles must alternate") }}`), 0)
	_, ts2, _ := testServer(t, m2, Options{ModelName: "tiny"})
	resp = post(t, ts2, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`)
	if body := readBody(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "roles must alternate") {
		t.Errorf("raising template: %d %s", resp.StatusCode, body)
	}
}

func post(t *testing.T, ts *httptest.Server, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func itoa(n int) string { return strconv.Itoa(n) }

func optionAPIKey(k string) option.RequestOption { return option.WithAPIKey(k) }

// stop as a string cuts the text before it; top_k 1 is greedy whatever
// the temperature; min_p is accepted (the parameters the SDK does not
// name, over raw HTTP).
func TestSamplingParameters(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	complete := func(body string) (string, string) {
		t.Helper()
		resp := post(t, ts, "/v1/completions", body)
		data := readBody(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, data)
		}
		var got textCompletion
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Fatal(err)
		}
		return got.Choices[0].Text, *got.Choices[0].FinishReason
	}
	greedy, _ := complete(`{"prompt":"Once upon a time","max_tokens":16,"temperature":0}`)
	i := strings.Index(greedy, "girl")
	if i < 0 {
		t.Fatalf("greedy text %q has no \"girl\" to stop at", greedy)
	}
	text, finish := complete(`{"prompt":"Once upon a time","max_tokens":16,"temperature":0,"stop":"girl"}`)
	if text != greedy[:i] || finish != "stop" {
		t.Errorf("stop \"girl\": %q (%s), want %q (stop)", text, finish, greedy[:i])
	}
	for _, seed := range []string{"1", "2"} {
		text, _ := complete(`{"prompt":"Once upon a time","max_tokens":16,"temperature":1.5,"top_k":1,"min_p":0.1,"seed":` + seed + `}`)
		if text != greedy {
			t.Errorf("top_k 1, seed %s: %q, want the greedy %q", seed, text, greedy)
		}
	}
}

func TestTokenizeDetokenize(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	resp := post(t, ts, "/tokenize", `{"prompt":"Once upon a time","add_special_tokens":false}`)
	var tk tokenizeResponse
	if err := json.Unmarshal([]byte(readBody(t, resp)), &tk); err != nil || tk.Count != len(tk.Tokens) || tk.Count == 0 || tk.MaxModelLen != 512 {
		t.Fatalf("tokenize: %+v %v", tk, err)
	}
	ids, _ := json.Marshal(tk.Tokens)
	resp = post(t, ts, "/detokenize", `{"tokens":`+string(ids)+`}`)
	var dt struct{ Prompt string }
	if err := json.Unmarshal([]byte(readBody(t, resp)), &dt); err != nil || dt.Prompt != "Once upon a time" {
		t.Errorf("detokenize: %q %v", dt.Prompt, err)
	}
}

// Options.ChatTemplate is a built-in name or a Jinja text that parses:
// a mistyped name and a broken template stop New instead of falling back.
func TestChatTemplateOption(t *testing.T) {
	m := loadModel(t, storiesPath(t), 64)
	for _, c := range []struct {
		template string
		ok       bool
	}{
		{"chatml", true},
		{"{% for m in messages %}{{ m['content'] }}{% endfor %}", true},
		{"chatlm", false},                         // a mistyped name, not a template
		{"{% for m in messages %}{{ m }}", false}, // no endfor
	} {
		_, err := New(m, Options{ChatTemplate: c.template})
		if (err == nil) != c.ok {
			t.Errorf("ChatTemplate %q: err %v", c.template, err)
		}
	}
}

// An empty prompt on a model with no BOS token is the client's 400, not a
// 500 from the engine.
func TestEmptyPromptNoBOS(t *testing.T) {
	w, err := synth.Generate(synth.Options{Shape: synth.Presets["tiny"], Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	w.Set("tokenizer.ggml.bos_token_id", int32(-1)) // none
	path := filepath.Join(t.TempDir(), "nobos.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, path, 0)
	if m.Tokenizer().BOS() >= 0 {
		t.Fatal("the model has a BOS token: the test proves nothing")
	}
	_, ts, _ := testServer(t, m, Options{ModelName: "tiny"})
	for _, stream := range []string{"false", "true"} {
		resp := post(t, ts, "/v1/completions", `{"prompt":"","max_tokens":2,"stream":`+stream+`}`)
		if body := readBody(t, resp); resp.StatusCode != 400 || !strings.Contains(body, `"param":"prompt"`) {
			t.Errorf("stream %s: %d %s, want 400 on prompt", stream, resp.StatusCode, body)
		}
	}
}

// The penalties as vLLM applies them: presence and frequency over the
// whole completion only (the first token is the unpenalized one even when
// the prompt holds it), repetition_penalty over prompt and completion;
// the server's answer is the engine's with those options.
func TestPenalties(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{})
	m2 := loadModel(t, storiesPath(t), 512)
	const prompt = "Once upon a time, there was a girl. Once upon a time"
	engine := func(o gotok.GenerateOptions) string {
		t.Helper()
		var b strings.Builder
		if _, err := m2.Generate(context.Background(), prompt, o, func(s string) error { b.WriteString(s); return nil }); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	complete := func(extra string) string {
		t.Helper()
		resp := post(t, ts, "/v1/completions", `{"prompt":"`+prompt+`","max_tokens":24,"temperature":0`+extra+`}`)
		data := readBody(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", extra, resp.StatusCode, data)
		}
		var got textCompletion
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Fatal(err)
		}
		return got.Choices[0].Text
	}
	greedy := engine(gotok.GenerateOptions{MaxTokens: 24, ParseSpecial: true})
	presence := complete(`,"presence_penalty":2,"frequency_penalty":2`)
	want := engine(gotok.GenerateOptions{MaxTokens: 24, ParseSpecial: true, PenalizeCompletionOnly: true,
		Sample: sample.Params{PresencePenalty: 2, FrequencyPenalty: 2, RepeatPenalty: 1, PenaltyLastN: 512}})
	if presence != want {
		t.Errorf("presence/frequency penalties: %q, engine over the completion %q", presence, want)
	}
	// The greedy first token, ",", is in the prompt: penalized there, it
	// would not come first.
	if !strings.HasPrefix(greedy, ",") || !strings.HasPrefix(presence, ",") {
		t.Errorf("presence penalty changed the first token: %q, greedy %q", presence, greedy)
	}
	if presence == greedy {
		t.Error("the penalties changed nothing: the test proves nothing")
	}

	repetition := complete(`,"repetition_penalty":1.5`)
	want = engine(gotok.GenerateOptions{MaxTokens: 24, ParseSpecial: true,
		Sample: sample.Params{RepeatPenalty: 1.5, PenaltyLastN: 512}})
	if repetition != want || repetition == greedy {
		t.Errorf("repetition_penalty 1.5: %q, engine %q, greedy %q", repetition, want, greedy)
	}
	// stories260K never ends a story: min_tokens changes nothing here.
	if got := complete(`,"top_k":-1,"min_tokens":8`); got != greedy {
		t.Errorf("top_k -1, min_tokens 8: %q, want the greedy %q", got, greedy)
	}
}

// ignore_eos and min_tokens reach the engine (stories260K never ends a
// story on its own, so their effect cannot be seen over HTTP with it; the
// engine's tests show it), and so do the penalties' settings.
func TestVLLMExtensionOptions(t *testing.T) {
	req, err := decodeCompletionRequest(strings.NewReader(`{"prompt":"x","ignore_eos":true,"repetition_penalty":1.3,"top_k":-1,"min_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := generateOptions(&req.samplingRequest, logprobRequest{}, 8, 512)
	if err != nil {
		t.Fatal(err)
	}
	if !o.IgnoreEOS || o.MinTokens != 3 || o.Sample.RepeatPenalty != 1.3 || o.Sample.PenaltyLastN != 512 || o.PenalizeCompletionOnly || o.Sample.TopK != 0 {
		t.Errorf("options %+v", o)
	}
	req, err = decodeCompletionRequest(strings.NewReader(`{"prompt":"x","frequency_penalty":0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if o, _ = generateOptions(&req.samplingRequest, logprobRequest{}, 8, 512); !o.PenalizeCompletionOnly || o.Sample.PenaltyLastN != 512 {
		t.Errorf("frequency_penalty: options %+v", o)
	}
}
