package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Hugging Face tokenizer.json parts ImportHF reads.
type hfTokenizer struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type                    string           `json:"type"`
		Vocab                   map[string]int64 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
		ByteFallback            bool             `json:"byte_fallback"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		UnkToken                *string          `json:"unk_token"`
		ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	} `json:"model"`
}

type hfAddedToken struct {
	ID      int64  `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

// hfStep is one pre-tokenizer or post-processor, possibly a Sequence.
type hfStep struct {
	Type             string   `json:"type"`
	Pretokenizers    []hfStep `json:"pretokenizers"`
	Processors       []hfStep `json:"processors"`
	IndividualDigits bool     `json:"individual_digits"`
	AddPrefixSpace   bool     `json:"add_prefix_space"`
	UseRegex         *bool    `json:"use_regex"` // default true
	Pattern          struct {
		Regex  string `json:"Regex"`
		String string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	Single   []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
	} `json:"single"`
}

// The Split regexes of the Llama 3 and Qwen2 tokenizer.json files.
const (
	hfRegexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	hfRegexQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// ImportHF converts a byte-level BPE tokenizer.json into a GGUF vocabulary
// the way llama.cpp's convert_hf_to_gguf.py does: added tokens that are
// special (or look it, like <|...|>) become control tokens, other added
// tokens user-defined, holes in the id space unused [PADn] tokens.
//
// The pre-tokenizer is recognized by its structure: Digits(individual) then
// ByteLevel is "smollm" (SmolLM's, the same splitting as StarCoder's);
// ByteLevel alone is "gpt-2"; a Split by the Llama 3 or Qwen2 regex then
// ByteLevel is "llama-bpe" or "qwen2". Anything else is an error rather than a
// guess.
//
// tokenizer.json does not say which tokens are BOS and EOS; they come from
// its post-processor when it adds them (and then add_bos_token /
// add_eos_token are set), else from the ChatML markers (BOS <|im_start|>,
// EOS, EOT and padding <|im_end|>, as SmolLM2-Instruct's config has them),
// else <|endoftext|> for both. Adjust the Vocab fields where a model's
// config.json says otherwise.
func ImportHF(tokenizerJSON []byte) (*Vocab, error) {
	var hf hfTokenizer
	if err := json.Unmarshal(tokenizerJSON, &hf); err != nil {
		return nil, fmt.Errorf("tokenizer: parse tokenizer.json: %w", err)
	}
	m := &hf.Model
	switch {
	case m.Type != "BPE" && !(m.Type == "" && m.Merges != nil):
		return nil, fmt.Errorf("tokenizer: tokenizer.json model type %q is not supported (want BPE)", m.Type)
	case m.ByteFallback:
		return nil, fmt.Errorf("tokenizer: tokenizer.json is a byte-fallback (SentencePiece-style) BPE; only byte-level BPE is supported")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("tokenizer: tokenizer.json uses subword prefixes or suffixes, which GGUF cannot describe")
	case isJSONSet(hf.Normalizer):
		return nil, fmt.Errorf("tokenizer: tokenizer.json has a normalizer (%s), which byte-level BPE in GGUF cannot describe", hf.Normalizer)
	}
	pre, err := hfPreTokenizer(hf.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if m.IgnoreMerges != (pre == "llama-bpe") {
		return nil, fmt.Errorf("tokenizer: tokenizer.json has ignore_merges %v, which llama.cpp's %q pre-tokenizer does not reproduce", m.IgnoreMerges, pre)
	}

	// Token ids: the vocab and the added tokens, which usually repeat it.
	n := int64(0)
	for tok, id := range m.Vocab {
		if id < 0 || id >= 1<<31-1 {
			return nil, fmt.Errorf("tokenizer: tokenizer.json token %q has id %d", tok, id)
		}
		n = max(n, id+1)
	}
	for _, a := range hf.AddedTokens {
		if a.ID < 0 || a.ID >= 1<<31-1 {
			return nil, fmt.Errorf("tokenizer: tokenizer.json added token %q has id %d", a.Content, a.ID)
		}
		n = max(n, a.ID+1)
	}
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.json has no tokens")
	}
	v := &Vocab{Model: "gpt2", Pre: pre, Tokens: make([]string, n), Types: make([]TokenType, n),
		BOS: -1, EOS: -1, EOT: -1, Unknown: -1, Padding: -1}
	set := make([]bool, n)
	for tok, id := range m.Vocab {
		if set[id] {
			return nil, fmt.Errorf("tokenizer: tokenizer.json gives id %d to both %q and %q", id, v.Tokens[id], tok)
		}
		v.Tokens[id], v.Types[id], set[id] = tok, TypeNormal, true
	}
	ids := make(map[string]int32, n)
	for _, a := range hf.AddedTokens {
		if set[a.ID] && v.Tokens[a.ID] != a.Content {
			return nil, fmt.Errorf("tokenizer: tokenizer.json gives id %d to both %q and added token %q", a.ID, v.Tokens[a.ID], a.Content)
		}
		v.Tokens[a.ID], set[a.ID] = a.Content, true
		if a.Special || looksSpecial(a.Content) {
			v.Types[a.ID] = TypeControl
		} else {
			v.Types[a.ID] = TypeUserDefined
		}
	}
	for id := range v.Tokens {
		if !set[id] {
			v.Tokens[id], v.Types[id] = fmt.Sprintf("[PAD%d]", id), TypeUnused
		}
		ids[v.Tokens[id]] = int32(id)
	}
	if v.Merges, err = hfMerges(m.Merges); err != nil {
		return nil, err
	}
	if m.UnkToken != nil {
		id, ok := ids[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.json unk_token %q is not a token", *m.UnkToken)
		}
		v.Unknown = id
	}
	if err := v.setSpecialIDs(hf.PostProcessor, ids); err != nil {
		return nil, err
	}
	if _, err := v.Tokenizer(); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	return v, nil
}

func isJSONSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

// looksSpecial is convert_hf_to_gguf.py's does_token_look_special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// hfPreTokenizer names the llama.cpp pre-tokenizer that splits like raw.
func hfPreTokenizer(raw json.RawMessage) (string, error) {
	if !isJSONSet(raw) {
		return "", fmt.Errorf("tokenizer: tokenizer.json has no pre_tokenizer; byte-level BPE needs one")
	}
	var p hfStep
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("tokenizer: parse tokenizer.json pre_tokenizer: %w", err)
	}
	steps := []hfStep{p}
	if p.Type == "Sequence" {
		steps = p.Pretokenizers
	}
	byteLevel := func(s hfStep, useRegex bool) bool {
		return s.Type == "ByteLevel" && !s.AddPrefixSpace && (s.UseRegex == nil || *s.UseRegex) == useRegex
	}
	switch {
	case len(steps) == 1 && byteLevel(steps[0], true):
		return "gpt-2", nil
	case len(steps) == 2 && steps[0].Type == "Digits" && steps[0].IndividualDigits && byteLevel(steps[1], true):
		return "smollm", nil
	case len(steps) == 2 && steps[0].Type == "Split" && steps[0].Behavior == "Isolated" && !steps[0].Invert && byteLevel(steps[1], false):
		switch steps[0].Pattern.Regex {
		case hfRegexLlama3:
			return "llama-bpe", nil
		case hfRegexQwen2:
			return "qwen2", nil
		}
	}
	return "", fmt.Errorf("tokenizer: tokenizer.json pre_tokenizer %s matches no supported llama.cpp pre-tokenizer", raw)
}

// hfMerges reads merges as "a b" strings or, in newer files, ["a", "b"] pairs.
func hfMerges(raw json.RawMessage) ([]string, error) {
	var merges []string
	if err := json.Unmarshal(raw, &merges); err == nil {
		return merges, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json merges are neither strings nor pairs: %w", err)
	}
	merges = make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("tokenizer: tokenizer.json merge %d has %d parts", i, len(p))
		}
		merges[i] = p[0] + " " + p[1]
	}
	return merges, nil
}

// setSpecialIDs picks BOS, EOS, EOT and padding (see ImportHF).
func (v *Vocab) setSpecialIDs(postProcessor json.RawMessage, ids map[string]int32) error {
	if isJSONSet(postProcessor) {
		var p hfStep
		if err := json.Unmarshal(postProcessor, &p); err != nil {
			return fmt.Errorf("tokenizer: parse tokenizer.json post_processor: %w", err)
		}
		steps := append([]hfStep{p}, p.Processors...)
		for _, s := range steps {
			if s.Type != "TemplateProcessing" || len(s.Single) == 0 {
				continue
			}
			if first := s.Single[0].SpecialToken; first != nil {
				id, ok := ids[first.ID]
				if !ok {
					return fmt.Errorf("tokenizer: tokenizer.json post_processor adds %q, which is not a token", first.ID)
				}
				v.BOS, v.AddBOS = id, true
			}
			if last := s.Single[len(s.Single)-1].SpecialToken; last != nil && len(s.Single) > 1 {
				id, ok := ids[last.ID]
				if !ok {
					return fmt.Errorf("tokenizer: tokenizer.json post_processor adds %q, which is not a token", last.ID)
				}
				v.EOS, v.AddEOS = id, true
			}
		}
	}
	lookup := func(texts ...string) int32 {
		for _, s := range texts {
			if id, ok := ids[s]; ok {
				return id
			}
		}
		return -1
	}
	start, end := lookup("<|im_start|>"), lookup("<|im_end|>")
	if start >= 0 && end >= 0 {
		if v.BOS < 0 {
			v.BOS = start
		}
		if v.EOS < 0 {
			v.EOS = end
		}
		v.EOT, v.Padding = end, end
		return nil
	}
	if v.BOS < 0 {
		v.BOS = lookup("<|endoftext|>", "<|begin_of_text|>", "<s>")
	}
	if v.EOS < 0 {
		v.EOS = lookup("<|endoftext|>", "<|end_of_text|>", "</s>")
	}
	return nil
}
