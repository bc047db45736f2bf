package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

func TestSpecialTokensParsedOnRequest(t *testing.T) {
	tok := mustTokenizer(t, testVocab("gpt-2"))
	start, end, user := tok.ids["<|im_start|>"], tok.ids["<|im_end|>"], tok.ids["<user>"]
	text := "<|im_start|>user hi<|im_end|>"

	parsed := tok.Encode(text, false, true)
	want := slices.Concat([]int32{start}, tok.Encode("user hi", false, false), []int32{end})
	if !slices.Equal(parsed, want) {
		t.Errorf("parseSpecial: %v, want %v", parsed, want)
	}
	raw := tok.Encode(text, false, false)
	if slices.Contains(raw, start) || slices.Contains(raw, end) {
		t.Errorf("control tokens matched in raw text: %v", raw)
	}
	if tok.Decode(raw) != text {
		t.Errorf("raw text does not round-trip: %q", tok.Decode(raw))
	}
	// User-defined tokens are matched in raw text too, as llama.cpp does.
	if got := tok.Encode("a<user>b", false, false); !slices.Equal(got, slices.Concat(tok.Encode("a", false, false), []int32{user}, tok.Encode("b", false, false))) {
		t.Errorf("user-defined token not matched: %v", got)
	}
}

// Longer special tokens are matched first; each one cuts every fragment.
func TestPartition(t *testing.T) {
	v := testVocab("gpt-2")
	v.Tokens = append(v.Tokens, "<a>", "<a><b>", "<b>")
	v.Types = append(v.Types, TypeControl, TypeControl, TypeUserDefined)
	tok := mustTokenizer(t, v)
	a, ab, b := tok.ids["<a>"], tok.ids["<a><b>"], tok.ids["<b>"]
	for _, c := range []struct {
		text  string
		parse bool
		want  string // fragments: token ids as #n, text as is
	}{
		{"x<a><b>y<a>z<b>", true, "x|#ab|y|#a|z|#b"},
		{"x<a><b>y<a>z<b>", false, "x<a>|#b|y<a>z|#b"},
		{"<a><a>", true, "#a|#a"},
		{"", true, ""},
		{"plain", true, "plain"},
	} {
		var parts []string
		for _, f := range tok.partition(c.text, c.parse) {
			switch f.token {
			case -1:
				parts = append(parts, c.text[f.start:f.end])
			case a:
				parts = append(parts, "#a")
			case ab:
				parts = append(parts, "#ab")
			case b:
				parts = append(parts, "#b")
			default:
				parts = append(parts, "#?")
			}
		}
		if got := strings.Join(parts, "|"); got != c.want {
			t.Errorf("partition(%q, %v) = %q, want %q", c.text, c.parse, got, c.want)
		}
	}
}

// Phi-3's special tokens eat the whitespace after them (llama.cpp sets
// rstrip by general.name).
func TestPartitionRStrip(t *testing.T) {
	v := testVocab("gpt-2")
	tok := mustTokenizer(t, v)
	end := tok.ids["<|im_end|>"]
	tok.attrs[end] |= attrRStrip
	got := tok.Encode("a<|im_end|> \n b", false, true)
	want := slices.Concat(tok.Encode("a", false, false), []int32{end}, tok.Encode("b", false, false))
	if !slices.Equal(got, want) {
		t.Errorf("rstrip: %v, want %v", got, want)
	}
	tok.attrs[end] = attrControl | attrLStrip
	got = tok.Encode("a \t<|im_end|> b", false, true)
	want = slices.Concat(tok.Encode("a", false, false), []int32{end}, tok.Encode(" b", false, false))
	if !slices.Equal(got, want) {
		t.Errorf("lstrip: %v, want %v", got, want)
	}
}
