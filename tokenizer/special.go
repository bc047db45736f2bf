package tokenizer

import (
	"slices"
	"strings"

	"gotok/gguf"
)

// fragment is a run of text still to be tokenized (token < 0) or a special
// token matched whole.
type fragment struct {
	token      int32
	start, end int // of the text, when token < 0
}

// partition splits text at the special tokens it contains, as llama.cpp's
// tokenizer_st_partition does: each special token in turn, longest first,
// is cut out of every text fragment, leftmost occurrence first. Control and
// unknown tokens take part only when parseSpecial is set.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{token: -1, start: 0, end: len(text)}}
	var next []fragment
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.tokens[id]
		if !strings.Contains(text, tok) {
			continue
		}
		next = next[:0]
		for _, f := range frags {
			if f.token >= 0 {
				next = append(next, f)
				continue
			}
			s, e := f.start, f.end
			for {
				k := strings.Index(text[s:e], tok)
				if k < 0 {
					break
				}
				left := s + k
				if a&attrLStrip != 0 {
					for left > s && isCSpace(text[left-1]) {
						left--
					}
				}
				if left > s {
					next = append(next, fragment{token: -1, start: s, end: left})
				}
				next = append(next, fragment{token: id})
				s += k + len(tok)
				if a&attrRStrip != 0 {
					for s < e && isCSpace(text[s]) {
						s++
					}
				}
			}
			if s < e {
				next = append(next, fragment{token: -1, start: s, end: e})
			}
		}
		frags, next = next, frags
	}
	return frags
}

// isCSpace is C's isspace, which llama.cpp uses to strip around special tokens.
func isCSpace(c byte) bool {
	return c == ' ' || c >= '\t' && c <= '\r'
}

// Token texts that llama.cpp recognizes as ending generation, and the first
// of which present becomes EOT when tokenizer.ggml.eot_token_id is absent.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "<end_of_utterance>"}
	eogTexts  = append([]string{"<|eom_id|>"}, eotTexts...)
	fimPadTxt = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}
	fimRepTxt = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTxt = []string{"<|file_sep|>"}
)

// findEndOfGeneration fills in EOT and EOM and the set of end-of-generation
// tokens the way llama.cpp's vocab loader does: by id from metadata, then by
// well-known token text. Tokens found by text are made control tokens.
func (t *Tokenizer) findEndOfGeneration(fim [3]int32) {
	byText := func(texts []string) int32 {
		for _, s := range texts {
			if id, ok := t.ids[s]; ok {
				t.attrs[id] |= attrControl
				return id
			}
		}
		return -1
	}
	if t.eot < 0 {
		t.eot = byText(eotTexts)
	}
	if t.eom < 0 {
		t.eom = byText([]string{"<|eom_id|>"})
	}
	for i, texts := range [][]string{fimPadTxt, fimRepTxt, fimSepTxt} {
		if fim[i] < 0 {
			fim[i] = byText(texts)
		}
	}
	add := func(id int32) {
		if id >= 0 && !slices.Contains(t.eog, id) {
			t.eog = append(t.eog, id)
		}
	}
	for _, id := range fim {
		add(id)
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok {
			t.attrs[id] |= attrControl
			add(id)
		}
	}
	add(t.eos)
	add(t.eot)
	add(t.eom)
	slices.Sort(t.eog)
}

// buildSpecial lists the tokens matched whole before tokenization.
func (t *Tokenizer) buildSpecial(m *gguf.Metadata) {
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	slices.SortStableFunc(t.special, func(a, b int32) int { return len(t.tokens[b]) - len(t.tokens[a]) })

	// llama.cpp gives Phi-3's special tokens (found by general.name) rstrip:
	// the whitespace after them is not text.
	name, _ := m.String("general.name")
	if name = strings.ToLower(name); strings.Contains(name, "phi-3") || strings.Contains(name, "phi3") {
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		if id, ok := t.ids["</s>"]; ok {
			t.attrs[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.ids[s]; ok {
				t.attrs[id] &^= attrRStrip
			}
		}
	}
}
