package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"gotok/gguf"
	"gotok/tokenizer"
)

func newTokenizeCmd() *cobra.Command {
	var (
		model        string
		idsOnly      bool
		addSpecial   bool
		parseSpecial bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize -m MODEL [TEXT]",
		Short: "Print the tokens of a text with a model's tokenizer",
		Long: `tokenize prints the tokens of TEXT, or of standard input when TEXT is
omitted (byte for byte, trailing newline included), one per line as
id<TAB>'piece'. Non-printable characters in pieces are escaped.

BOS/EOS are added only with --add-special (as the model's add_bos_token /
add_eos_token say), and the text of special tokens such as <|im_start|> is
parsed as those tokens only with --parse-special.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, err := resolveModel(cmd.Context(), model, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var text string
			if len(args) == 1 {
				text = args[0]
			} else {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("tokenize: read standard input: %w", err)
				}
				text = string(b)
			}
			tok, err := loadTokenizer(model)
			if err != nil {
				return fmt.Errorf("tokenize: %w", err)
			}
			ids := tok.Encode(text, addSpecial, parseSpecial)
			w := bufio.NewWriter(cmd.OutOrStdout())
			if idsOnly {
				for i, id := range ids {
					if i > 0 {
						w.WriteByte(' ')
					}
					w.WriteString(strconv.Itoa(int(id)))
				}
				w.WriteByte('\n')
			} else {
				for _, id := range ids {
					fmt.Fprintf(w, "%d\t'%s'\n", id, escapePiece(tok.Piece(id)))
				}
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	addModelFlag(cmd, &model)
	f.BoolVar(&idsOnly, "ids", false, "print only the ids, space-separated on one line")
	f.BoolVar(&addSpecial, "add-special", false, "add BOS/EOS as the model's metadata asks")
	f.BoolVar(&parseSpecial, "parse-special", false, "match the text of special tokens (<|im_start|>, ...) as those tokens")
	return cmd
}

// loadTokenizer reads the tokenizer of a GGUF file.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(&f.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

// escapePiece writes a piece for a single-quoted display: printable
// characters as they are, others with Go escapes, and bytes that are not
// UTF-8 (part of a character split across byte tokens) as \xNN.
func escapePiece(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '"':
			b.WriteByte('"')
		default:
			q := strconv.QuoteRune(r) // 'x', '\n', '\'', '\u200b'
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}
