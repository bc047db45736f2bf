package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gotok"
	"gotok/chat"
)

func newChatCmd() *cobra.Command {
	var (
		lf                   loadFlags
		sf                   sampleFlags
		system, templateName string
		n                    int
	)
	cmd := &cobra.Command{
		Use:   "chat [-m MODEL] [--system TEXT] [--template NAME]",
		Short: "Chat with an instruction-tuned model on stdin and stdout",
		Long: `chat reads one user message per line after the "> " prompt and streams the
model's reply. The conversation is kept and written out in the model's chat
format each turn; the engine reuses what it has already computed, so only
the new turn costs time. The format comes from the model's
tokenizer.chat_template (recognized as llama.cpp recognizes it), or from
--template, which takes llama.cpp's names: ` + strings.Join(chat.Names(), ", ") + `.

Ctrl-C stops the reply being written; at the prompt, Ctrl-C, Ctrl-D or
/exit ends the chat, and /reset starts the conversation over. With stdin
piped, chat answers each line in turn until the input ends.

Example:
  gotok chat -m SmolLM2-135M-Instruct.Q4_0.gguf --system "You are brief."`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				n = 0 // llama.cpp's -1: no limit
			}
			if err := sf.params(0).Validate(); err != nil {
				return err
			}
			if templateName != "" { // a bad name fails before the load
				if _, err := chat.ByName(templateName); err != nil {
					return err
				}
			}
			stderr := cmd.ErrOrStderr()
			m, loadTime, err := lf.load(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			defer m.Close()
			tmpl, err := chatTemplate(m, templateName)
			if err != nil {
				return err
			}
			params := sf.params(m.ContextLen())
			if lf.verbose {
				fmt.Fprintf(stderr, "gotok: chat template %s\n", tmpl.Name())
			}

			interrupts := make(chan os.Signal, 1)
			signal.Notify(interrupts, os.Interrupt)
			defer signal.Stop(interrupts)
			s := &chatSession{
				model:  m,
				tmpl:   tmpl,
				opts:   gotok.GenerateOptions{MaxTokens: n, Sample: params, Stop: tmpl.Stop(), ParseSpecial: true},
				system: system,
				out:    cmd.OutOrStdout(),
				errOut: stderr,
			}
			if lf.verbose {
				s.loadTime, s.stats = loadTime, true
			}
			return s.run(cmd.Context(), cmd.InOrStdin(), interrupts)
		},
	}
	f := cmd.Flags()
	lf.add(f)
	sf.add(f)
	f.StringVar(&system, "system", "", "system message that opens the conversation")
	f.StringVar(&templateName, "template", "", "chat format, by llama.cpp's name (default: from the model's chat template)")
	f.IntVarP(&n, "n-predict", "n", 1024, "most tokens per reply (0 or -1: until the context is full)")
	return cmd
}

// chatTemplate is the template called name, or else the one the model's
// tokenizer.chat_template is written in.
func chatTemplate(m *gotok.Model, name string) (chat.Template, error) {
	if name != "" {
		return chat.ByName(name)
	}
	jinja, ok := m.ChatTemplate()
	if !ok {
		return chat.Template{}, fmt.Errorf("the model has no chat template (tokenizer.chat_template): pass --template NAME, one of %s", strings.Join(chat.Names(), ", "))
	}
	t, err := chat.Detect(jinja)
	if err != nil {
		return chat.Template{}, fmt.Errorf("%w; pass --template NAME, one of %s", err, strings.Join(chat.Names(), ", "))
	}
	return t, nil
}

// chatSession is one conversation with a model.
type chatSession struct {
	model       *gotok.Model
	tmpl        chat.Template
	opts        gotok.GenerateOptions
	system      string
	out, errOut io.Writer
	stats       bool // print each reply's statistics
	loadTime    time.Duration

	msgs []chat.Message
}

// run reads user lines from in until it ends, "/exit", or an interrupt at
// the prompt; an interrupt during a reply ends only that reply.
func (s *chatSession) run(ctx context.Context, in io.Reader, interrupts <-chan os.Signal) error {
	// Lines are read in the background so that an interrupt at the prompt
	// is noticed while a terminal read blocks.
	lines := make(chan string)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
		readErr <- sc.Err()
	}()

	s.reset()
	for {
		io.WriteString(s.out, "> ")
		var line string
		select {
		case l, ok := <-lines:
			if !ok { // Ctrl-D or the end of piped input
				fmt.Fprintln(s.out)
				if err := <-readErr; err != nil {
					return fmt.Errorf("chat: reading input: %w", err)
				}
				return nil
			}
			line = strings.TrimSuffix(l, "\r")
		case <-interrupts:
			fmt.Fprintln(s.out)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "/exit":
			return nil
		case "/reset":
			s.reset()
			continue
		}
		if err := s.reply(ctx, line, interrupts); err != nil {
			return err
		}
	}
}

// reset clears the conversation back to the system message.
func (s *chatSession) reset() {
	s.msgs = s.msgs[:0]
	if s.system != "" {
		s.msgs = append(s.msgs, chat.Message{Role: "system", Content: s.system})
	}
}

// reply adds the user's message, streams the model's answer and adds it too.
// A conversation that has outgrown the context is said so and left as it
// was; any other failure ends the chat.
func (s *chatSession) reply(ctx context.Context, text string, interrupts <-chan os.Signal) error {
	s.msgs = append(s.msgs, chat.Message{Role: "user", Content: text})
	prompt, err := s.tmpl.Render(s.msgs, true)
	if err != nil {
		s.msgs = s.msgs[:len(s.msgs)-1]
		return err
	}
	if n := len(s.model.Encode(prompt, s.opts)); n >= s.model.ContextLen() {
		s.msgs = s.msgs[:len(s.msgs)-1]
		fmt.Fprintf(s.errOut, "gotok: the conversation (%d tokens) no longer fits the context of %d: /reset to start over, or raise --ctx\n", n, s.model.ContextLen())
		return nil
	}

	replyCtx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		select {
		case <-interrupts:
			cancel()
		case <-finished:
		}
	}()
	var answer strings.Builder
	st, err := s.model.Generate(replyCtx, prompt, s.opts, func(piece string) error {
		answer.WriteString(piece)
		_, err := io.WriteString(s.out, piece)
		return err
	})
	close(finished)
	cancel()
	fmt.Fprintln(s.out)
	if err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() == nil) {
		return err
	}
	// An interrupted reply is kept as far as it went: it is what the model
	// said, and what its cache holds.
	s.msgs = append(s.msgs, chat.Message{Role: "assistant", Content: answer.String()})
	switch st.StopReason {
	case gotok.StopCancelled:
		fmt.Fprintln(s.errOut, "gotok: reply stopped")
	case gotok.StopContext:
		fmt.Fprintln(s.errOut, "gotok: the context is full: /reset to start over, or raise --ctx")
	}
	if s.stats {
		printStats(s.errOut, s.model, s.loadTime, st)
	}
	return nil
}
