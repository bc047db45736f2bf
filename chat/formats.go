package chat

import "strings"

// templates holds the formats gotok renders, each as llama.cpp's
// llm_chat_apply_template writes it, byte for byte. Roles are already
// checked to be system, user or assistant, so "not system or user" means
// assistant. ByName fills in the name from the key. It is never written.
var templates = map[string]Template{
	"chatml": {render: chatML, stop: []string{"<|im_end|>", "<|im_start|>"}},

	"llama2":           {render: llama2(false, false, false), stop: llama2Stop},
	"llama2-sys":       {render: llama2(true, false, false), stop: llama2Stop},
	"llama2-sys-bos":   {render: llama2(true, true, false), stop: llama2Stop},
	"llama2-sys-strip": {render: llama2(true, false, true), stop: llama2Stop},

	"mistral-v1":        {render: mistral(" ", " ", false), stop: llama2Stop},
	"mistral-v3":        {render: mistral("", " ", true), stop: llama2Stop},
	"mistral-v3-tekken": {render: mistral("", "", false), stop: llama2Stop},
	"mistral-v7":        {render: mistralV7(" "), stop: llama2Stop},
	"mistral-v7-tekken": {render: mistralV7(""), stop: llama2Stop},

	"llama3":   {render: llama3, stop: []string{"<|eot_id|>", "<|start_header_id|>"}},
	"phi3":     {render: roleTags("\n", "<|end|>\n", "<|assistant|>\n"), stop: []string{"<|end|>", "<|user|>"}},
	"falcon3":  {render: roleTags("\n", "\n", "<|assistant|>\n"), stop: []string{"<|user|>"}},
	"zephyr":   {render: roleTags("\n", "<|endoftext|>\n", "<|assistant|>\n"), stop: []string{"<|endoftext|>", "<|user|>"}},
	"glmedge":  {render: roleTags("\n", "", "<|assistant|>"), stop: []string{"<|user|>"}},
	"phi4":     {render: phi4, stop: []string{"<|im_end|>", "<|im_start|>"}},
	"monarch":  {render: monarch, stop: []string{"</s>"}},
	"gemma":    {render: gemma, stop: []string{"<end_of_turn>", "<start_of_turn>"}},
	"orion":    {render: orion, stop: []string{"</s>", "Human:"}},
	"openchat": {render: openChat, stop: []string{"<|end_of_turn|>", "GPT4 Correct User:"}},

	"vicuna":      {render: vicuna(""), stop: []string{"</s>", "USER:"}},
	"vicuna-orca": {render: vicuna("SYSTEM: "), stop: []string{"</s>", "USER:"}},

	"deepseek":  {render: deepSeek, stop: []string{"<|EOT|>", "### Instruction:"}},
	"command-r": {render: commandR, stop: []string{"<|END_OF_TURN_TOKEN|>"}},

	// IBM Granite 3.x and 4.x differ only in tool-call roles, which gotok
	// does not take.
	"granite":     {render: granite, stop: graniteStop},
	"granite-4.0": {render: granite, stop: graniteStop},
	"granite-4.1": {render: granite, stop: graniteStop},
}

var graniteStop = []string{"<|end_of_text|>", "<|start_of_role|>"}

var llama2Stop = []string{"</s>", "[INST]"}

func chatML(b *strings.Builder, msgs []Message, addAssistant bool) {
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	if addAssistant {
		b.WriteString("<|im_start|>assistant\n")
	}
}

// llama2 writes "[INST] … [/INST]" turns. The variants: a system message in
// <<SYS>> (else it is written bare before the first user message), <s>
// before each later [INST], and messages trimmed.
func llama2(system, bosInside, strip bool) func(*strings.Builder, []Message, bool) {
	return func(b *strings.Builder, msgs []Message, _ bool) {
		// The first [INST] goes without <s>: the tokenizer adds BOS.
		b.WriteString("[INST] ")
		inTurn := true
		for _, m := range msgs {
			content := m.Content
			if strip {
				content = trim(content)
			}
			if !inTurn {
				inTurn = true
				if bosInside {
					b.WriteString("<s>")
				}
				b.WriteString("[INST] ")
			}
			switch m.Role {
			case "system":
				if system {
					b.WriteString("<<SYS>>\n" + content + "\n<</SYS>>\n\n")
				} else {
					b.WriteString(content + "\n")
				}
			case "user":
				b.WriteString(content + " [/INST]")
			default:
				b.WriteString(content + "</s>")
				inTurn = false
			}
		}
	}
}

// mistral writes Mistral's official v1, v3 and v3-tekken formats, which
// differ only in spacing and in trimming the assistant's messages.
func mistral(lead, trail string, trimAssistant bool) func(*strings.Builder, []Message, bool) {
	return func(b *strings.Builder, msgs []Message, _ bool) {
		inTurn := false
		for _, m := range msgs {
			if !inTurn {
				b.WriteString(lead + "[INST]" + trail)
				inTurn = true
			}
			switch m.Role {
			case "system":
				b.WriteString(m.Content + "\n\n")
			case "user":
				b.WriteString(m.Content + lead + "[/INST]")
			default:
				content := m.Content
				if trimAssistant {
					content = trim(content)
				}
				b.WriteString(trail + content + "</s>")
				inTurn = false
			}
		}
	}
}

func mistralV7(space string) func(*strings.Builder, []Message, bool) {
	return func(b *strings.Builder, msgs []Message, _ bool) {
		for _, m := range msgs {
			switch m.Role {
			case "system":
				b.WriteString("[SYSTEM_PROMPT]" + space + m.Content + "[/SYSTEM_PROMPT]")
			case "user":
				b.WriteString("[INST]" + space + m.Content + "[/INST]")
			default:
				b.WriteString(space + m.Content + "</s>")
			}
		}
	}
}

func llama3(b *strings.Builder, msgs []Message, addAssistant bool) {
	for _, m := range msgs {
		b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + trim(m.Content) + "<|eot_id|>")
	}
	if addAssistant {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
}

// roleTags writes "<|role|>" + sep + content + end per message, the shape
// shared by Phi-3, Falcon 3, Zephyr and GLM-Edge.
func roleTags(sep, end, assistant string) func(*strings.Builder, []Message, bool) {
	return func(b *strings.Builder, msgs []Message, addAssistant bool) {
		for _, m := range msgs {
			b.WriteString("<|" + m.Role + "|>" + sep + m.Content + end)
		}
		if addAssistant {
			b.WriteString(assistant)
		}
	}
}

func granite(b *strings.Builder, msgs []Message, addAssistant bool) {
	for _, m := range msgs {
		b.WriteString("<|start_of_role|>" + m.Role + "<|end_of_role|>" + m.Content + "<|end_of_text|>\n")
	}
	if addAssistant {
		b.WriteString("<|start_of_role|>assistant<|end_of_role|>")
	}
}

func phi4(b *strings.Builder, msgs []Message, addAssistant bool) {
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "<|im_sep|>" + m.Content + "<|im_end|>")
	}
	if addAssistant {
		b.WriteString("<|im_start|>assistant<|im_sep|>")
	}
}

// monarch puts <s> inside the history, except before the first message,
// whose BOS the tokenizer adds.
func monarch(b *strings.Builder, msgs []Message, addAssistant bool) {
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("<s>")
		}
		b.WriteString(m.Role + "\n" + m.Content + "</s>\n")
	}
	if addAssistant {
		b.WriteString("<s>assistant\n")
	}
}

// gemma has no system role: the system message is put at the top of the
// next user turn. The assistant is "model".
func gemma(b *strings.Builder, msgs []Message, addAssistant bool) {
	system := ""
	for _, m := range msgs {
		role := m.Role
		switch role {
		case "system":
			system += trim(m.Content) // llama.cpp concatenates system messages
			continue
		case "assistant":
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if system != "" && role != "model" {
			b.WriteString(system + "\n\n")
			system = ""
		}
		b.WriteString(trim(m.Content) + "<end_of_turn>\n")
	}
	if addAssistant {
		b.WriteString("<start_of_turn>model\n")
	}
}

// orion has no system role either: the system message goes at the top of the
// next user turn.
func orion(b *strings.Builder, msgs []Message, _ bool) {
	system := ""
	for _, m := range msgs {
		switch m.Role {
		case "system":
			system += m.Content // llama.cpp concatenates system messages
		case "user":
			b.WriteString("Human: ")
			if system != "" {
				b.WriteString(system + "\n\n")
				system = ""
			}
			b.WriteString(m.Content + "\n\nAssistant: </s>")
		default:
			b.WriteString(m.Content + "</s>")
		}
	}
}

func openChat(b *strings.Builder, msgs []Message, addAssistant bool) {
	for _, m := range msgs {
		if m.Role == "system" {
			b.WriteString(m.Content + "<|end_of_turn|>")
			continue
		}
		// "user" → "User": roles are ASCII.
		role := strings.ToUpper(m.Role[:1]) + m.Role[1:]
		b.WriteString("GPT4 Correct " + role + ": " + m.Content + "<|end_of_turn|>")
	}
	if addAssistant {
		b.WriteString("GPT4 Correct Assistant:")
	}
}

// vicuna writes the system message bare, or after systemPrefix with one
// newline (the Orca variant).
func vicuna(systemPrefix string) func(*strings.Builder, []Message, bool) {
	return func(b *strings.Builder, msgs []Message, addAssistant bool) {
		for _, m := range msgs {
			switch m.Role {
			case "system":
				if systemPrefix != "" {
					b.WriteString(systemPrefix + m.Content + "\n")
				} else {
					b.WriteString(m.Content + "\n\n")
				}
			case "user":
				b.WriteString("USER: " + m.Content + "\n")
			default:
				b.WriteString("ASSISTANT: " + m.Content + "</s>\n")
			}
		}
		if addAssistant {
			b.WriteString("ASSISTANT:")
		}
	}
}

func deepSeek(b *strings.Builder, msgs []Message, addAssistant bool) {
	for _, m := range msgs {
		switch m.Role {
		case "system":
			b.WriteString(m.Content)
		case "user":
			b.WriteString("### Instruction:\n" + m.Content + "\n")
		default:
			b.WriteString("### Response:\n" + m.Content + "\n<|EOT|>\n")
		}
	}
	if addAssistant {
		b.WriteString("### Response:\n")
	}
}

func commandR(b *strings.Builder, msgs []Message, addAssistant bool) {
	for _, m := range msgs {
		tag := "<|CHATBOT_TOKEN|>"
		switch m.Role {
		case "system":
			tag = "<|SYSTEM_TOKEN|>"
		case "user":
			tag = "<|USER_TOKEN|>"
		}
		b.WriteString("<|START_OF_TURN_TOKEN|>" + tag + trim(m.Content) + "<|END_OF_TURN_TOKEN|>")
	}
	if addAssistant {
		b.WriteString("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
	}
}
