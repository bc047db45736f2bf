package tokenizer

import (
	"bytes"
	"fmt"

	"gotok/gguf"
)

// Vocab is a tokenizer as GGUF metadata describes it. ImportHF builds one
// from a Hugging Face tokenizer.json; SetMetadata writes it. Its fields may be
// adjusted between the two (for example the special ids from a model's
// config.json).
type Vocab struct {
	Model  string      // tokenizer.ggml.model: "gpt2"
	Pre    string      // tokenizer.ggml.pre
	Tokens []string    // by id, in the byte-level alphabet
	Types  []TokenType // by id
	Merges []string    // "left right", by rank

	BOS, EOS, EOT, Unknown, Padding int32 // -1 when absent
	AddBOS, AddEOS                  bool
}

// SetMetadata writes the vocabulary as tokenizer.ggml.* keys.
func (v *Vocab) SetMetadata(w *gguf.Writer) {
	w.Set(KeyModel, v.Model)
	w.Set(KeyPre, v.Pre)
	w.Set(KeyTokens, v.Tokens)
	types := make([]int32, len(v.Types))
	for i, ty := range v.Types {
		types[i] = int32(ty)
	}
	w.Set(KeyTokenType, types)
	w.Set(KeyMerges, v.Merges)
	for _, id := range []struct {
		key string
		id  int32
	}{{KeyBOS, v.BOS}, {KeyEOS, v.EOS}, {KeyEOT, v.EOT}, {KeyUnknown, v.Unknown}, {KeyPadding, v.Padding}} {
		if id.id >= 0 {
			w.Set(id.key, uint32(id.id))
		}
	}
	w.Set(KeyAddBOS, v.AddBOS)
	w.Set(KeyAddEOS, v.AddEOS)
}

// Tokenizer builds the tokenizer the vocabulary describes, through the same
// metadata path (and validation) as a GGUF file.
func (v *Vocab) Tokenizer() (*Tokenizer, error) {
	w := gguf.NewWriter()
	v.SetMetadata(w)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("tokenizer: encode vocabulary: %w", err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("tokenizer: decode vocabulary: %w", err)
	}
	return FromGGUF(&f.Metadata)
}
