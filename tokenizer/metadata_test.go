package tokenizer

import (
	"math"
	"slices"
	"strings"
	"testing"

	"gotok/gguf"
)

// editedMetadata is v's metadata with the key drop removed and the keys of
// set replaced.
func editedMetadata(t *testing.T, v *Vocab, drop string, set map[string]any) *gguf.Metadata {
	t.Helper()
	base := parseMetadata(t, v.SetMetadata)
	return parseMetadata(t, func(w *gguf.Writer) {
		for _, k := range base.Keys() {
			if k == drop {
				continue
			}
			val, _ := base.Value(k)
			w.Set(k, val)
		}
		for k, x := range set {
			w.Set(k, x)
		}
	})
}

func TestMalformedMetadata(t *testing.T) {
	v := testVocab("gpt-2")
	n := len(v.Tokens)
	badMerge := append([]string{byteToUTF8s['a'] + " " + "zzz-not-a-token"}, v.Merges...)
	tokens := append([]string{}, v.Tokens...)
	tokens[300] = tokens[299]
	for _, c := range []struct {
		name string
		drop string
		set  map[string]any
		want string // in the error
	}{
		{"missing merges", KeyMerges, nil, "merges is missing"},
		{"merge names unknown token", "", map[string]any{KeyMerges: badMerge}, `unknown token "zzz-not-a-token"`},
		{"merge without space", "", map[string]any{KeyMerges: []string{"ab"}}, "not two tokens"},
		{"merge makes no token", "", map[string]any{KeyMerges: []string{"} }"}}, "not a token"},
		{"merges not strings", "", map[string]any{KeyMerges: []int32{1, 2}}, "want an array of strings"},
		{"token types too short", "", map[string]any{KeyTokenType: make([]int32, n-1)}, "entries for"},
		{"token types too long", "", map[string]any{KeyTokenType: make([]int32, n+1)}, "entries for"},
		{"token type out of range", "", map[string]any{KeyTokenType: append(make([]int32, n-1), 9)}, "not a token type"},
		{"token types not integers", "", map[string]any{KeyTokenType: make([]float32, n)}, "want an array of integers"},
		{"bos out of range", "", map[string]any{KeyBOS: uint32(n)}, "outside the vocabulary"},
		{"eos negative", "", map[string]any{KeyEOS: int32(-5)}, "outside the vocabulary"},
		{"eot out of range", "", map[string]any{KeyEOT: uint32(1 << 20)}, "outside the vocabulary"},
		{"padding not an integer", "", map[string]any{KeyPadding: "two"}, "want an integer"},
		{"missing tokens", KeyTokens, nil, "tokens is missing"},
		{"no tokens", "", map[string]any{KeyTokens: []string{}}, "has 0 tokens"},
		{"duplicate token", "", map[string]any{KeyTokens: tokens}, "appears twice"},
		{"missing model", KeyModel, nil, "model is missing"},
		{"unknown model", "", map[string]any{KeyModel: "t5"}, "not supported"},
		{"unknown pre-tokenizer", "", map[string]any{KeyPre: "mystery"}, "unknown pre-tokenizer"},
		{"add_bos without bos", KeyBOS, map[string]any{KeyAddBOS: true}, "no BOS"},
		{"add_bos not bool", "", map[string]any{KeyAddBOS: int32(1)}, "want bool"},
		{"bad byte token", "", map[string]any{KeyTokenType: append(make([]int32, n-1), int32(TypeByte))}, "want <0xNN>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromGGUF(editedMetadata(t, v, c.drop, c.set))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("FromGGUF error = %v, want one containing %q", err, c.want)
			}
		})
	}
	// SentencePiece scores.
	nan := float32(math.NaN())
	for _, c := range []struct {
		name string
		drop string
		set  map[string]any
		want string
	}{
		{"scores too short", "", map[string]any{KeyModel: "llama", KeyScores: make([]float32, n-1)}, "entries for"},
		{"scores NaN", "", map[string]any{KeyModel: "llama", KeyScores: append(make([]float32, n-1), nan)}, "NaN"},
		{"scores not numbers", "", map[string]any{KeyModel: "llama", KeyScores: tokens}, "want an array of float32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromGGUF(editedMetadata(t, v, c.drop, c.set))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("FromGGUF error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestMetadataNoneIDs(t *testing.T) {
	v := testVocab("gpt-2")
	// -1 stored as uint32 means "none", as in llama.cpp files.
	tok, err := FromGGUF(editedMetadata(t, v, "", map[string]any{KeyPadding: uint32(0xFFFFFFFF), KeyEOT: int32(-1)}))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Padding() != -1 {
		t.Errorf("Padding = %d, want -1", tok.Padding())
	}
	// EOT absent: found by its text, <|im_end|>.
	if tok.EOT() != tok.ids["<|im_end|>"] {
		t.Errorf("EOT = %d", tok.EOT())
	}
}

// A gpt2 file without tokenizer.ggml.pre falls back to llama.cpp's
// "default" pre-tokenizer (with a logged warning), not to a guess.
func TestMissingPreUsesDefault(t *testing.T) {
	tok, err := FromGGUF(editedMetadata(t, testVocab("gpt-2"), KeyPre, nil))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Pre() != "default" {
		t.Errorf("Pre = %q, want default", tok.Pre())
	}
}

func TestCopyMetadata(t *testing.T) {
	v := testVocab("smollm")
	src := parseMetadata(t, func(w *gguf.Writer) {
		w.Set("general.name", "source")
		v.SetMetadata(w)
		w.Set("tokenizer.chat_template", "{{ x }}")
	})
	dst := parseMetadata(t, func(w *gguf.Writer) {
		w.Set("general.name", "copy")
		CopyMetadata(src, w)
	})
	for _, k := range src.Keys() {
		a, _ := src.Value(k)
		b, ok := dst.Value(k)
		switch {
		case k == "general.name":
			if name, _ := dst.String(k); name != "copy" {
				t.Errorf("general.name copied: %q", name)
			}
		case !ok:
			t.Errorf("%s not copied", k)
		case a.String() != b.String() || a.Type != b.Type || a.ElemType != b.ElemType:
			t.Errorf("%s: %v, want %v", k, b, a)
		}
	}
	a, err := FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FromGGUF(dst)
	if err != nil {
		t.Fatal(err)
	}
	text := "the fox's 123 <|im_end|>"
	if x, y := a.Encode(text, true, true), b.Encode(text, true, true); !slices.Equal(x, y) {
		t.Errorf("copied tokenizer encodes %v, source %v", y, x)
	}
}
