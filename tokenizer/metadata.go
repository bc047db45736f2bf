package tokenizer

import (
	"fmt"
	"math"
	"strings"

	"gotok/gguf"
)

// GGUF metadata keys of the tokenizer (llama.cpp's LLM_KV_TOKENIZER_*).
const (
	KeyModel          = "tokenizer.ggml.model"
	KeyPre            = "tokenizer.ggml.pre"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyTokenType      = "tokenizer.ggml.token_type"
	KeyScores         = "tokenizer.ggml.scores"
	KeyMerges         = "tokenizer.ggml.merges"
	KeyBOS            = "tokenizer.ggml.bos_token_id"
	KeyEOS            = "tokenizer.ggml.eos_token_id"
	KeyEOT            = "tokenizer.ggml.eot_token_id"
	KeyEOM            = "tokenizer.ggml.eom_token_id"
	KeyUnknown        = "tokenizer.ggml.unknown_token_id"
	KeySeparator      = "tokenizer.ggml.seperator_token_id" // sic: llama.cpp's spelling
	KeyPadding        = "tokenizer.ggml.padding_token_id"
	KeyMask           = "tokenizer.ggml.mask_token_id"
	KeyFIMPre         = "tokenizer.ggml.fim_pre_token_id"
	KeyFIMSuf         = "tokenizer.ggml.fim_suf_token_id"
	KeyFIMMid         = "tokenizer.ggml.fim_mid_token_id"
	KeyFIMPad         = "tokenizer.ggml.fim_pad_token_id"
	KeyFIMRep         = "tokenizer.ggml.fim_rep_token_id"
	KeyFIMSep         = "tokenizer.ggml.fim_sep_token_id"
	KeyAddBOS         = "tokenizer.ggml.add_bos_token"
	KeyAddEOS         = "tokenizer.ggml.add_eos_token"
	KeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// metaString returns a string value; present reports whether key exists.
func metaString(m *gguf.Metadata, key string) (s string, present bool, err error) {
	v, ok := m.Value(key)
	if !ok {
		return "", false, nil
	}
	s, ok = m.String(key)
	if !ok {
		return "", true, fmt.Errorf("tokenizer: %s is %s, want string", key, describe(v))
	}
	return s, true, nil
}

func metaBool(m *gguf.Metadata, key string) (b bool, present bool, err error) {
	v, ok := m.Value(key)
	if !ok {
		return false, false, nil
	}
	b, ok = m.Bool(key)
	if !ok {
		return false, true, fmt.Errorf("tokenizer: %s is %s, want bool", key, describe(v))
	}
	return b, true, nil
}

// metaTokenID returns a token id. -1 and 4294967295 (-1 stored as uint32)
// mean "none"; any other id outside [0, n) is an error.
func metaTokenID(m *gguf.Metadata, key string, n int) (id int32, present bool, err error) {
	v, ok := m.Value(key)
	if !ok {
		return -1, false, nil
	}
	x, ok := m.Int(key)
	if !ok {
		return -1, true, fmt.Errorf("tokenizer: %s is %s, want an integer token id", key, describe(v))
	}
	if x == -1 || x == math.MaxUint32 {
		return -1, true, nil
	}
	if x < 0 || x >= int64(n) {
		return -1, true, fmt.Errorf("tokenizer: %s = %d is outside the vocabulary of %d tokens", key, x, n)
	}
	return int32(x), true, nil
}

func describe(v gguf.Value) string {
	if v.Type == gguf.TypeArray {
		return fmt.Sprintf("an array of %s", v.ElemType)
	}
	return fmt.Sprintf("a %s", v.Type)
}

// loadTokens reads the token list and types.
func (t *Tokenizer) loadTokens(m *gguf.Metadata) error {
	v, ok := m.Value(KeyTokens)
	if !ok {
		return fmt.Errorf("tokenizer: %s is missing", KeyTokens)
	}
	tokens, ok := m.Strings(KeyTokens)
	if !ok {
		return fmt.Errorf("tokenizer: %s is %s, want an array of strings", KeyTokens, describe(v))
	}
	n := len(tokens)
	if n == 0 || n > 1<<31-1 {
		return fmt.Errorf("tokenizer: %s has %d tokens", KeyTokens, n)
	}
	t.tokens = make([]string, n)
	t.ids = make(map[string]int32, n)
	for i, text := range tokens {
		if text == "" { // as llama.cpp does
			text = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if prev, dup := t.ids[text]; dup {
			return fmt.Errorf("tokenizer: %s: token %q appears twice, as ids %d and %d", KeyTokens, text, prev, i)
		}
		t.ids[text] = int32(i)
		t.tokens[i] = text
	}

	t.attrs = make([]tokenAttr, n)
	v, ok = m.Value(KeyTokenType)
	if !ok {
		for i := range t.attrs {
			t.attrs[i] = attrNormal
		}
		return nil
	}
	types, ok := m.Ints(KeyTokenType)
	if !ok {
		return fmt.Errorf("tokenizer: %s is %s, want an array of integers", KeyTokenType, describe(v))
	}
	if len(types) != n {
		return fmt.Errorf("tokenizer: %s has %d entries for %d tokens", KeyTokenType, len(types), n)
	}
	for i, ty := range types {
		if ty < int64(TypeUndefined) || ty > int64(TypeByte) {
			return fmt.Errorf("tokenizer: %s[%d] = %d is not a token type", KeyTokenType, i, ty)
		}
		t.attrs[i] = attrOf(TokenType(ty))
		if TokenType(ty) == TypeByte {
			if _, ok := byteTokenValue(t.tokens[i]); !ok {
				return fmt.Errorf("tokenizer: byte token %d is %q, want <0xNN>", i, t.tokens[i])
			}
		}
	}
	return nil
}

// byteTokenValue parses the text of a byte token, <0xNN>.
func byteTokenValue(text string) (byte, bool) {
	if len(text) != 6 || text[:3] != "<0x" || text[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(text[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

func loadScores(m *gguf.Metadata, n int) ([]float32, error) {
	v, ok := m.Value(KeyScores)
	if !ok {
		return make([]float32, n), nil
	}
	scores, ok := m.Float32s(KeyScores)
	if !ok {
		ints, ok := m.Ints(KeyScores)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s is %s, want an array of float32", KeyScores, describe(v))
		}
		scores = make([]float32, len(ints))
		for i, x := range ints {
			scores[i] = float32(x)
		}
	}
	if len(scores) != n {
		return nil, fmt.Errorf("tokenizer: %s has %d entries for %d tokens", KeyScores, len(scores), n)
	}
	for i, s := range scores {
		if s != s { // NaN would make the merge order undefined
			return nil, fmt.Errorf("tokenizer: %s[%d] is NaN", KeyScores, i)
		}
	}
	return scores, nil
}

// loadBPE reads the pre-tokenizer name and the merges of a gpt2 vocabulary.
func (t *Tokenizer) loadBPE(m *gguf.Metadata) error {
	pre, present, err := metaString(m, KeyPre)
	if err != nil {
		return err
	}
	if !present || pre == "" {
		t.warnings = append(t.warnings, KeyPre+" is missing; using llama.cpp's \"default\" pre-tokenizer, which may not match the model's own")
		pre = "default"
	}
	if t.preTok, err = newPreTokenizer(pre); err != nil {
		return err
	}
	t.pre = pre
	v, ok := m.Value(KeyMerges)
	if !ok {
		return fmt.Errorf("tokenizer: %s is missing (a gpt2 tokenizer needs its BPE merges)", KeyMerges)
	}
	merges, ok := m.Strings(KeyMerges)
	if !ok {
		return fmt.Errorf("tokenizer: %s is %s, want an array of strings", KeyMerges, describe(v))
	}
	t.bpe, err = newBPEModel(t.tokens, t.ids, merges, t.preTok.ignoreMerges)
	return err
}

// CopyMetadata copies every tokenizer.* key of src into w, so that a file
// written by w tokenizes exactly like src.
func CopyMetadata(src *gguf.Metadata, w *gguf.Writer) {
	for _, k := range src.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			v, _ := src.Value(k)
			w.Set(k, v)
		}
	}
}
