package chat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gotok/gguf"
)

// familyChat is what each family's template renders in the tests: a
// system prompt, a finished exchange and a new question.
var familyChat = []Message{
	{Role: "system", Content: "You are brief."},
	{Role: "user", Content: "Hi"},
	{Role: "assistant", Content: "Hello!"},
	{Role: "user", Content: "What is 2+2?"},
}

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The templates in testdata are the tokenizer_config.json chat templates
// of each family's instruct model; the wanted strings are what
// transformers' apply_chat_template(familyChat, add_generation_prompt)
// returns for them, worked out by reading the templates.
func TestJinjaFamilies(t *testing.T) {
	today := time.Now().Format("02 Jan 2006")
	tests := []struct {
		file   string
		tokens SpecialTokens
		msgs   []Message
		want   string
	}{
		{"smollm2.jinja", SpecialTokens{BOS: "<|im_start|>", EOS: "<|im_end|>"}, familyChat[1:],
			"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
				"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
		{"smollm2.jinja", SpecialTokens{BOS: "<|im_start|>", EOS: "<|im_end|>"}, familyChat,
			"<|im_start|>system\nYou are brief.<|im_end|>\n" +
				"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
		{"llama3.jinja", SpecialTokens{BOS: "<|begin_of_text|>", EOS: "<|eot_id|>"}, familyChat,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " + today + "\n\nYou are brief.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"qwen3.jinja", SpecialTokens{EOS: "<|im_end|>"}, familyChat,
			"<|im_start|>system\nYou are brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n" +
				"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
		// Qwen3 moves the reasoning of the last turn's reply into <think>
		// and drops it from earlier ones.
		{"qwen3.jinja", SpecialTokens{EOS: "<|im_end|>"}, []Message{
			{Role: "user", Content: "Hi"},
			{Role: "assistant", Content: "<think>\nGreet back.\n</think>\n\nHello!"},
			{Role: "user", Content: "Bye"},
			{Role: "assistant", Content: "<think>\nPolite.\n</think>\n\nBye!"},
		}, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n" +
			"<|im_start|>assistant\n<think>\nPolite.\n</think>\n\nBye!<|im_end|>\n<|im_start|>assistant\n"},
		{"mistral.jinja", SpecialTokens{BOS: "<s>", EOS: "</s>"}, familyChat[1:],
			"<s>[INST] Hi [/INST]Hello!</s>[INST] What is 2+2? [/INST]"},
		{"granite.jinja", SpecialTokens{BOS: "<|end_of_text|>", EOS: "<|end_of_text|>"}, familyChat,
			"<|start_of_role|>system<|end_of_role|>You are brief.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n" +
				"<|start_of_role|>assistant<|end_of_role|>Hello!<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is 2+2?<|end_of_text|>\n" +
				"<|start_of_role|>assistant<|end_of_role|>"},
		{"olmo2.jinja", SpecialTokens{BOS: "<|endoftext|>", EOS: "<|endoftext|>"}, familyChat,
			"<|endoftext|><|system|>\nYou are brief.\n<|user|>\nHi\n<|assistant|>\nHello!<|endoftext|>\n<|user|>\nWhat is 2+2?\n<|assistant|>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			j, err := ParseJinja(readTemplate(t, tt.file), tt.tokens)
			if err != nil {
				t.Fatal(err)
			}
			got, err := j.Render(tt.msgs, true)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestJinjaNoGenerationPrompt(t *testing.T) {
	j, err := ParseJinja(readTemplate(t, "olmo2.jinja"), SpecialTokens{BOS: "<|endoftext|>", EOS: "<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Render(familyChat[:3], false)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|endoftext|><|system|>\nYou are brief.\n<|user|>\nHi\n<|assistant|>\nHello!<|endoftext|>"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A template's raise_exception is an error that carries its message.
func TestJinjaRaiseException(t *testing.T) {
	for _, file := range []string{"mistral.jinja"} {
		j, err := ParseJinja(readTemplate(t, file), SpecialTokens{BOS: "<s>", EOS: "</s>"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = j.Render([]Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, true)
		if err == nil || !strings.Contains(err.Error(), "Conversation roles must alternate") || !errors.Is(err, ErrTemplateRaised) {
			t.Errorf("%s: two user turns: got %v, want the template's exception", file, err)
		}
	}
}

// The one real GGUF chat template in ../shared: phi-3's vocabulary file.
func TestJinjaFromGGUF(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "tokenizer-tests", "ggml-vocab-phi-3.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skip("../shared not beside the checkout")
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, ok := f.Metadata.String("tokenizer.chat_template")
	if !ok {
		t.Fatal("no chat template")
	}
	j, err := ParseJinja(src, SpecialTokens{BOS: "<s>", EOS: "<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Render(familyChat, true)
	if err != nil {
		t.Fatal(err)
	}
	// This template drops system messages.
	want := "<s><|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestJinjaFeatures(t *testing.T) {
	tests := []struct{ src, want string }{
		{`{{ messages[0]['content'].strip() }}|{{ messages[0].content|trim }}`, "a b|a b"},
		{`{% for m in messages[1:] %}{{ m.role }}{% endfor %}`, "assistant"},
		{`{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}`, "2"},
		{`{{ messages[-1] | tojson }}`, `{"content": "<b>", "role": "assistant"}`},
		{`{{ {"k": [1, "é"]} | tojson(indent=2) }}`, "{\n  \"k\": [\n    1,\n    \"é\"\n  ]\n}"},
		{`{{ bos_token }}{% if add_generation_prompt %}G{% endif %}`, "<s>G"},
		{`{{ messages | length }}{{ "x" if tools is none else "y" }}`, "2x"},
		{`{{ strftime_now("%Y") }}`, time.Now().Format("2006")},
	}
	msgs := []Message{{Role: "user", Content: " a b\n"}, {Role: "assistant", Content: "<b>"}}
	for _, tt := range tests {
		j, err := ParseJinja(tt.src, SpecialTokens{BOS: "<s>"})
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		got, err := j.Render(msgs, true)
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.src, got, tt.want)
		}
	}
}

func TestJinjaErrors(t *testing.T) {
	for _, src := range []string{
		`{% for m in messages %}`,     // unclosed
		`{{ undefined_function() }}`,  // call of nothing
		`{% include "/etc/passwd" %}`, // nothing outside can be loaded
		`{{ raise_exception("no") }}`, // the template refuses
	} {
		j, err := ParseJinja(src, SpecialTokens{})
		if err != nil {
			continue
		}
		if out, err := j.Render([]Message{{Role: "user", Content: "x"}}, true); err == nil {
			t.Errorf("%s: rendered %q, want an error", src, out)
		}
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2024, 7, 6, 9, 5, 3, 0, time.UTC)
	if got, want := strftime(tm, "%d %b %Y|%B %-d, %Y|%H:%M:%S %A %%"), "06 Jul 2024|July 6, 2024|09:05:03 Saturday %"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// gonja (v2.9.1) does not parse a conditional expression inside
// parentheses, which Gemma 3's template uses; the server then falls back
// to the built-in gemma format, which writes what transformers writes
// (the BOS token comes from the tokenizer instead of the text).
func TestJinjaGemma3(t *testing.T) {
	const want = "<start_of_turn>user\nYou are brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n" +
		"<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"
	j, err := ParseJinja(readTemplate(t, "gemma3.jinja"), SpecialTokens{BOS: "<bos>", EOS: "<eos>"})
	if err == nil {
		got, err := j.Render(familyChat, true)
		if err != nil {
			t.Fatal(err)
		}
		if got != "<bos>"+want {
			t.Errorf("got %q, want %q", got, "<bos>"+want)
		}
		_, err = j.Render([]Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, true)
		if !errors.Is(err, ErrTemplateRaised) {
			t.Errorf("two user turns: got %v, want the template's exception", err)
		}
		return
	}
	t.Logf("gemma3 template: %v (the built-in format is used)", err)
	tmpl, err := Detect(readTemplate(t, "gemma3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(familyChat, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("built-in gemma: got %q, want %q", got, want)
	}
}

// A server renders one template from many requests at once.
func TestJinjaConcurrent(t *testing.T) {
	j, err := ParseJinja(readTemplate(t, "qwen3.jinja"), SpecialTokens{EOS: "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := j.Render(familyChat, true)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got, err := j.Render(familyChat, true); err != nil || got != want {
					t.Errorf("concurrent render: %q, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
