package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotok"
	"gotok/chat"
	"gotok/model/synth"
	"gotok/quant"
)

// cliInput runs the CLI in-process with stdin reading input.
func cliInput(t *testing.T, input string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(input))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// tinyModel writes the tiny preset, with chatTemplate as its
// tokenizer.chat_template unless that is empty.
func tinyModel(t *testing.T, chatTemplate string) string {
	t.Helper()
	w, err := synth.Generate(synth.Options{Shape: synth.Presets["tiny"], Name: "tiny", Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if chatTemplate != "" {
		w.Set("tokenizer.chat_template", chatTemplate)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runReply is what `gotok run` writes for the conversation msgs rendered in
// ChatML, without its closing newline: what chat must reply to that turn.
func runReply(t *testing.T, model string, msgs []chat.Message) string {
	t.Helper()
	tmpl, _ := chat.ByName("chatml")
	prompt, err := tmpl.Render(msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, "run", "-m", model, "-p", prompt, "--parse-special", "--temp", "0", "-n", "12", "--device", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(out, "\n")
}

// Two piped lines get the replies `gotok run` gives to the conversation so
// far, so the second turn saw the first, and the chat ends at EOF.
func TestChatPiped(t *testing.T) {
	model := tinyModel(t, "")
	q1, q2 := "hello", "how are you"
	r1 := runReply(t, model, []chat.Message{{Role: "user", Content: q1}})
	r2 := runReply(t, model, []chat.Message{{Role: "user", Content: q1}, {Role: "assistant", Content: r1}, {Role: "user", Content: q2}})
	if r1 == "" || r2 == "" || r1 == r2 {
		t.Fatalf("run replies %q and %q: want two different non-empty ones for the test to mean anything", r1, r2)
	}
	out, stderr, err := cliInput(t, q1+"\n"+q2+"\n", "chat", "-m", model, "--template", "chatml", "--temp", "0", "-n", "12", "--device", "cpu")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := "> " + r1 + "\n> " + r2 + "\n> \n"; out != want {
		t.Errorf("chat wrote\n%q\nwant\n%q", out, want)
	}
}

// /reset forgets the conversation, so the same line gets the same reply;
// /exit ends the chat before the lines after it.
func TestChatResetAndExit(t *testing.T) {
	model := tinyModel(t, "")
	r := runReply(t, model, []chat.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}})
	out, stderr, err := cliInput(t, "hi\n\n/reset\nhi\n/exit\nnot read\n",
		"chat", "-m", model, "--template", "chatml", "--system", "be brief", "--temp", "0", "-n", "12", "--device", "cpu")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := "> " + r + "\n> > > " + r + "\n> "; out != want {
		t.Errorf("chat wrote\n%q\nwant\n%q", out, want)
	}
}

// The model's own chat template is used when there is no --template; a
// model without one is an error that says to pass --template.
func TestChatTemplateFromModel(t *testing.T) {
	t.Setenv("GOTOK_MODEL", "")
	args := []string{"--temp", "0", "-n", "12", "--device", "cpu"}
	plain := tinyModel(t, "")
	_, _, err := cliInput(t, "hi\n", append([]string{"chat", "-m", plain}, args...)...)
	if err == nil || !strings.Contains(err.Error(), "--template") || !strings.Contains(err.Error(), "chatml") {
		t.Errorf("model without a chat template: err = %v", err)
	}
	withChatML := tinyModel(t, "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
	out, stderr, err := cliInput(t, "hi\n", append([]string{"chat", "-m", withChatML}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := "> " + runReply(t, plain, []chat.Message{{Role: "user", Content: "hi"}}) + "\n> \n"; out != want {
		t.Errorf("chat with the model's ChatML template wrote %q, want %q", out, want)
	}
	strange := tinyModel(t, "{{ messages }}")
	_, _, err = cliInput(t, "hi\n", append([]string{"chat", "-m", strange}, args...)...)
	if err == nil || !strings.Contains(err.Error(), "not recognized") || !strings.Contains(err.Error(), "--template") {
		t.Errorf("unrecognized chat template: err = %v", err)
	}
	for _, bad := range [][]string{
		{"chat", "-m", plain, "--template", "chatml3"},
		{"chat", "-m", plain, "--template", "chatml", "--top-p", "2"},
		{"chat", "--template", "chatml"}, // no model
	} {
		if _, _, err := cliInput(t, "hi\n", bad...); err == nil {
			t.Errorf("gotok %v: no error", bad)
		}
	}
}

// interruptOnReply delivers an interrupt when the first piece of the first
// reply is written, as Ctrl-C in the middle of a reply would. (It has no
// WriteString, so that io.WriteString comes through Write.)
type interruptOnReply struct {
	buf        bytes.Buffer
	interrupts chan os.Signal
	writes     int
}

func (w *interruptOnReply) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 2 && w.interrupts != nil { // the first was the "> " prompt
		w.interrupts <- os.Interrupt
		// The tiny model writes a whole reply in milliseconds: hold it
		// until the chat has taken the interrupt, as a person's Ctrl-C
		// would arrive long before the reply ends.
		for len(w.interrupts) > 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return w.buf.Write(p)
}

// An interrupt during a reply stops that reply, which is kept as far as it
// went, and the chat goes on to the next line.
func TestChatInterruptStopsReply(t *testing.T) {
	m, err := gotok.Load(tinyModel(t, ""), gotok.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tmpl, _ := chat.ByName("chatml")
	newSession := func(out *interruptOnReply) *chatSession {
		return &chatSession{model: m, tmpl: tmpl, out: out, errOut: &out.buf,
			opts: gotok.GenerateOptions{MaxTokens: 150, Stop: tmpl.Stop(), ParseSpecial: true}}
	}

	// Uninterrupted, the first reply runs to its 150 tokens.
	whole := newSession(&interruptOnReply{})
	if err := whole.run(context.Background(), strings.NewReader("hello\n"), nil); err != nil {
		t.Fatal(err)
	}
	full := whole.msgs[1].Content

	out := &interruptOnReply{interrupts: make(chan os.Signal, 1)}
	s := newSession(out)
	if err := s.run(context.Background(), strings.NewReader("hello\nagain\n"), out.interrupts); err != nil {
		t.Fatal(err)
	}
	if len(s.msgs) != 4 || s.msgs[2].Content != "again" {
		t.Fatalf("conversation after the interrupt: %q", s.msgs)
	}
	cut, second := s.msgs[1].Content, s.msgs[3].Content
	if len(cut) >= len(full)/2 || !strings.HasPrefix(full, cut) {
		t.Errorf("interrupted reply %q is not a short prefix of the whole %q", cut, full)
	}
	if !strings.Contains(out.buf.String(), "reply stopped") {
		t.Errorf("no notice that the reply stopped:\n%q", out.buf.String())
	}
	if second == "" {
		t.Error("no reply after the interrupted one")
	}
}
