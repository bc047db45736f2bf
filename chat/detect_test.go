package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotok/gguf"
)

// detectCases are chat templates as models ship them, most from llama.cpp's
// tests/test-chat-template.cpp (written here with the same escapes as there),
// with the format llama.cpp's llm_chat_detect_template takes each for. The
// ones marked "snippet" are cut down to their telling parts.
var detectCases = []struct{ model, jinja, want string }{
	{"teknium/OpenHermes-2.5-Mistral-7B", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}", "chatml"},
	{"HuggingFaceTB/SmolLM2-135M-Instruct", "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}", "chatml"},
	{"mistralai/Mistral-7B-Instruct-v0.2", "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}", "llama2"},
	{"TheBloke/FusionNet_34Bx2_MoE-AWQ", "{%- for idx in range(0, messages|length) -%}\n{%- if messages[idx]['role'] == 'user' -%}\n{%- if idx > 1 -%}\n{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}\n{%- else -%}\n{{- messages[idx]['content'] + ' [/INST]' -}}\n{%- endif -%}\n{% elif messages[idx]['role'] == 'system' %}\n{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}\n{%- elif messages[idx]['role'] == 'assistant' -%}\n{{- ' '  + messages[idx]['content'] + ' ' + eos_token -}}\n{% endif %}\n{% endfor %}", "llama2-sys-bos"},
	{"bofenghuang/vigogne-2-70b-chat (snippet)", "{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'system' %}{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}", "llama2-sys-strip"},
	{"llama-2-chat (snippet)", "{{ bos_token }}{{ '[INST] <<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' }}{{ '[INST] ' + message['content'] + ' [/INST]' }}", "llama2-sys"},
	{"mistralai/Mistral-7B-Instruct-v0.2 (v1, snippet)", "{%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}", "mistral-v1"},
	{"mistralai/Mistral-Large-Instruct-2407 (v3, snippet)", "{{- \"[AVAILABLE_TOOLS] [\" }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}", "mistral-v3"},
	{"mistralai/Mistral-Nemo-Instruct-2407 (v3-tekken, snippet)", "{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}", "mistral-v3-tekken"},
	{"mistralai/Mistral-Large-Instruct-2411", "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and assistant roles are supported!') }}{% endif %}{% endfor %}", "mistral-v7"},
	{"mlabonne/AlphaMonarch-7B", "{% for message in messages %}{{bos_token + message['role'] + '\\n' + message['content'] + eos_token + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ bos_token + 'assistant\\n' }}{% endif %}", "monarch"},
	{"google/gemma-7b-it", "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}", "gemma"},
	{"OrionStarAI/Orion-14B-Chat", "{% for message in messages %}{% if loop.first %}{{ bos_token }}{% endif %}{% if message['role'] == 'user' %}{{ 'Human: ' + message['content'] + '\\n\\nAssistant: ' + eos_token }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}", "orion"},
	{"openchat/openchat-3.5-0106", "{{ bos_token }}{% for message in messages %}{{ 'GPT4 Correct ' + message['role'].title() + ': ' + message['content'] + '<|end_of_turn|>'}}{% endfor %}{% if add_generation_prompt %}{{ 'GPT4 Correct Assistant:' }}{% endif %}", "openchat"},
	{"deepseek-ai/deepseek-coder-33b-instruct (snippet)", "{%- if message['role'] == 'user' %}\n{{'### Instruction:\\n' + message['content'] + '\\n'}}\n        {%- else %}\n{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}", "deepseek"},
	{"eachadea/vicuna-13b-1.1", "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{- '' + message['content'] + '\n\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + '\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}{{-'ASSISTANT:'-}}{%- endif -%}", "vicuna"},
	{"Orca-Vicuna", "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{-'SYSTEM: ' + message['content'] + '\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + '\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}{{-'ASSISTANT:'-}}{%- endif -%}", "vicuna-orca"},
	{"CohereForAI/c4ai-command-r-plus (snippet)", "{% if message['role'] == 'user' %}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] == 'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% endif %}", "command-r"},
	{"Llama-3", "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}", "llama3"},
	{"Phi-3-small", "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}", "phi3"},
	{"phi-4", "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|><|im_start|>assistant<|im_sep|>'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}", "phi4"},
	{"GLMEdge", "{% for item in messages %}{% if item['role'] == 'system' %}<|system|>\n{{ item['content'] }}{% elif item['role'] == 'user' %}<|user|>\n{{ item['content'] }}{% elif item['role'] == 'assistant' %}<|assistant|>\n{{ item['content'] }}{% endif %}{% endfor %}<|assistant|>", "glmedge"},
	// Zephyr-style templates that write eos_token rather than a literal
	// </s> (TinyLlama-1.1B-Chat, zephyr-7b-beta) are GLM-Edge to llama.cpp.
	{"TinyLlama/TinyLlama-1.1B-Chat-v1.0", "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}", "glmedge"},
	{"tiiuae/Falcon3 (snippet)", "{{ '<|user|>\\n' + message['content'] + '\\n' }}{{ '<|assistant|>\\n' + message['content'] + '</s>' }}", "falcon3"},
	{"stabilityai/stablelm-2-zephyr-1_6b (snippet)", "{{'<|user|>\n' + message['content'] + '<|endoftext|>' + '\n'}}", "zephyr"},
	{"ibm-granite/granite-3.0-8b-instruct (snippet)", "{{- '<|start_of_role|>system<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}", "granite"},
	{"ibm-granite/granite-4.0 (snippet)", "{%- set g4_default_system_message = '' %}{{- '<|start_of_role|>system<|end_of_role|>' }}<tools>", "granite-4.0"},
	{"ibm-granite/granite-4.1 (snippet)", "{{- '<|start_of_role|>system<|end_of_role|>' }}<tool_call>", "granite-4.1"},
	// The model families gotok runs (../shared/models/arch): Qwen 2/3 and
	// SmolLM3 speak ChatML, OLMo 2's Tülu template is GLM-Edge to llama.cpp
	// (it writes eos_token, not a literal </s>).
	{"Qwen/Qwen3-0.6B (snippet)", "{{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}", "chatml"},
	{"allenai/OLMo-2-1124-7B-Instruct", "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\n'  + message['content'] + eos_token + '\n' }}{% else %}{{ '<|assistant|>\n'  + message['content'] + eos_token }}{% endif %}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}", "glmedge"},
	{"google/gemma-3-1b-it (snippet)", "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}", "gemma"},
	{"a template that is a format's name", "vicuna-orca", "vicuna-orca"},
	{"a name that starts with mistral", "mistral-something", "llama2"},
}

func TestDetect(t *testing.T) {
	for _, c := range detectCases {
		got, err := Detect(c.jinja)
		if err != nil {
			t.Errorf("%s: %v", c.model, err)
			continue
		}
		if got.Name() != c.want {
			t.Errorf("%s: detected %q, want %q", c.model, got.Name(), c.want)
		}
	}
}

// Formats llama.cpp knows but gotok does not render are named in the error,
// not mistaken for a format that comes later in the list.
func TestDetectUnrendered(t *testing.T) {
	cases := []struct{ jinja, want string }{
		{"{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n {{ message['content'] }}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}", `"chatglm3"`},
		{"[gMASK]<sop>{% for item in messages %}<|{{ item['role'] }}|>\n{{ item['content'] }}{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}", `"chatglm4"`},
		{"<|im_start|>User:{{ message['content'] }}<end_of_utterance>\n", `"smolvlm"`},
	}
	for _, c := range cases {
		_, err := Detect(c.jinja)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "does not render") {
			t.Errorf("%.40q: err = %v, want one naming %s", c.jinja, err, c.want)
		}
	}
}

func TestDetectUnknown(t *testing.T) {
	for _, jinja := range []string{"", "{{ messages }}", strings.Repeat("é", 100)} {
		_, err := Detect(jinja)
		if err == nil || !strings.Contains(err.Error(), "not recognized") {
			t.Errorf("%.20q: err = %v", jinja, err)
			continue
		}
		if !strings.Contains(err.Error(), head(jinja, 80)) {
			t.Errorf("error does not quote the template's start: %v", err)
		}
	}
	if got := head(strings.Repeat("é", 100), 81); got != strings.Repeat("é", 40)+"…" {
		t.Errorf("head cut a character: %q", got)
	}
}

// The chat template of a real GGUF file: llama.cpp's Phi-3 vocabulary.
func TestDetectRealGGUF(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "tokenizer-tests", "ggml-vocab-phi-3.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skip("../shared/tokenizer-tests not found beside the checkout")
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jinja, ok := f.String("tokenizer.chat_template")
	if !ok {
		t.Fatal("no tokenizer.chat_template")
	}
	tmpl, err := Detect(jinja)
	if err != nil || tmpl.Name() != "phi3" {
		t.Fatalf("Detect = %q, %v; want phi3", tmpl.Name(), err)
	}
}
