package tokenizer

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"gotok/gguf"
)

// parseMetadata writes the keys set by set into a GGUF image and reads it
// back, as FromGGUF will see them in a file.
func parseMetadata(t testing.TB, set func(w *gguf.Writer)) *gguf.Metadata {
	t.Helper()
	w := gguf.NewWriter()
	set(w)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return &f.Metadata
}

// trainBPE learns k byte-level BPE merges from corpus the textbook way
// (repeatedly merge the most frequent adjacent pair), giving a small but
// realistic vocabulary: the 256 byte tokens first, then one per merge.
func trainBPE(corpus []string, k int) (tokens, merges []string) {
	for b := 0; b < 256; b++ {
		tokens = append(tokens, byteToUTF8s[b])
	}
	words := make([][]string, len(corpus))
	for i, w := range corpus {
		for j := 0; j < len(w); j++ {
			words[i] = append(words[i], byteToUTF8s[w[j]])
		}
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		seen[tok] = true
	}
	for len(merges) < k {
		counts := map[[2]string]int{}
		var best [2]string
		bestCount := 0
		for _, w := range words {
			for j := 0; j+1 < len(w); j++ {
				p := [2]string{w[j], w[j+1]}
				counts[p]++
				if c := counts[p]; c > bestCount || c == bestCount && p[0]+" "+p[1] < best[0]+" "+best[1] {
					best, bestCount = p, c
				}
			}
		}
		if bestCount == 0 {
			break
		}
		merges = append(merges, best[0]+" "+best[1])
		if joined := best[0] + best[1]; !seen[joined] {
			seen[joined] = true
			tokens = append(tokens, joined)
		}
		for i, w := range words {
			var nw []string
			for j := 0; j < len(w); j++ {
				if j+1 < len(w) && w[j] == best[0] && w[j+1] == best[1] {
					nw = append(nw, best[0]+best[1])
					j++
				} else {
					nw = append(nw, w[j])
				}
			}
			words[i] = nw
		}
	}
	return tokens, merges
}

var sampleCorpus = strings.Fields(`the quick brown fox jumps over the lazy dog
	then the other fox went to the thicket and there it found three thin things
	1234 5678 12 007 don't can't it's we've they're I'll she'd é café naïve über
	привет мир 日本語 テキスト === --- ... !!! ??? <<< >>> func main() { return x }`)

// testVocab is a small gpt2 vocabulary trained on sampleCorpus (with and
// without a leading space), plus special tokens.
func testVocab(pre string) *Vocab {
	var corpus []string
	for _, w := range sampleCorpus {
		corpus = append(corpus, w, " "+w)
	}
	tokens, merges := trainBPE(corpus, 300)
	v := &Vocab{Model: "gpt2", Pre: pre, Tokens: tokens, Merges: merges, BOS: -1, EOS: -1, EOT: -1, Unknown: -1, Padding: -1}
	for range tokens {
		v.Types = append(v.Types, TypeNormal)
	}
	for _, s := range []struct {
		text string
		ty   TokenType
	}{{"<|endoftext|>", TypeControl}, {"<|im_start|>", TypeControl}, {"<|im_end|>", TypeControl}, {"<user>", TypeUserDefined}} {
		v.Tokens = append(v.Tokens, s.text)
		v.Types = append(v.Types, s.ty)
	}
	n := int32(len(v.Tokens))
	v.BOS, v.EOS = n-3, n-2 // <|im_start|>, <|im_end|>
	return v
}

func mustTokenizer(t testing.TB, v *Vocab) *Tokenizer {
	t.Helper()
	tok, err := v.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// randomText returns text mixing what pre-tokenizers treat differently:
// ASCII and non-ASCII letters, digits and numbers, contractions, spaces,
// tabs and newlines, Unicode whitespace, punctuation, symbols, marks, emoji,
// controls and, when raw is set, invalid UTF-8 (overlong forms, surrogates,
// stray bytes).
func randomText(rng *rand.Rand, maxLen int, raw bool) string {
	pieces := []string{
		"a", "b", "Z", "hello", "The", "é", "ß", "Ω", "ж", "日本", "ﬁ", "ǅ", // letters
		"0", "7", "42", "1234567", "٣", "²", "Ⅻ", "½", "０", // numbers
		"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", "'Ll", "'x", "'",
		" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\v", "\f", " \n ", "\n\n",
		"\u00a0", "\u3000", "\u2028", "\u0085", "\u2009", "\u200b", "\x1c",
		".", ",", "!", "?", "...", "-", "—", "«", "»", "(", ")", "{", "}", "_", "\"", "…",
		"$", "+", "<", "=", ">", "^", "~", "|", "`", "€", "©", "→",
		"\u0301", "\u0308", "😀", "👍🏽", "\u0000", "\x7f", "\U000e0001", "\U0010fffd", "\uffff",
	}
	invalid := []string{"\xff", "\x80", "\xc0\x80", "\xed\xa0\x80", "\xe2\x82", "\xf0\x9f", "\xf5\x80\x80\x80", "\xc3"}
	var b strings.Builder
	n := rng.IntN(maxLen + 1)
	for b.Len() < n {
		if raw && rng.IntN(20) == 0 {
			b.WriteString(invalid[rng.IntN(len(invalid))])
			continue
		}
		if rng.IntN(30) == 0 { // a random codepoint anywhere in Unicode
			r := rune(rng.IntN(0x110000))
			if utf8.ValidRune(r) {
				b.WriteRune(r)
			}
			continue
		}
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func loadMetadata(t testing.TB, path string) *gguf.Metadata {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &f.Metadata
}
