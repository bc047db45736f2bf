package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gotok/gguf"
)

// vocabCase is one input of llama.cpp's tokenizer test sets with its
// expected ids (models/ggml-vocab-*.gguf.inp / .out).
type vocabCase struct {
	text string
	want []int32
}

func readVocabCases(t testing.TB, inp, out string) []vocabCase {
	t.Helper()
	in, err := os.ReadFile(inp)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(in), "\n__ggml_vocab_test__\n")
	if texts[len(texts)-1] == "" { // the file ends with a separator
		texts = texts[:len(texts)-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(exp), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s has %d inputs, %s has %d lines", inp, len(texts), out, len(lines))
	}
	cases := make([]vocabCase, len(texts))
	for i, text := range texts {
		ids := []int32{}
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s line %d: %v", out, i+1, err)
			}
			ids = append(ids, int32(id))
		}
		cases[i] = vocabCase{text, ids}
	}
	return cases
}

func loadGGUFTokenizer(t testing.TB, path string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(&f.Metadata)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tok
}

// checkVocabCases encodes every case without special tokens, as llama.cpp's
// test-tokenizer-0 does, and checks that decoding gives the input back.
func checkVocabCases(t *testing.T, tok *Tokenizer, cases []vocabCase) {
	t.Helper()
	for i, c := range cases {
		got := tok.Encode(c.text, false, false)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("case %d %q:\n got %v\nwant %v", i, c.text, got, c.want)
			continue
		}
		if back := tok.Decode(got); back != c.text {
			t.Errorf("case %d: Decode(Encode(%q)) = %q", i, c.text, back)
		}
	}
}

func TestLlamaCppVocabs(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "tokenizer-tests")
	for _, name := range []string{"gpt-2", "starcoder", "llama-spm", "phi-3"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
			tok := loadGGUFTokenizer(t, base)
			checkVocabCases(t, tok, readVocabCases(t, base+".inp", base+".out"))
		})
	}
}

// importSmolLM2 builds the SmolLM2 tokenizer from its tokenizer.json through
// ImportHF, SetMetadata, a GGUF file and FromGGUF.
func importSmolLM2(t testing.TB) *Tokenizer {
	t.Helper()
	js, err := os.ReadFile(filepath.Join(sharedDir(t), "tokenizer-tests", "smollm2-135m-instruct", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := ImportHF(js)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	v.SetMetadata(w)
	path := filepath.Join(t.TempDir(), "smollm2-vocab.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return loadGGUFTokenizer(t, path)
}

func TestLlamaCppVocabSmolLM(t *testing.T) {
	tok := importSmolLM2(t)
	base := filepath.Join(sharedDir(t), "tokenizer-tests", "ggml-vocab-smollm.gguf")
	checkVocabCases(t, tok, readVocabCases(t, base+".inp", base+".out"))
}
