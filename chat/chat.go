// Package chat turns a conversation into the prompt text a chat model was
// trained on, two ways. ParseJinja runs the model's own
// tokenizer.chat_template with a Jinja engine, as transformers does (any
// template, exactly as written). The fixed prompt formats llama.cpp builds
// in (src/llama-chat.cpp) are the fallback: Detect picks the format from a
// template by its markers, ByName by llama.cpp's name for it, and Render
// writes the prompt.
//
//	j, err := chat.ParseJinja(jinja, chat.SpecialTokens{BOS: "<s>", EOS: "</s>"})
//	prompt, err := j.Render([]chat.Message{{Role: "user", Content: "Hi"}}, true)
//
//	t, err := chat.Detect(jinja)
//	prompt, err := t.Render([]chat.Message{{Role: "user", Content: "Hi"}}, true)
//
// The prompt holds special-token text such as "<|im_start|>", so it must be
// tokenized with special tokens parsed (gotok.GenerateOptions.ParseSpecial).
package chat

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Message is one turn of a conversation. Role is "system", "user" or
// "assistant".
type Message struct {
	Role, Content string
}

// Template is a chat prompt format.
type Template struct {
	name   string
	render func(b *strings.Builder, msgs []Message, addAssistant bool)
	stop   []string
}

// Name is llama.cpp's name for the format, as ByName takes it.
func (t Template) Name() string { return t.name }

// Stop returns the texts that end an assistant turn in this format: its
// end-of-turn marker and, where it is plain text, the start of the next
// user turn. A model whose vocabulary has the marker as an end-of-generation
// token stops there anyway; one that spells it out needs these as stop
// strings.
func (t Template) Stop() []string { return slices.Clone(t.stop) }

// Render writes msgs in the template's format. With addAssistant the prompt
// ends with the opening of an assistant turn, for the model to continue;
// formats that always end ready for the reply ignore it, as in llama.cpp.
func (t Template) Render(msgs []Message, addAssistant bool) (string, error) {
	if t.render == nil {
		return "", errors.New("chat: render with the zero Template")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return "", fmt.Errorf("chat: message %d has role %q (want system, user or assistant)", i, m.Role)
		}
	}
	var b strings.Builder
	t.render(&b, msgs, addAssistant)
	return b.String(), nil
}

// ByName returns the template llama.cpp calls name (as its --chat-template
// takes it).
func ByName(name string) (Template, error) {
	if t, ok := templates[name]; ok {
		t.name = name
		return t, nil
	}
	return Template{}, fmt.Errorf("chat: unknown template %q (have %s)", name, strings.Join(Names(), ", "))
}

// Names lists the templates ByName knows, sorted.
func Names() []string {
	var names []string
	for n := range templates {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// trim removes C isspace characters at both ends, as llama.cpp's trim does.
func trim(s string) string { return strings.Trim(s, " \t\n\v\f\r") }
