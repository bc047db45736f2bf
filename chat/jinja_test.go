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
// of each family's instruct model (testdata/README.md says which are
// checked against a real copy); the wanted strings are what transformers'
// apply_chat_template(familyChat, add_generation_prompt) returns for them,
// rendered with jinja2 3.1.6 set up as it sets it up.
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
		{`{{ messages[-1] | tojson }}`, `{"role": "assistant", "content": "<b>"}`},
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

// What transformers' jinja2 (3.1.6, set up by apply_chat_template) renders
// for the Python features chat templates use; each want was rendered with
// it. A row with a gap is a known difference of gonja's that the chat
// package does not close: it is logged while it stays, and fails once it
// is gone, so the note goes too.
func TestJinjaPython(t *testing.T) {
	tests := []struct{ src, want, gap string }{
		{`{{ raise_exception is defined }}|{{ nothing is defined }}|{{ messages[0].nothing is defined }}`,
			"True|False|False", ""},
		{`{{ '  x y  '.strip() }}|{{ '  x y  '.lstrip() }}|{{ '  x y  '.rstrip() }}|{{ 'xxaxx'.strip('x') }}`,
			"x y|x y  |  x y|a", ""},
		{`{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}`,
			"['a', 'b', 'c']|['a', 'b', '', 'c']|['a', 'b,c']", ""},
		{`{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith('lo') }}|{{ 'hello'.startswith(('x','h')) }}`,
			"True|True|True", ""},
		{`{{ 'Hello World'.upper() }}|{{ 'Hello World'.lower() }}|{{ 'hello wORLD'.title() }}|{{ 'aXbXc'.replace('X', '-') }}`,
			"HELLO WORLD|hello world|Hello World|a-b-c", ""},
		{`{% for m in messages %}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}|{% for m in messages %}{{ loop.index }}{{ loop.first }}{{ loop.length }}{% endfor %}`,
			"user,assistant|1True22False2", ""},
		{`{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }}`,
			"True 2", ""},
		{`{{ messages|length }}|{{ 'abc'|length }}|{{ messages[0]|length }}`,
			"2|3|2", ""},
		{`{% set d = {'a': 1, 'b': 'x'} %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{{ d.get('a') }}|{{ d.get('z', 'dflt') }}|{{ d.get('z') }}`,
			"a=1;b=x;|1|dflt|None", "gonja prints none as the empty string, jinja2 as None"},
		{`{{ 'ell' in 'hello' }}|{{ 'z' in 'hello' }}|{{ 'z' not in 'hello' }}|{{ 'role' in messages[0] }}`,
			"True|False|True|True", ""},
		{`{{ 'abc'[::-1] }}|{{ messages[::-1][0].role }}|{{ 'abcdef'[1:3] }}|{{ 'abcdef'[-2:] }}`,
			"cba|assistant|bc|ef", ""},
		{`{{ {'b': 1, 'a': [1, 2.5, true, none, 'é"']}|tojson }}|{{ messages[1]|tojson }}|{{ [1,2]|tojson(indent=2) }}`,
			"{\"b\": 1, \"a\": [1, 2.5, true, null, \"é\\\"\"]}|{\"role\": \"assistant\", \"content\": \"<b>\"}|[\n  1,\n  2\n]", ""},
		{`{{ messages[0].content|trim }}|{{ 'x'|upper }}|{{ ' a '|trim|length }}`,
			"a b|X|1", ""},
		{`{{ none }}|{{ true }}|{{ false }}|{{ 1 == 1 }}`,
			"None|True|False|True", "gonja prints none as the empty string, jinja2 as None"},
		{`{{ 'a' ~ 1 ~ none }}`,
			"a1None", "gonja prints none as the empty string, jinja2 as None"},
		{`{{ (messages|selectattr('role', 'equalto', 'user')|list|length) }}|{{ messages|map(attribute='role')|join(',') }}`,
			"1|user,assistant", ""},
		{`{% if messages[0]['content'] is string %}s{% endif %}{% if messages is iterable %}i{% endif %}{% if messages[0] is mapping %}m{% endif %}{% if 3 is number %}n{% endif %}`,
			"simn", ""},
		{`{{ '%s-%d'|format('a', 3) }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 3 }}|{{ 7 / 2 }}`,
			"a-3|3|1|8|3.5", "gonja's ** gives a float for ints"},
		{`{% for i in range(3) %}{{ i }}{% endfor %}|{% for m in messages if m.role == 'user' %}{{ m.role }}{% endfor %}`,
			"012|user", ""},
		{`{% macro f(x, y='d') %}[{{ x }}{{ y }}]{% endmacro %}{{ f(1) }}{{ f(2, y='e') }}`,
			"[1d][2e]", ""},
		{`{{ messages[0].content.strip().split(' ')|join('+') }}|{{ 'x,y'.split(',')[1] }}`,
			"a+b|y", ""},
		{`{{ ('a' if true else 'b') + 'c' }}`,
			"ac", "gonja parses a conditional expression only as a whole {{ }} or set expression"},
		{`{% for m in messages %}{% if loop.index0 == 0 %}{% continue %}{% endif %}{{ m.role }}{% endfor %}`,
			"assistant", ""},
		{`{{ 'abc'.find('c') }}|{{ 'a-b'.rsplit('-', 1) }}|{{ ' x '.isspace() }}|{{ 'ab'.count('a') }}`,
			"2|['a', 'b']|False|1", ""},
		{`{{ [3,1,2]|sort }}|{{ [1,2,3]|first }}|{{ [1,2,3]|last }}|{{ [1,2,3][-1] }}`,
			"[1, 2, 3]|1|3|3", ""},
		{`{{ 'x' * 3 }}|{{ [1] + [2] }}`,
			"xxx|[1, 2]", ""},
		{`{%- generation -%}G{%- endgeneration -%}`,
			"G", ""},
		{"a\n{% generation %}\n  G {{ 1 }}\n{% endgeneration %}\nb", // transformers' AssistantTracker
			"a\n  G 1\nb", ""},
		{`{{ messages[0].content | replace('a', 'A') }}|{{ 'Hello' | lower }}|{{ 'hello' | capitalize }}`,
			" A b\n|hello|Hello", ""},
		{`{{ {'a': 1}|items|list }}|{{ {'a': 1}.keys()|list }}|{{ {'a': 1}.values()|list }}`,
			"[('a', 1)]|['a']|[1]", "gonja prints a tuple as a list"},
		{`{% set x = 'a' %}{% set x = x + 'b' %}{{ x }}|{{ 1 if none else 2 }}|{{ none is none }}|{{ 1 is not none }}`,
			"ab|2|True|True", ""},
		{`{{ 'a\nb'.splitlines() }}|{{ 'ab'.lstrip('a') }}`,
			"['a', 'b']|b", ""},
		{`{{ 1.0 }}|{{ 3.14 }}|{{ 10 / 5 }}|{{ 1e3 }}`,
			"1.0|3.14|2.0|1000.0", ""},
		{`{{ [1, 'a', none, true] }}|{{ {'a': 'b'} }}|{{ ('x', 1) }}`,
			"[1, 'a', None, True]|{'a': 'b'}|('x', 1)", "gonja prints none in a list as nothing, a tuple as a list"},
		{"{{ '  a  b c '.split(none, 1) }}|{{ '  a  b c '.rsplit(none, 1) }}|{{ 'a\u3000b'.split() }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ ' x  y '.split(maxsplit=0) }}",
			"['a', 'b c ']|['  a  b', 'c']|['a', 'b']|['a,b', 'c']|['x  y ']", ""},
		{`{{ 'a,b'.split(',', 0) }}|{{ ''.split() }}|{{ ''.split(',') }}|{{ 'a--b--c'.rsplit('--') }}`,
			"['a,b']|[]|['']|['a', 'b', 'c']", ""},
		{"{{ 'aaa'.replace('a', 'b', 2) }}|{{ '\x1fx\x1f'.strip() }}|{{ ' x'.strip(none) }}|{{ '\u00a0x\u2003'.strip() }}",
			"bba|x|x|x", ""},
		{`{% for k, v in {'b': 1, 'a': 2}|items %}{{ k }}{{ v }};{% endfor %}|{% for k, v in messages[0]|items %}{{ k }}={{ v|trim }};{% endfor %}|{{ none|items|list }}`,
			"b1;a2;|role=user;content=a b;|[]", ""},
		{`{% for k in {'b': 1, 'a': 2} %}{{ k }};{% endfor %}|{{ {'b': 1, 'a': 2}.keys()|list }}|{{ {'b': 1, 'a': 2}.values()|list }}|{{ messages[0].keys()|list }}|{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}{{ v }};{% endfor %}`,
			"b;a;|['b', 'a']|[1, 2]|['role', 'content']|b1;a2;", ""},
		{`{% for k, v in {'b': 1, 'A': 3, 'a': 2}|dictsort %}{{ k }}{{ v }};{% endfor %}|{% for k, v in {'b': 1, 'A': 3, 'c': 2}|dictsort(by='value', reverse=true) %}{{ k }};{% endfor %}|{% for k, v in messages[0]|dictsort %}{{ k }};{% endfor %}|{% for k, v in {'b': 1, 'B': 3, 'a': 2}|dictsort(true) %}{{ k }};{% endfor %}`,
			"A3;a2;b1;|A;c;b;|content;role;|B;a;b;", ""},
		// lstrip_blocks strips white space before a tag only from a line's start.
		{"{{ 1 }} {% if true %}x{% endif %}|a {% if true %}x{% endif %}|{% if true %}  {% endif %}|{# c #}  {% if true %}x{% endif %}",
			"1 x|a x|  |  x", ""},
		{"  {% if true %}x{% endif %}|{% if true %}\n  {% endif %}|{{ 1 -}}  {% if true %}x{% endif %}|{{ 1 }}  {%- if true %}x{% endif %}|{{ 1 }}\t{# c #}y",
			"x||1x|1x|1\ty", ""},
		{"{{ {'a': {'b': 1}}['a']['b'] }} {% if true %}x{% endif %}|{{ '}} {%' }} {% if true %}x{% endif %}|{% raw %}{{ 1 }} {% endraw %} {% if true %}x{% endif %}",
			"1 x|}} {% x|{{ 1 }}  x", ""},
		// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
		{"{{ {'b': 'é✓😀', 'a': [1.0, 2.5, 1e16, 0.0001, 1e-05, -0.0, none, true]}|tojson }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}",
			"{\"b\": \"é✓😀\", \"a\": [1.0, 2.5, 1e+16, 0.0001, 1e-05, -0.0, null, true]}|{\"a\": 2, \"b\": 1}|{\"a\":[1,2]}", ""},
		{"{{ 'é😀'|tojson(true) }}|{{ 'é'|tojson(ensure_ascii=true, indent=1) }}|{{ {'a': [1]}|tojson(indent='\\t') }}|{{ {'a': [], 'b': {}}|tojson(indent=0) }}|{{ messages[0]|tojson(indent=2, sort_keys=true) }}",
			"\"\\u00e9\\ud83d\\ude00\"|\"\\u00e9\"|{\n\t\"a\": [\n\t\t1\n\t]\n}|{\n\"a\": [],\n\"b\": {}\n}|{\n  \"content\": \" a b\\n\",\n  \"role\": \"user\"\n}", ""},
		{`{{ messages[0].tool_calls is defined }}|{% if messages[0].tool_calls %}y{% else %}n{% endif %}|{{ messages[0].get('x', 'd') }}|{{ 'x' in messages[0] }}|{{ messages[0] is mapping }}`,
			"False|n|d|False|True", ""},
		{`{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|map(attribute='role')|join('/') }}|{{ (messages|last).role }}|{{ messages[1]|string }}`,
			"1|user/assistant|assistant|{'role': 'assistant', 'content': '<b>'}", ""},
		{`{{ messages[0]|string }}`, "{'role': 'user', 'content': ' a b\\n'}", "gonja writes a string in a dict without Python's escapes"},
		{`{{ messages[0].tool_calls is none }}`, "False", "gonja takes an undefined value for none"},
		{`{% set x = {} %}{% if x %}y{% else %}n{% endif %}`, "n", "gonja takes an empty dict for true"},
		{`{{ messages[1]|tojson }}|{{ messages|tojson }}|{{ messages[0].items()|list|length }}|{{ messages[0].get('role') }}|{{ messages[0] is mapping }}`,
			`{"role": "assistant", "content": "<b>"}|[{"role": "user", "content": " a b\n"}, {"role": "assistant", "content": "<b>"}]|2|user|True`, ""},
	}
	msgs := []Message{{Role: "user", Content: " a b\n"}, {Role: "assistant", Content: "<b>"}}
	for _, tt := range tests {
		got, err := renderOnce(tt.src, msgs)
		switch {
		case tt.gap == "" && err != nil:
			t.Errorf("%s: %v", tt.src, err)
		case tt.gap == "" && got != tt.want:
			t.Errorf("%s:\n got %q\nwant %q", tt.src, got, tt.want)
		case tt.gap != "" && err == nil && got == tt.want:
			t.Errorf("%s: renders as jinja2 now; drop the gap %q", tt.src, tt.gap)
		case tt.gap != "":
			t.Logf("known gap, %s: %s: got %q, %v", tt.gap, tt.src, got, err)
		}
	}
}

func renderOnce(src string, msgs []Message) (string, error) {
	j, err := ParseJinja(src, SpecialTokens{BOS: "<s>", EOS: "</s>"})
	if err != nil {
		return "", err
	}
	return j.Render(msgs, true)
}

// tojson quotes strings as json.dumps does; the wants are Python's.
func TestJinjaToJSONString(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "q\"\\/\u2028\x7f\x01\x1f\b\f\n\r\t<>&é😀"}}
	got, err := renderOnce(`{{ messages[0].content|tojson }}|{{ messages[0].content|tojson(ensure_ascii=true) }}`, msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := `"q\"\\/` + "\u2028\x7f" + `\u0001\u001f\b\f\n\r\t<>&é😀"|"q\"\\/\u2028\u007f\u0001\u001f\b\f\n\r\t<>&\u00e9\ud83d\ude00"`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for _, src := range []string{
		`{{ 1|tojson(indent=[]) }}`, `{{ 1|tojson(separators=',') }}`, `{{ 1|tojson(nope=1) }}`,
		`{{ 1|tojson(false, indent=2, ensure_ascii=true) }}`,
	} {
		if out, err := renderOnce(src, msgs); err == nil {
			t.Errorf("%s: rendered %q, want an error", src, out)
		}
	}
}

func TestKeepInlineWhitespace(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"{{ x }} {% if %}", "{{ x }} {%+ if %}"},
		{"{{ x }}\t{# c #}", "{{ x }}\t{#+ c #}"},
		{"{{ {'a': {'b': 1}} }} {% if %}", "{{ {'a': {'b': 1}} }} {%+ if %}"},
		{"{{ '}} {%' }} {% if %}", "{{ '}} {%' }} {%+ if %}"},
		{`{{ "\"}} {%" }} {% if %}`, `{{ "\"}} {%" }} {%+ if %}`},
		{"{% raw %} {% x %} {% endraw %} {% if %}", "{% raw %} {% x %} {% endraw %} {%+ if %}"},
		// Left alone: at a line's start, stripped anyway, marked, no tag before.
		{"  {% if %}", "  {% if %}"},
		{"{{ x }}\n  {% if %}", "{{ x }}\n  {% if %}"},
		{"{{ x -}} {% if %}|{{ x }} {%- if %}|{{ x }} {%+ if %}", "{{ x -}} {% if %}|{{ x }} {%- if %}|{{ x }} {%+ if %}"},
		{"{{ x }} {{ y }}|{{ x }}a {% if %}", "{{ x }} {{ y }}|{{ x }}a {% if %}"},
		// Text that does not lex is left to gonja.
		{"{{ x", "{{ x"}, {"{{ 'x }} {% if %}", "{{ 'x }} {% if %}"}, {"{# x", "{# x"}, {"{% raw %} {% if %}", "{% raw %} {% if %}"}, {"{", "{"},
	} {
		if got := keepInlineWhitespace(tt.in); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
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

// Gemma 3's template has a conditional expression inside parentheses,
// which gonja cannot parse; ParseJinja rewrites that one expression
// exactly (gonjaRewrites). The wants are jinja2's renders. The built-in
// gemma format, used when a template fails, writes the same but the BOS
// token, which comes from the tokenizer there.
func TestJinjaGemma3(t *testing.T) {
	const want = "<start_of_turn>user\nYou are brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n" +
		"<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"
	src := readTemplate(t, "gemma3.jinja")
	j, err := ParseJinja(src, SpecialTokens{BOS: "<bos>", EOS: "<eos>"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Render(familyChat, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != "<bos>"+want {
		t.Errorf("got %q, want %q", got, "<bos>"+want)
	}
	// Without a system prompt the first turn has no prefix.
	got, err = j.Render(familyChat[1:3], false)
	if err != nil {
		t.Fatal(err)
	}
	if w := "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"; got != w {
		t.Errorf("no system prompt: got %q, want %q", got, w)
	}
	_, err = j.Render([]Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, true)
	if !errors.Is(err, ErrTemplateRaised) {
		t.Errorf("two user turns: got %v, want the template's exception", err)
	}

	tmpl, err := Detect(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err = tmpl.Render(familyChat, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("built-in gemma: got %q, want %q", got, want)
	}
}

// A rewrite applies to its exact text only: the same expression with
// other operands is left for gonja, which refuses it.
func TestRewriteForGonja(t *testing.T) {
	for _, r := range gonjaRewrites {
		if got := rewriteForGonja("a" + r.from + "b" + r.from); got != "a"+r.to+"b"+r.to {
			t.Errorf("rewrite of %q: got %q", r.from, got)
		}
	}
	other := `{{ '<start_of_turn>' + role + '\n' + (prefix if loop.first else "") }}`
	if got := rewriteForGonja(other); got != other {
		t.Errorf("rewrote %q to %q", other, got)
	}
	if _, err := ParseJinja(other, SpecialTokens{}); err == nil {
		t.Error("gonja parses a parenthesised conditional now: the rewrites may go")
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

// TestJinjaHostile gives the renderer templates that, unbounded, crash the
// process (Go stack overflows are fatal) or run without end: each must
// fail with an error, promptly.
func TestJinjaHostile(t *testing.T) {
	deep := func(open, mid, close string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	for _, src := range []string{
		"{{ " + deep("(", "1", ")", 100000) + " }}",
		"{{ " + deep("[", "", "]", 100000) + " }}",
		"{{ " + strings.Repeat("- ", 100000) + "1 }}",
		deep("{% if true %}", "x", "{% endif %}", 3000),
		deep("{%- for m in messages -%}", "x", "{%- endfor -%}", 3000),
		`{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`,
		`{% macro f() %}{{ g() }}{% endmacro %}{% macro g() %}{{ f() }}{% endmacro %}{{ f() }}`,
		`{% include "/chat_template.jinja" %}`,
		`{% import "/chat_template.jinja" as m %}{{ m.x }}`,
		`{% from "/chat_template.jinja" import x %}`,
		`{% extends "/chat_template.jinja" %}`,
		`{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}`,
		`{% for i in range(1000000000) %}x{% endfor %}`,
		`{% for i in range(0, -1000000000, -1) %}x{% endfor %}`,
		`{{ range(1, 2, 0) }}`,
		`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`,
		`{% for c in "x" * 100000 %}{% for d in "y" * 100000 %}{% endfor %}{% endfor %}`,
		`{% for i in range(100000) %}{{ "x" * 1000 }}{% endfor %}`,
		`{% set __gotok_loop_budget = 0 %}{% for m in messages %}{{ m.content }}{% endfor %}`,
		`{{ "ab" * 10000000000 }}`,
		`{% set n = 100000 %}{% set s = "x" * n %}{{ (s * n) | length }}`,
		`{% macro m(k) %}{{ "y" * k }}{% endmacro %}{{ m(99999999999) }}`,
		`{% for m in messages %}{% if true %}{{ m.content * 99999999999 }}{% endif %}{% endfor %}`,
		`{% for i in range(100000) %}{% set s = "x" * 60000000 %}{% endfor %}`,
		`{% for i in range(100000) %}{% set s = "x".center(65536) %}{% endfor %}ok`,
		`{{ "x" | center(99999999999) }}`,
		`{{ "a\nb" | indent(99999999999) }}`,
		`{{ "a\nb" | indent(width=99999999999) }}`,
		`{{ "x".center(99999999999) }}{{ "x".ljust(99999999999) }}`,
		`{{ "x".zfill(99999999999) }}`,
		`{{ "\t".expandtabs(99999999999) }}`,
	} {
		start := time.Now()
		j, err := ParseJinja(src, SpecialTokens{})
		if err == nil {
			var out string
			out, err = j.Render([]Message{{Role: "user", Content: "hi"}}, true)
			if err == nil {
				t.Errorf("%s: rendered %d bytes, want an error", src, len(out))
			}
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: %v to fail", src, d)
		}
		if err != nil && len(err.Error()) > 1000 {
			t.Errorf("%s: an error of %d bytes", src, len(err.Error()))
		}
		t.Logf("%s: %v", src, err)
	}
}

// TestJinjaNesting checks that what checkNesting counts is nesting:
// brackets in string literals and raw text do not count, and a template
// nested near the bound still renders.
func TestJinjaNesting(t *testing.T) {
	for src, want := range map[string]string{
		`{{ "` + strings.Repeat("(", 1000) + `" | length }}`:                                          "1000",
		`{{ '` + strings.Repeat("[", 1000) + `\' ' | length }}`:                                       "1002",
		`{% raw %}` + strings.Repeat("{% if x %}", 1000) + `{% endraw %}ok`:                           strings.Repeat("{% if x %}", 1000) + "ok",
		"{{ " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200) + " }}":                     "1",
		strings.Repeat("{% if true %}", 200) + "x" + strings.Repeat("{% endif %}", 200):               "x",
		`{% set x = 1 %}` + strings.Repeat("{% set y = 2 %}", 1000) + `{{ x + y }}`:                   "3",
		`{{ "ab" * 3 }}{{ 2 * 3 }}{{ 1.5 * 2 }}{{ "-" * 0 }}{{ ("x" * 2) * 2 }}`:                      "ababab63.0xxxx",
		`{% set s = "ab" %}{{ s * 2 ~ "|" ~ (s * 2) | length }}`:                                      "abab|4",
		`{{ "x" | center(5) }}|{{ "a\nb" | indent(2, true) }}|{{ "7".zfill(3) }}|{{ "x".ljust(3) }}|`: "  x  |  a\n  b|007|x  |",
	} {
		j, err := ParseJinja(src, SpecialTokens{})
		if err != nil {
			t.Errorf("%.60s…: %v", src, err)
			continue
		}
		if got, err := j.Render(nil, false); err != nil || got != want {
			t.Errorf("%.60s… = %.60q (%v), want %.60q", src, got, err, want)
		}
	}
}

// TestJinjaRange checks range, now a list of at most rangeMax numbers,
// against Python's.
func TestJinjaRange(t *testing.T) {
	for src, want := range map[string]string{
		`{% for i in range(3) %}{{ i }}{% endfor %}`:                            "012",
		`{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}`:                      "135",
		`{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}`:                     "531",
		`{% for i in range(4, 4) %}{{ i }}{% else %}none{% endfor %}`:           "none",
		`{{ range(3)|length }}`:                                                 "3",
		`{{ range(100000)|last }}`:                                              "99999",
		`{% for i in range(10) %}{% if i == 2 %}{{ i }}{% endif %}{% endfor %}`: "2",
	} {
		j, err := ParseJinja(src, SpecialTokens{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got, err := j.Render(nil, false); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", src, got, err, want)
		}
	}
}
