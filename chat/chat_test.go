package chat

import (
	"slices"
	"strings"
	"testing"
)

// conversation is the one llama.cpp's tests/test-chat-template.cpp renders,
// with an assistant message padded by spaces to show which formats trim.
var conversation = []Message{
	{"system", "You are a helpful assistant"},
	{"user", "Hello"},
	{"assistant", "Hi there"},
	{"user", "Who are you"},
	{"assistant", "   I am an assistant   "},
	{"user", "Another question"},
}

// rendered holds llama.cpp's renderings of conversation with the assistant
// prompt added. Those marked "test" are the expected outputs in
// test-chat-template.cpp; the others have no case there and were worked out
// by hand from llm_chat_apply_template in src/llama-chat.cpp.
var rendered = map[string]string{
	// test: teknium/OpenHermes-2.5-Mistral-7B
	"chatml": "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n",
	// test: mistralai/Mistral-7B-Instruct-v0.2 (old, no system prompt)
	"llama2": "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]",
	// by hand
	"llama2-sys": "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]",
	// test: TheBloke/FusionNet_34Bx2_MoE-AWQ
	"llama2-sys-bos": "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]",
	// test: bofenghuang/vigogne-2-70b-chat
	"llama2-sys-strip": "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]",
	// test: mistralai/Mistral-7B-Instruct-v0.2 (v1 template with a system prompt)
	"mistral-v1": " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]",
	// test: Mistral-Large-Instruct-2407
	"mistral-v3": "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]",
	// test: Mistral-Nemo-Instruct-2407
	"mistral-v3-tekken": "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]",
	// test: mistralai/Mistral-Large-Instruct-2411
	"mistral-v7": "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]",
	// by hand
	"mistral-v7-tekken": "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]",
	// test: Llama-3
	"llama3": "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	// test: Phi-3-mini, -small, -medium, -vision
	"phi3": "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n",
	// by hand
	"falcon3": "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi there\n<|user|>\nWho are you\n<|assistant|>\n   I am an assistant   \n<|user|>\nAnother question\n<|assistant|>\n",
	// by hand
	"zephyr": "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n",
	// test: GLMEdge
	"glmedge": "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>",
	// test: phi-4
	"phi4": "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>",
	// test: mlabonne/AlphaMonarch-7B
	"monarch": "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n",
	// test: google/gemma-7b-it
	"gemma": "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n",
	// test: OrionStarAI/Orion-14B-Chat
	"orion": "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n\nAssistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: </s>",
	// test: openchat/openchat-3.5-0106
	"openchat": "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant:    I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question<|end_of_turn|>GPT4 Correct Assistant:",
	// test: eachadea/vicuna-13b-1.1
	"vicuna": "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:",
	// test: Orca-Vicuna
	"vicuna-orca": "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:",
	// test: deepseek-ai/deepseek-coder-33b-instruct
	"deepseek": "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n",
	// test: CohereForAI/c4ai-command-r-plus
	// test: ibm-granite/granite-3.0-8b-instruct; granite-4.0 and 4.1 render
	// these roles the same (llama.cpp's test-chat-template)
	"granite":     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
	"granite-4.0": "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
	"granite-4.1": "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
	"command-r":   "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
}

func TestRenderMatchesLlamaCpp(t *testing.T) {
	if got, want := Names(), slices.Sorted(func(yield func(string) bool) {
		for n := range rendered {
			if !yield(n) {
				return
			}
		}
	}); !slices.Equal(got, want) {
		t.Errorf("templates %v, but expected renderings for %v", got, want)
	}
	for name, want := range rendered {
		tmpl, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.Name() != name {
			t.Errorf("ByName(%q).Name() = %q", name, tmpl.Name())
		}
		got, err := tmpl.Render(conversation, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want)
		}
	}
}

// Without the assistant prompt, a format that writes one drops exactly that
// suffix; the others (which always end ready for the reply) are unchanged.
func TestRenderWithoutAssistantPrompt(t *testing.T) {
	suffix := map[string]string{
		"chatml": "<|im_start|>assistant\n", "llama3": "<|start_header_id|>assistant<|end_header_id|>\n\n",
		"phi3": "<|assistant|>\n", "falcon3": "<|assistant|>\n", "zephyr": "<|assistant|>\n", "glmedge": "<|assistant|>",
		"phi4": "<|im_start|>assistant<|im_sep|>", "monarch": "<s>assistant\n", "gemma": "<start_of_turn>model\n",
		"openchat": "GPT4 Correct Assistant:", "vicuna": "ASSISTANT:", "vicuna-orca": "ASSISTANT:",
		"deepseek": "### Response:\n", "command-r": "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
		"granite": "<|start_of_role|>assistant<|end_of_role|>", "granite-4.0": "<|start_of_role|>assistant<|end_of_role|>",
		"granite-4.1": "<|start_of_role|>assistant<|end_of_role|>",
	}
	for _, name := range Names() {
		tmpl, _ := ByName(name)
		got, err := tmpl.Render(conversation, false)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := strings.CutSuffix(rendered[name], suffix[name])
		if !ok {
			t.Fatalf("%s: rendering does not end with %q", name, suffix[name])
		}
		if got != want {
			t.Errorf("%s without the assistant prompt:\n got %q\nwant %q", name, got, want)
		}
	}
}

// A conversation's rendering must extend the prompt of each earlier turn, or
// every turn would recompute the whole prompt instead of reusing the cached
// prefix: both the prompt that asked for an assistant message and the
// history that ends with one.
func TestRenderExtendsHistory(t *testing.T) {
	for _, name := range Names() {
		tmpl, _ := ByName(name)
		whole, _ := tmpl.Render(conversation, true)
		for n := 1; n < len(conversation); n++ {
			var prefix string
			switch conversation[n].Role {
			case "assistant":
				prefix, _ = tmpl.Render(conversation[:n], true)
			case "user":
				prefix, _ = tmpl.Render(conversation[:n], false)
			default:
				continue
			}
			if !strings.HasPrefix(whole, prefix) {
				t.Errorf("%s: the first %d messages render as %q, not a prefix of the whole %q", name, n, prefix, whole)
			}
		}
	}
}

func TestRenderRejectsBadRoles(t *testing.T) {
	tmpl, _ := ByName("chatml")
	for _, role := range []string{"", "User", "tool", "model", "system "} {
		msgs := []Message{{"user", "hi"}, {role, "x"}}
		_, err := tmpl.Render(msgs, true)
		if err == nil || !strings.Contains(err.Error(), "message 1") {
			t.Errorf("role %q: err = %v", role, err)
		}
	}
	if _, err := (Template{}).Render(conversation, true); err == nil {
		t.Error("zero Template rendered")
	}
}

func TestByNameUnknown(t *testing.T) {
	_, err := ByName("chatml2")
	if err == nil || !strings.Contains(err.Error(), `"chatml2"`) || !strings.Contains(err.Error(), "llama3") {
		t.Errorf("err = %v, want one naming the template and listing the known ones", err)
	}
}

func TestStopIsACopy(t *testing.T) {
	tmpl, _ := ByName("chatml")
	tmpl.Stop()[0] = "x"
	if tmpl.Stop()[0] != "<|im_end|>" {
		t.Error("Stop returned the template's own slice")
	}
	for _, name := range Names() {
		tmpl, _ := ByName(name)
		if len(tmpl.Stop()) == 0 {
			t.Errorf("%s has no stop strings", name)
		}
	}
}

// llama.cpp concatenates consecutive system messages in formats with no
// system role of their own.
func TestSystemMessagesConcatenate(t *testing.T) {
	msgs := []Message{{"system", "A."}, {"system", "B."}, {"user", "hi"}}
	for name, want := range map[string]string{
		"gemma": "<start_of_turn>user\nA.B.\n\nhi<end_of_turn>\n",
		"orion": "Human: A.B.\n\nhi\n\nAssistant: </s>",
	} {
		tmpl, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(msgs, false)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
}
