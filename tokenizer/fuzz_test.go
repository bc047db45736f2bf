package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncode runs llama.cpp's test vocabularies over arbitrary text: no
// panic, every id in the vocabulary, the stream decoder's output the
// pieces joined with each byte that is not UTF-8 as U+FFFD (it strips no
// prefix space), and for the byte-level BPE vocabularies (no
// normalization) valid UTF-8 text back from Decode as it went in.
func FuzzEncode(f *testing.F) {
	dir := filepath.Join(sharedDir(f), "tokenizer-tests")
	names := []string{"gpt-2", "starcoder", "llama-spm", "phi-3"}
	toks := make([]*Tokenizer, len(names))
	for i, name := range names {
		base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
		toks[i] = loadGGUFTokenizer(f, base)
		for _, c := range readVocabCases(f, base+".inp", base+".out") {
			f.Add(c.text, false)
		}
	}
	f.Add("<s>hello</s> <|endoftext|>", true)
	f.Add("\xff\xfe a\x00b \u00e9\u0301 \U0001F600", false)
	f.Fuzz(func(t *testing.T, text string, special bool) {
		for i, tok := range toks {
			ids := tok.Encode(text, special, special)
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("%s: Encode(%q) gave id %d outside the vocabulary of %d", names[i], text, id, tok.VocabSize())
				}
			}
			whole := tok.Decode(ids)
			var raw strings.Builder
			d := tok.NewStreamDecoder()
			var b strings.Builder
			for _, id := range ids {
				raw.WriteString(tok.Piece(id))
				b.WriteString(d.Next(id))
			}
			b.WriteString(d.Flush())
			if want := validUTF8Reference(raw.String()); b.String() != want {
				t.Fatalf("%s: the stream decoder gave %q for %q, want %q", names[i], b.String(), text, want)
			}
			if !strings.HasSuffix(raw.String(), whole) || len(raw.String())-len(whole) > 1 {
				t.Fatalf("%s: Decode gave %q for %q, the pieces %q", names[i], whole, text, raw.String())
			}
			if i < 2 && !special && utf8.ValidString(text) && whole != text {
				t.Fatalf("%s: Decode(Encode(%q)) = %q", names[i], text, whole)
			}
		}
	})
}
