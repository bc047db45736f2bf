package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Jinja is a model's own chat template (a GGUF file's
// tokenizer.chat_template), rendered by a Jinja engine (gonja) set up as
// transformers' apply_chat_template sets up jinja2: blocks trimmed and
// left-stripped, raise_exception and strftime_now as globals, tojson
// writing Python's json.dumps spacing, the {% generation %} block, and
// Python's signatures for the str methods templates call
// (jinja_python.go). It renders any template the engine can run, not only
// the formats llama.cpp builds in; testdata/conformance.json holds the
// real templates it is checked on.
type Jinja struct {
	tmpl   *exec.Template
	tokens SpecialTokens
}

// SpecialTokens are the texts transformers passes to a chat template as
// bos_token and eos_token (from the tokenizer's special tokens map).
type SpecialTokens struct {
	BOS, EOS string
}

const jinjaName = "/chat_template.jinja"

// ParseJinja compiles a chat template. It can name no other template (no
// include, import or extends), and what could run without end is bounded
// (jinja_limits.go). Template text
// gonja cannot parse but has an exact rewrite (gonjaRewrites: Gemma 3's)
// is rewritten first.
func ParseJinja(src string, tokens SpecialTokens) (j *Jinja, err error) {
	defer func() {
		// gonja's parser is not ours to trust with every input: a template
		// it cannot handle must be an error, never a crash of the caller.
		if r := recover(); r != nil {
			j, err = nil, fmt.Errorf("chat: parse template: %v", r)
		}
	}()
	src = rewriteForGonja(src)
	if err := checkNesting(src); err != nil {
		return nil, err
	}
	loader, err := loaders.NewMemoryLoader(map[string]string{jinjaName: src})
	if err != nil {
		return nil, fmt.Errorf("chat: parse template: %w", err)
	}
	cfg := config.New()
	cfg.TrimBlocks = true      // as transformers' ImmutableSandboxedEnvironment
	cfg.LeftStripBlocks = true // (trim_blocks=True, lstrip_blocks=True)
	cfg.KeepTrailingNewline = false
	t, err := exec.NewTemplate(jinjaName, cfg, loader, jinjaEnvironment())
	if err != nil {
		// gonja quotes the whole template in its message; keep the reason.
		return nil, fmt.Errorf("chat: parse template: %s", strings.Replace(err.Error(), "'"+src+"'", "", 1))
	}
	guardRepeats(t.Root())
	return &Jinja{tmpl: t, tokens: tokens}, nil
}

// jinjaEnvironment is gonja's builtins plus what transformers adds. It is
// built per template: gonja's sets are mutable and shared.
func jinjaEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{})
	filters.Update(builtins.Filters)
	filters.Replace("tojson", filterToJSON)
	filters.Replace("items", filterItems)
	filters.Replace("dictsort", filterDictSort)
	limitWidthFilters(filters)
	globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	globals.Set("strftime_now", strftimeNow)
	globals.Set("range", rangeList)
	globals.Set(mulCheckName, mulCheck)
	return &exec.Environment{
		Context:           globals,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: controlStructures(),
		Methods:           methods(),
	}
}

// Render writes msgs as the template does under transformers'
// apply_chat_template(messages, add_generation_prompt=addAssistant).
// A template that raises (raise_exception, an unknown role) or fails to run
// is an error.
func (j *Jinja) Render(msgs []Message, addAssistant bool) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat: render template: %v", r)
		}
	}()
	// Each message is a dict in the order a client sends it (role, then
	// content), as transformers hands the request's dicts to the template:
	// tojson writes the keys in that order.
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = &exec.Dict{Pairs: []*exec.Pair{
			{Key: exec.AsValue("role"), Value: exec.AsValue(m.Role)},
			{Key: exec.AsValue("content"), Value: exec.AsValue(m.Content)},
		}}
	}
	// raise_exception is bound per render, to carry its message out:
	// gonja's error wraps it as text.
	var raised error
	raise := func(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
		msg := "raise_exception called"
		if len(params.Args) > 0 {
			msg = params.Args[0].String()
		}
		raised = fmt.Errorf("%w: %s", ErrTemplateRaised, msg)
		return "", raised
	}
	data := exec.NewContext(map[string]any{
		"raise_exception":       raise,
		"messages":              list,
		"add_generation_prompt": addAssistant,
		"bos_token":             j.tokens.BOS,
		"eos_token":             j.tokens.EOS,
		"tools":                 nil,
		"documents":             nil,
		loopBudgetName:          &loopBudget{},
	})
	w := &limitedWriter{max: outputMax}
	err = j.tmpl.Execute(w, data)
	out = w.b.String()
	if raised != nil {
		return "", raised
	}
	if err != nil {
		return "", fmt.Errorf("chat: render template: %w", shortError(err))
	}
	return out, nil
}

// ErrTemplateRaised is the error of a template that called
// raise_exception: it refuses the conversation (roles out of order, a role
// it does not know), as transformers would.
var ErrTemplateRaised = errors.New("chat template refused the conversation")

// strftimeNow is transformers' strftime_now: the local time in a Python
// strftime format (templates write today's date into system prompts).
func strftimeNow(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
	if len(params.Args) != 1 {
		return "", errors.New("strftime_now takes one format argument")
	}
	return strftime(time.Now(), params.Args[0].String()), nil
}

// strftime formats t with the Python directives templates use.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case '-':
			if i+1 < len(format) && format[i+1] == 'd' { // %-d: glibc's unpadded day
				i++
				fmt.Fprintf(&b, "%d", t.Day())
			} else {
				b.WriteString("%-")
			}
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
