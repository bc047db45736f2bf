package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestImportHFSmolLM2(t *testing.T) {
	js, err := os.ReadFile(filepath.Join(sharedDir(t), "tokenizer-tests", "smollm2-135m-instruct", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := ImportHF(js)
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "gpt2" || v.Pre != "smollm" || len(v.Tokens) != 49152 || len(v.Merges) != 48900 {
		t.Errorf("model %q pre %q, %d tokens, %d merges", v.Model, v.Pre, len(v.Tokens), len(v.Merges))
	}
	// As SmolLM2-Instruct's config.json and its llama.cpp GGUFs have them.
	if v.BOS != 1 || v.EOS != 2 || v.EOT != 2 || v.Padding != 2 || v.AddBOS || v.AddEOS {
		t.Errorf("BOS %d EOS %d EOT %d PAD %d AddBOS %v AddEOS %v", v.BOS, v.EOS, v.EOT, v.Padding, v.AddBOS, v.AddEOS)
	}
	for id := 0; id < 17; id++ {
		if v.Types[id] != TypeControl {
			t.Errorf("token %d %q is %v, want control", id, v.Tokens[id], v.Types[id])
		}
	}
	if v.Types[17] != TypeNormal {
		t.Errorf("token 17 %q is %v", v.Tokens[17], v.Types[17])
	}

	tok := importSmolLM2(t)
	for _, id := range []int32{0, 2} { // <|endoftext|>, <|im_end|>
		if !tok.IsEOG(id) {
			t.Errorf("%q is not end of generation", tok.Token(id))
		}
	}
	if tok.IsEOG(1) || tok.IsEOG(tok.ids["Hello"]) {
		t.Error("<|im_start|> or Hello ends generation")
	}
	chat := "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
	ids := tok.Encode(chat, true, true)
	if ids[0] != 1 || !slices.Contains(ids, 2) || tok.Decode(ids) != chat {
		t.Errorf("chat template: %v decodes to %q", ids, tok.Decode(ids))
	}
	if raw := tok.Encode(chat, true, false); slices.Contains(raw, 1) || slices.Contains(raw, 2) {
		t.Errorf("special tokens parsed from raw text: %v", raw)
	}
}

// hfJSON writes a byte-level BPE tokenizer.json for v with the given
// pre-tokenizer and extra top-level fields.
func hfJSON(t *testing.T, v *Vocab, preTokenizer string, edit func(map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	var added []map[string]any
	for id, tok := range v.Tokens {
		vocab[tok] = id
		if v.Types[id] != TypeNormal {
			added = append(added, map[string]any{"id": id, "content": tok, "special": v.Types[id] == TypeControl})
		}
	}
	doc := map[string]any{
		"added_tokens":  added,
		"normalizer":    nil,
		"pre_tokenizer": json.RawMessage(preTokenizer),
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": v.Merges, "byte_fallback": false, "ignore_merges": false},
	}
	if edit != nil {
		edit(doc)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

const (
	hfByteLevel   = `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`
	hfSmolLM      = `{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},` + hfByteLevel + `]}`
	hfByteLevelNo = `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}`
)

func hfSplit(regex string) string {
	r, _ := json.Marshal(regex)
	return `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + string(r) + `},"behavior":"Isolated","invert":false},` + hfByteLevelNo + `]}`
}

func TestImportHFPreTokenizers(t *testing.T) {
	v := testVocab("")
	for _, c := range []struct {
		pre, want    string
		ignoreMerges bool
	}{
		{hfByteLevel, "gpt-2", false},
		{hfSmolLM, "smollm", false},
		{hfSplit(hfRegexLlama3), "llama-bpe", true},
		{hfSplit(hfRegexQwen2), "qwen2", false},
	} {
		js := hfJSON(t, v, c.pre, func(doc map[string]any) {
			doc["model"].(map[string]any)["ignore_merges"] = c.ignoreMerges
		})
		got, err := ImportHF(js)
		if err != nil || got.Pre != c.want {
			t.Errorf("pre_tokenizer %s: %v, %v; want %q", c.pre, got, err, c.want)
			continue
		}
		// The imported vocabulary tokenizes like the original one.
		text := "The fox's 1234 things!\n  ok"
		a := mustTokenizer(t, got).Encode(text, false, false)
		v2 := *v
		v2.Pre = c.want
		if b := mustTokenizer(t, &v2).Encode(text, false, false); !slices.Equal(a, b) {
			t.Errorf("%s: imported %v, original %v", c.want, a, b)
		}
	}
}

func TestImportHFMergePairs(t *testing.T) {
	v := testVocab("")
	var pairs [][]string
	for _, m := range v.Merges {
		l, r, _ := strings.Cut(m, " ")
		pairs = append(pairs, []string{l, r})
	}
	got, err := ImportHF(hfJSON(t, v, hfByteLevel, func(doc map[string]any) {
		doc["model"].(map[string]any)["merges"] = pairs
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Merges, v.Merges) {
		t.Error("merges given as pairs differ from merges given as strings")
	}
	// Special ids: ChatML markers.
	if got.BOS != int32(len(v.Tokens)-3) || got.EOS != int32(len(v.Tokens)-2) {
		t.Errorf("BOS %d EOS %d", got.BOS, got.EOS)
	}
	if got.Types[len(v.Tokens)-1] != TypeUserDefined {
		t.Errorf("non-special added token is %v", got.Types[len(v.Tokens)-1])
	}
}

func TestImportHFErrors(t *testing.T) {
	v := testVocab("")
	for _, c := range []struct {
		name string
		pre  string
		edit func(map[string]any)
		want string
	}{
		{"unknown pre-tokenizer", `{"type":"Whitespace"}`, nil, "matches no supported"},
		{"prefix space", `{"type":"ByteLevel","add_prefix_space":true,"use_regex":true}`, nil, "matches no supported"},
		{"normalizer", hfByteLevel, func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFC"} }, "normalizer"},
		{"byte fallback", hfByteLevel, func(d map[string]any) { d["model"].(map[string]any)["byte_fallback"] = true }, "byte-fallback"},
		{"not BPE", hfByteLevel, func(d map[string]any) { d["model"].(map[string]any)["type"] = "Unigram" }, "not supported"},
		{"bad merge", hfByteLevel, func(d map[string]any) { d["model"].(map[string]any)["merges"] = []string{"x nosuchtoken"} }, "unknown token"},
		{"not JSON", hfByteLevel, func(d map[string]any) { d["model"] = "[" }, "parse"},
	} {
		_, err := ImportHF(hfJSON(t, v, c.pre, c.edit))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
