package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"gotok/gguf"
	"gotok/tokenizer"
)

// writeTestVocab writes a small SentencePiece-style vocabulary: <unk>, <s>,
// </s>, the 256 byte tokens, then a few pieces.
func writeTestVocab(t *testing.T) string {
	t.Helper()
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{int32(tokenizer.TypeUnknown), int32(tokenizer.TypeControl), int32(tokenizer.TypeControl)}
	const hex = "0123456789ABCDEF"
	for b := 0; b < 256; b++ {
		tokens = append(tokens, "<0x"+hex[b>>4:b>>4+1]+hex[b&15:b&15+1]+">")
		types = append(types, int32(tokenizer.TypeByte))
	}
	scores := make([]float32, len(tokens))
	for i, p := range []string{"▁", "▁H", "i", "▁Hi", "é"} {
		tokens = append(tokens, p)
		types = append(types, int32(tokenizer.TypeNormal))
		scores = append(scores, float32(-i))
	}
	w := gguf.NewWriter()
	w.Set(tokenizer.KeyModel, "llama")
	w.Set(tokenizer.KeyTokens, tokens)
	w.Set(tokenizer.KeyTokenType, types)
	w.Set(tokenizer.KeyScores, scores)
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runTokenize runs "gotok tokenize" in-process with stdin.
func runTokenize(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newTokenizeCmd()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	return out.String(), err
}

func TestTokenizeCommand(t *testing.T) {
	model := writeTestVocab(t)
	const hi, sp, e = "262", "259", "263" // ▁Hi, ▁, é
	for _, c := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"pieces", "", []string{"-m", model, "Hi é"}, hi + "\t' Hi'\n" + sp + "\t' '\n" + e + "\t'é'\n"},
		{"ids", "", []string{"-m", model, "--ids", "Hi"}, hi + "\n"},
		{"stdin keeps its newline", "Hi\n", []string{"--model", model, "--ids"}, hi + " 13\n"},
		{"escapes", "\n\xff'", []string{"-m", model}, "259\t' '\n13\t'\\n'\n258\t'\\xff'\n42\t'\\''\n"},
		{"add special", "", []string{"-m", model, "--ids", "--add-special", "Hi"}, "1 " + hi + "\n"},
		{"special text is text", "", []string{"-m", model, "--ids", "</s>"}, sp + " 63 50 118 65\n"},
		{"parse special", "", []string{"-m", model, "--ids", "--parse-special", "</s>"}, "2\n"},
		{"empty", "", []string{"-m", model, "--ids"}, "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := runTokenize(t, c.stdin, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("output\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

func TestTokenizeModelFromEnvironment(t *testing.T) {
	t.Setenv("GOTOK_MODEL", "")
	if _, err := runTokenize(t, "", "Hi"); err == nil || !strings.Contains(err.Error(), "GOTOK_MODEL") {
		t.Errorf("no model: error %v", err)
	}
	t.Setenv("GOTOK_MODEL", writeTestVocab(t))
	if got, err := runTokenize(t, "", "--ids", "Hi"); err != nil || got != "262\n" {
		t.Errorf("model from GOTOK_MODEL: %q, %v", got, err)
	}
	if _, err := runTokenize(t, "", "-m", filepath.Join(t.TempDir(), "missing.gguf"), "Hi"); err == nil {
		t.Error("missing model file accepted")
	}
}
