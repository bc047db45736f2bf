package tokenizer

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gotok/gguf"
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
			d := tok.NewStreamDecoder(true)
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

// FuzzFromGGUF builds tokenizers from arbitrary metadata (a model file's
// tokenizer.* keys: tokens, merges, types, scores, special ids, the
// pre-tokenizer) and runs them over arbitrary text: FromGGUF either fails
// or gives a tokenizer whose Encode and Decode never panic and whose ids
// are in its vocabulary.
func FuzzFromGGUF(f *testing.F) {
	f.Add(true, "a\x00b\x00ab\x00 \x00Ġ", "a b", []byte{1, 1, 1, 3, 1}, int32(3), int32(4), "", "ab ab")
	f.Add(false, "<unk>\x00<s>\x00</s>\x00▁a\x00b", "", []byte{2, 3, 3, 1, 1}, int32(1), int32(2), "", "a b")
	f.Add(true, "<|x|>\x00a\x00aa", "a a", []byte{3, 1, 1}, int32(-1), int32(0), "", "<|x|>aa")
	f.Add(false, "<unk>\x00<0x41>\x00▁\x00▁b", "", []byte{2, 6, 1, 1}, int32(0), int32(0), "", "A b\xff")
	f.Fuzz(func(t *testing.T, bpe bool, tokens, merges string, types []byte, bos, eos int32, pre, text string) {
		w := gguf.NewWriter()
		model := "llama"
		if bpe {
			model = "gpt2"
			w.Set(KeyMerges, strings.Split(merges, "\n"))
		} else {
			scores := make([]float32, len(types))
			for i, b := range types {
				scores[i] = float32(int8(b))
			}
			w.Set(KeyScores, scores)
		}
		w.Set(KeyModel, model)
		w.Set(KeyTokens, strings.Split(tokens, "\x00"))
		ts := make([]int32, len(types))
		for i, b := range types {
			ts[i] = int32(b % 8)
		}
		w.Set(KeyTokenType, ts)
		w.Set(KeyBOS, uint32(bos))
		w.Set(KeyEOS, uint32(eos))
		if pre != "" {
			w.Set(KeyPre, pre)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			return // the writer refused the metadata
		}
		file, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("the writer's file does not parse: %v", err)
		}
		tok, err := FromGGUF(&file.Metadata)
		if err != nil {
			return
		}
		for _, special := range []bool{false, true} {
			start := time.Now()
			ids := tok.Encode(text, special, special)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("Encode of %d bytes over %d tokens took %v", len(text), tok.VocabSize(), d)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside the vocabulary of %d", text, id, tok.VocabSize())
				}
			}
			tok.Decode(ids)
			d := tok.NewStreamDecoder(true)
			for _, id := range ids {
				d.Next(id)
			}
			d.Flush()
		}
	})
}
