package tokenizer

import (
	"fmt"
	"slices"

	"gotok/gguf"
)

// Tokenizer turns text into token ids and back. It is safe for concurrent
// use.
type Tokenizer struct {
	model string // tokenizer.ggml.model: "gpt2" or "llama"
	pre   string // tokenizer.ggml.pre as used ("default" when a gpt2 file lacks it)

	tokens []string
	attrs  []tokenAttr

	warnings []string // see Warnings
	ids      map[string]int32
	pieces   []string // Piece of each token

	// special holds the control, user-defined and unknown tokens, longest
	// first: the order llama.cpp matches them in (tokenizer_st_partition).
	special []int32

	bos, eos, eot, eom, unk, pad int32 // -1 when absent
	eog                          []int32
	addBOS, addEOS               bool
	addSpacePrefix               bool // SPM: prefix a space to text that starts the input or follows a special token

	bpe    *bpeModel
	preTok *preTokenizer
	spm    *spmModel
}

// FromGGUF builds the tokenizer that the tokenizer.ggml.* metadata of a GGUF
// file describes. Every key it uses is validated: missing or malformed
// metadata is an error, never a silently different tokenizer.
//
// Defaults follow llama.cpp when a key is absent: add_bos_token is true for
// "llama" (SPM) and for the Llama 3 family of pre-tokenizers, false otherwise;
// add_eos_token is false; SPM files default to BOS 1, EOS 2, UNK 0. A gpt2
// file without tokenizer.ggml.pre uses llama.cpp's "default" pre-tokenizer
// and logs a warning. Unlike llama.cpp, a gpt2 file without BOS/EOS ids gets
// none (llama.cpp assumes 11, a comma in most vocabularies).
func FromGGUF(m *gguf.Metadata) (*Tokenizer, error) {
	t := &Tokenizer{bos: -1, eos: -1, eot: -1, eom: -1, unk: -1, pad: -1}
	model, present, err := metaString(m, KeyModel)
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, fmt.Errorf("tokenizer: %s is missing", KeyModel)
	}
	if model != "gpt2" && model != "llama" {
		return nil, fmt.Errorf("tokenizer: %s %q is not supported (want \"gpt2\" or \"llama\")", KeyModel, model)
	}
	t.model = model
	if err := t.loadTokens(m); err != nil {
		return nil, err
	}
	n := len(t.tokens)

	var scores []float32
	switch model {
	case "gpt2":
		if err := t.loadBPE(m); err != nil {
			return nil, err
		}
		t.addBOS = t.preTok.addBOS
	case "llama":
		t.pre, _, err = metaString(m, KeyPre)
		if err != nil {
			return nil, err
		}
		if scores, err = loadScores(m, n); err != nil {
			return nil, err
		}
		// llama.cpp's SPM defaults, kept only where the vocabulary has them.
		for _, d := range []struct {
			id  *int32
			def int32
		}{{&t.bos, 1}, {&t.eos, 2}, {&t.unk, 0}} {
			if int(d.def) < n {
				*d.id = d.def
			}
		}
		t.addBOS = true
		t.addSpacePrefix = true
	}

	fim := [3]int32{-1, -1, -1} // pad, rep, sep: end generation like EOS
	for _, k := range []struct {
		key string
		id  *int32
	}{
		{KeyBOS, &t.bos}, {KeyEOS, &t.eos}, {KeyEOT, &t.eot}, {KeyEOM, &t.eom},
		{KeyUnknown, &t.unk}, {KeyPadding, &t.pad},
		{KeyFIMPad, &fim[0]}, {KeyFIMRep, &fim[1]}, {KeyFIMSep, &fim[2]},
	} {
		id, present, err := metaTokenID(m, k.key, n)
		if err != nil {
			return nil, err
		}
		if present {
			*k.id = id
		}
	}
	// Ids that are read only to be validated.
	for _, key := range []string{KeySeparator, KeyMask, KeyFIMPre, KeyFIMSuf, KeyFIMMid} {
		if _, _, err := metaTokenID(m, key, n); err != nil {
			return nil, err
		}
	}
	if model == "llama" {
		t.spm = newSPMModel(t.ids, scores, t.unk)
	}

	for _, f := range []struct {
		key string
		v   *bool
	}{{KeyAddBOS, &t.addBOS}, {KeyAddEOS, &t.addEOS}, {KeyAddSpacePrefix, &t.addSpacePrefix}} {
		b, present, err := metaBool(m, f.key)
		if err != nil {
			return nil, err
		}
		if present {
			*f.v = b
		}
	}
	if t.addBOS && t.bos < 0 {
		return nil, fmt.Errorf("tokenizer: %s is true but the vocabulary has no BOS token (%s)", KeyAddBOS, KeyBOS)
	}
	if t.addEOS && t.eos < 0 {
		return nil, fmt.Errorf("tokenizer: %s is true but the vocabulary has no EOS token (%s)", KeyAddEOS, KeyEOS)
	}

	t.findEndOfGeneration(fim)
	t.buildSpecial(m)
	t.pieces = make([]string, n)
	for id := range t.pieces {
		t.pieces[id] = t.makePiece(int32(id))
	}
	return t, nil
}

// Encode returns the tokens of text. addSpecial adds BOS and EOS as the
// model's add_bos_token and add_eos_token ask; parseSpecial matches the text
// of control tokens (as chat templates write them) as those tokens. Without
// it, control-token text is tokenized as ordinary text; user-defined tokens
// are matched either way, as llama.cpp does.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	prevSpecial := true
	for _, f := range t.partition(text, parseSpecial) {
		if f.token >= 0 {
			out = append(out, f.token)
			prevSpecial = true
			continue
		}
		s := text[f.start:f.end]
		if t.spm != nil {
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.spm.encode(escapeSpaces(s), out)
		} else {
			out = t.bpe.encode(normalizeUTF8(s), t.preTok, out)
		}
		prevSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Model is tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SPM).
func (t *Tokenizer) Model() string { return t.model }

// Pre is the pre-tokenizer name (tokenizer.ggml.pre) in use.
func (t *Tokenizer) Pre() string { return t.pre }

// BOS is the beginning-of-sequence token, -1 when there is none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence token, -1 when there is none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT is the end-of-turn token, -1 when there is none.
func (t *Tokenizer) EOT() int32 { return t.eot }

// Unknown is the unknown token, -1 when there is none.
func (t *Tokenizer) Unknown() int32 { return t.unk }

// Padding is the padding token, -1 when there is none.
func (t *Tokenizer) Padding() int32 { return t.pad }

// AddBOS and AddEOS report whether Encode with addSpecial adds BOS / EOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, the FIM
// pad/repo/file-separator tokens, and tokens such as <|im_end|> and
// <|endoftext|> that llama.cpp recognizes by their text.
func (t *Tokenizer) IsEOG(id int32) bool {
	_, found := slices.BinarySearch(t.eog, id)
	return found
}

// EOG returns the end-of-generation tokens in increasing order.
func (t *Tokenizer) EOG() []int32 { return slices.Clone(t.eog) }

// Special returns the control and user-defined tokens in increasing order.
func (t *Tokenizer) Special() []int32 {
	var ids []int32
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined) != 0 {
			ids = append(ids, int32(id))
		}
	}
	return ids
}

// Token returns the stored text of token id ("" when out of range).
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// IsControl reports whether id is a control token (BOS, EOS, chat markers).
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&attrControl != 0
}

// Warnings are the fallbacks FromGGUF took for incomplete metadata, for the
// caller to show.
func (t *Tokenizer) Warnings() []string { return t.warnings }
