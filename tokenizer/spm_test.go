package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"gotok/gguf"
)

func TestStoriesOnceUponATime(t *testing.T) {
	tok := loadGGUFTokenizer(t, filepath.Join(sharedDir(t), "models", "stories260K.gguf"))
	// Checked by hand against the vocabulary: <s>, ▁Once, ▁upon, ▁a, ▁time:
	// the tokens of the first words of the model's greedy golden sample.
	want := []int32{1, 403, 407, 261, 378}
	got := tok.Encode("Once upon a time", true, false)
	if !slices.Equal(got, want) {
		t.Fatalf("Encode(Once upon a time) = %v, want %v", got, want)
	}
	for i, p := range []string{"<s>", " Once", " upon", " a", " time"} {
		if tok.Piece(want[i]) != p {
			t.Errorf("Piece(%d) = %q, want %q", want[i], tok.Piece(want[i]), p)
		}
	}
	if d := tok.Decode(want[1:]); d != "Once upon a time" {
		t.Errorf("Decode = %q", d)
	}
	if tok.BOS() != 1 || tok.EOS() != 2 || !tok.AddBOS() || tok.AddEOS() || tok.VocabSize() != 512 {
		t.Errorf("BOS %d EOS %d AddBOS %v AddEOS %v VocabSize %d", tok.BOS(), tok.EOS(), tok.AddBOS(), tok.AddEOS(), tok.VocabSize())
	}
}

// Merging word by word must give what llama.cpp's whole-text merge gives.
func TestSPMWordSplitMatchesWholeText(t *testing.T) {
	dir := sharedDir(t)
	for _, path := range []string{
		filepath.Join(dir, "models", "stories260K.gguf"),
		filepath.Join(dir, "tokenizer-tests", "ggml-vocab-llama-spm.gguf"),
	} {
		tok := loadGGUFTokenizer(t, path)
		if !tok.spm.wordSplit {
			t.Fatalf("%s: a SentencePiece vocabulary should allow word splitting", path)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		for range 1500 {
			text := escapeSpaces(" " + randomText(rng, 80, true))
			got, want := tok.spm.encode(text, nil), tok.spm.encodeHeap(text, nil)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %q: word by word %v, whole text %v", filepath.Base(path), text, got, want)
			}
		}
	}
}

func TestSPMSpaceInside(t *testing.T) {
	for text, want := range map[string]bool{"▁a": false, "▁▁": false, "▁▁ab": false, "a": false, "a▁": true, "▁a▁b": true, "x▁▁": true} {
		if got := spaceInside(text); got != want {
			t.Errorf("spaceInside(%q) = %v", text, got)
		}
	}
}

// spmTestMetadata is a tiny llama vocabulary: the byte tokens, a few pieces
// with scores, and a token with a space inside, which disables word
// splitting.
func spmTestTokenizer(t *testing.T, extra ...string) *Tokenizer {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{int32(TypeUnknown), int32(TypeControl), int32(TypeControl)}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string([]byte{'<', '0', 'x', "0123456789ABCDEF"[b>>4], "0123456789ABCDEF"[b&15], '>'}))
		types = append(types, int32(TypeByte))
	}
	pieces := append([]string{"▁", "a", "b", "▁a", "ab", "▁ab", "ba", "▁b", "bb"}, extra...)
	scores := make([]float32, len(tokens))
	for i, p := range pieces {
		tokens = append(tokens, p)
		types = append(types, int32(TypeNormal))
		scores = append(scores, float32(-i))
	}
	m := parseMetadata(t, func(w *gguf.Writer) {
		w.Set(KeyModel, "llama")
		w.Set(KeyTokens, tokens)
		w.Set(KeyTokenType, types)
		w.Set(KeyScores, scores)
	})
	tok, err := FromGGUF(m)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSPMWordSplitSynthetic(t *testing.T) {
	for _, extra := range [][]string{nil, {"a▁b", "b▁", "a▁"}} {
		tok := spmTestTokenizer(t, extra...)
		if tok.spm.wordSplit != (extra == nil) {
			t.Fatalf("wordSplit = %v with extra tokens %q", tok.spm.wordSplit, extra)
		}
		rng := rand.New(rand.NewPCG(9, 10))
		for range 3000 {
			text := escapeSpaces(randomWord(rng, "ab ", 60))
			got, want := tok.spm.encode(text, nil), tok.spm.encodeHeap(text, nil)
			if !slices.Equal(got, want) {
				t.Fatalf("%q: encode %v, encodeHeap %v", text, got, want)
			}
		}
	}
}

// Characters that no token covers become byte tokens; the dummy prefix and
// the ▁ escape follow llama.cpp.
func TestSPMBytesAndSpaces(t *testing.T) {
	tok := spmTestTokenizer(t)
	id := func(s string) int32 { return tok.ids[s] }
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"ab", []int32{id("▁ab")}},
		{"", nil},
		{" ", []int32{id("▁"), id("▁")}},
		{"a é", []int32{id("▁a"), id("▁"), id("<0xC3>"), id("<0xA9>")}},
		{"\xff", []int32{id("▁"), id("<0xFF>")}},
	} {
		if got := tok.Encode(c.text, false, false); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	if got := tok.Encode("ab", true, false); !slices.Equal(got, []int32{1, id("▁ab")}) {
		t.Errorf("Encode(ab, addSpecial) = %v", got)
	}
	// A special token in the text is parsed only on request, and the text
	// after it gets the dummy space again.
	if got := tok.Encode("a</s>b", false, true); !slices.Equal(got, []int32{id("▁a"), 2, id("▁b")}) {
		t.Errorf("Encode(a</s>b, parseSpecial) = %v", got)
	}
}
