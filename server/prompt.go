package server

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"gotok/chat"
	"gotok/tokenizer"
)

// prompter writes a conversation as the model's prompt: with the model's
// own Jinja chat template when it renders, else with the built-in format
// chat/ recognizes it as (or the configured fallback).
type prompter struct {
	jinja    *chat.Jinja
	builtin  chat.Template
	hasBuilt bool
	bos      string // stripped from a rendered prompt: the tokenizer adds it
	log      *slog.Logger
}

// newPrompter prepares the template: src is the model's
// tokenizer.chat_template ("" for none), override a Jinja text or built-in
// name that replaces it, fallback the built-in format used when neither
// renders.
func newPrompter(src, override, fallback string, tok *tokenizer.Tokenizer, log *slog.Logger) (*prompter, error) {
	p := &prompter{log: log}
	if override != "" {
		if t, err := chat.ByName(override); err == nil {
			p.builtin, p.hasBuilt = t, true
			log.Info("chat template", "used", "built-in", "format", t.Name(), "source", "option")
			return p, nil
		}
		if !isJinja(override) {
			return nil, fmt.Errorf("chat template %q is neither a built-in format (%s) nor a Jinja template (no {%% or {{)",
				head(override, 40), strings.Join(chat.Names(), ", "))
		}
		src = override
	}
	if tok.AddBOS() && tok.BOS() >= 0 {
		p.bos = tok.Token(tok.BOS())
	}
	if src != "" {
		tokens := chat.SpecialTokens{BOS: tok.Token(tok.BOS()), EOS: tok.Token(tok.EOS())}
		j, err := chat.ParseJinja(src, tokens)
		switch {
		case err != nil && override != "":
			// The operator chose this template: a fallback would serve
			// prompts in a format nobody asked for.
			return nil, fmt.Errorf("chat template: %w", err)
		case err != nil:
			log.Warn("chat template does not parse as Jinja; using a built-in format", "err", err)
		default:
			p.jinja = j
		}
		if t, err := chat.Detect(src); err == nil {
			p.builtin, p.hasBuilt = t, true
		}
	}
	if !p.hasBuilt && fallback != "" {
		t, err := chat.ByName(fallback)
		if err != nil {
			return nil, err
		}
		p.builtin, p.hasBuilt = t, true
	}
	switch {
	case p.jinja != nil:
		log.Info("chat template", "used", "jinja", "fallback", p.builtin.Name())
	case p.hasBuilt:
		log.Info("chat template", "used", "built-in", "format", p.builtin.Name())
	default:
		log.Warn("no chat template: /v1/chat/completions is refused")
	}
	return p, nil
}

// render returns the prompt and the stop strings its format needs.
func (p *prompter) render(msgs []chat.Message) (string, []string, error) {
	if p.jinja != nil {
		out, err := p.jinja.Render(msgs, true)
		if err == nil {
			// The template writes BOS itself; the tokenizer adds it too.
			return strings.TrimPrefix(out, p.bos), nil, nil
		}
		if errors.Is(err, chat.ErrTemplateRaised) {
			// The template refuses the conversation: another format would
			// give the model a prompt it was not trained on.
			return "", nil, invalid("messages", "%v", err)
		}
		if !p.hasBuilt {
			return "", nil, fmt.Errorf("chat template: %w", err)
		}
		p.log.Warn("chat template failed to render; using the built-in format", "format", p.builtin.Name(), "err", err)
	}
	if !p.hasBuilt {
		return "", nil, withCode(invalid("messages", "the model has no chat template: use /v1/completions, or start the server with --chat-template"), "no_chat_template")
	}
	out, err := p.builtin.Render(msgs, true)
	if err != nil {
		return "", nil, invalid("messages", "%v", err)
	}
	return out, p.builtin.Stop(), nil
}

// isJinja reports whether a template text has a Jinja tag or expression:
// a value without one is a mistyped built-in name, not a template.
func isJinja(s string) bool {
	return strings.Contains(s, "{%") || strings.Contains(s, "{{")
}

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
