package chat

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Detect picks the format of a Jinja chat template (a GGUF file's
// tokenizer.chat_template) by the markers it contains, checked in the order
// llama.cpp's llm_chat_detect_template checks them, so a template is taken
// for what llama.cpp takes it for. A template that is exactly a format's
// name is that format, as in llama.cpp.
//
// The error says what was found: a format llama.cpp knows but gotok does not
// render, or no known marker at all.
func Detect(jinja string) (Template, error) {
	if t, err := ByName(jinja); err == nil {
		return t, nil
	}
	name := detectName(jinja)
	if name == "" {
		return Template{}, fmt.Errorf("chat: template not recognized: it has none of the markers of the known formats (<|im_start|>, [INST], <|start_header_id|>, <|user|>, <start_of_turn>, …); it begins %q", head(jinja, 80))
	}
	t, err := ByName(name)
	if err != nil {
		return Template{}, fmt.Errorf("chat: template looks like llama.cpp's %q format, which gotok does not render", name)
	}
	return t, nil
}

// detectName is llama.cpp's decision list. Names that are not in templates
// are formats it knows and gotok does not render; they stay in the list so
// that their templates are not mistaken for a later format's.
func detectName(tmpl string) string {
	has := func(s string) bool { return strings.Contains(tmpl, s) }
	switch {
	case has("<|im_start|>"):
		switch {
		case has("<|im_sep|>"):
			return "phi4"
		case has("<end_of_utterance>"):
			return "smolvlm" // <|im_start|> is its BOS, but it is not ChatML
		}
		return "chatml"
	case strings.HasPrefix(tmpl, "mistral") || has("[INST]"):
		switch {
		case has("[SYSTEM_PROMPT]"):
			return "mistral-v7"
		// Mistral's official v1 template, or v3 and v3-tekken.
		case has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"):
			switch {
			case has(" [INST]"):
				return "mistral-v1"
			case has(`"[INST]"`):
				return "mistral-v3-tekken"
			}
			return "mistral-v3"
		case has("content.strip()"):
			return "llama2-sys-strip"
		case has("bos_token + '[INST]"):
			return "llama2-sys-bos"
		case has("<<SYS>>"):
			return "llama2-sys"
		}
		return "llama2"
	case has("<|assistant|>") && has("<|end|>"):
		return "phi3"
	case has("[gMASK]<sop>"):
		return "chatglm4"
	case has("<|assistant|>") && has("<|user|>"):
		if has("</s>") {
			return "falcon3"
		}
		return "glmedge"
	case has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>"):
		return "glmedge"
	case has("<|user|>") && has("<|endoftext|>"):
		return "zephyr"
	case has("bos_token + message['role']"):
		return "monarch"
	case has("<start_of_turn>"):
		return "gemma"
	case has(`'\n\nAssistant: ' + eos_token`):
		return "orion"
	case has("GPT4 Correct "):
		return "openchat"
	case has("USER: ") && has("ASSISTANT: "):
		if has("SYSTEM: ") {
			return "vicuna-orca"
		}
		return "vicuna"
	case has("### Instruction:") && has("<|EOT|>"):
		return "deepseek"
	case has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>"):
		return "command-r"
	case has("<|start_header_id|>") && has("<|end_header_id|>"):
		return "llama3"
	case has("[gMASK]sop"):
		return "chatglm3"
	case has("<用户>"):
		return "minicpm"
	case has("'Assistant: ' + message['content'] + eos_token"):
		return "deepseek2"
	case has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>"):
		return "deepseek3"
	case has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"):
		if has("[|tool|]") {
			return "exaone4"
		}
		return "exaone3"
	case has("rwkv-world") || has(`{{- 'User: ' + message['content']|trim + '\n\n' -}}`):
		return "rwkv-world"
	case has("<|start_of_role|>"):
		if has("<tool_call>") || has("<tools>") {
			if has("g4_default_system_message") {
				return "granite-4.0"
			}
			return "granite-4.1"
		}
		return "granite"
	case has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"):
		return "gigachat"
	case has("<|role_start|>"):
		return "megrez"
	case has(" Ассистент:"):
		return "yandex"
	case has("<role>ASSISTANT</role>") && has("'HUMAN'"):
		return "bailing"
	case has("<|header_start|>") && has("<|header_end|>"):
		return "llama4"
	case has("<|endofuserprompt|>"):
		return "dots1"
	case has("<|startoftext|>") && has("<|extra_4|>"):
		return "hunyuan-moe"
	case has("<｜hy_place▁holder▁no▁2｜>") && has("<｜hy_place▁holder▁no▁3｜>"):
		return "hunyuan-dense"
	case has("<|im_assistant|>assistant<|im_middle|>"):
		return "kimi-k2"
	}
	return ""
}

// head is s cut to at most n bytes, on a character boundary.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
