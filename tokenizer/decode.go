package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// makePiece is llama.cpp's llama_token_to_piece with special = true:
// control, unknown and user-defined tokens print as their text, byte tokens
// as their byte, normal tokens with ▁ (SPM) or the byte-level alphabet
// (gpt2) decoded. Unused and undefined tokens print as nothing.
func (t *Tokenizer) makePiece(id int32) string {
	a, text := t.attrs[id], t.tokens[id]
	switch {
	case a&(attrControl|attrUnknown|attrUserDefined) != 0:
		return text
	case a&attrNormal != 0:
		if t.spm != nil {
			return strings.ReplaceAll(text, spaceEscape, " ")
		}
		return byteLevelPiece(text)
	case a&attrByte != 0:
		b, _ := byteTokenValue(text) // validated at load
		return string([]byte{b})
	}
	return ""
}

// byteLevelPiece decodes a byte-level token to its bytes. A character
// outside the alphabet is written the way llama.cpp's llama_decode_text
// writes it.
func byteLevelPiece(text string) string {
	if raw, ok := byteLevelDecode(text); ok {
		return raw
	}
	var b strings.Builder
	for _, r := range text {
		if c, ok := runeToByte[r]; ok {
			b.WriteByte(c)
			continue
		}
		b.WriteString("[UNK_BYTE_0x")
		for _, c := range []byte(string(r)) {
			fmt.Fprintf(&b, "%02x", c)
		}
		b.WriteString(text + "]")
	}
	return b.String()
}

// Piece returns the text of token id as printed: control tokens as their
// text, byte tokens as one raw byte (possibly part of a UTF-8 sequence), ""
// for an id out of range.
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// OutputPiece is the text token id adds to generated output: Piece, but ""
// for a control or unknown token unless special is set (llama.cpp's
// token_to_piece with that flag).
func (t *Tokenizer) OutputPiece(id int32, special bool) string {
	if !special && id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&(attrControl|attrUnknown) != 0 {
		return ""
	}
	return t.Piece(id)
}

// Decode returns the concatenated pieces of ids, bytes as they are. Like
// llama.cpp's llama_detokenize(remove_special=false, unparse_special=true),
// the space that SPM tokenization prefixed is dropped: one leading space of
// the first piece, when the vocabulary adds a space prefix, so that
// Decode(Encode(x, false, false)) == x. Unlike llama.cpp it does not "clean
// up" spaces before punctuation, which would lose text.
func (t *Tokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		p := t.Piece(id)
		if i == 0 && t.addSpacePrefix {
			p = strings.TrimPrefix(p, " ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// StreamDecoder turns generated tokens into text as they arrive, holding
// back the bytes of a UTF-8 sequence that later tokens complete, so that the
// stream never contains a broken character. Bytes that can never become
// valid UTF-8 come out as U+FFFD.
type StreamDecoder struct {
	t       *Tokenizer
	special bool
	pending []byte
}

// NewStreamDecoder returns a decoder for a stream of generated tokens. Unlike
// Decode it strips no space: its output continues a prompt. Control and
// unknown tokens (<|im_start|>, <file_sep>, <unk>) print as nothing unless
// special is set, as llama.cpp prints generated text (llama-completion and
// llama-server without --special: token_to_piece with special = false).
func (t *Tokenizer) NewStreamDecoder(special bool) *StreamDecoder {
	return &StreamDecoder{t: t, special: special}
}

// Next adds one token and returns the text it completes, possibly "".
func (d *StreamDecoder) Next(id int32) string {
	d.pending = append(d.pending, d.t.OutputPiece(id, d.special)...)
	return d.take(false)
}

// Flush returns what is held back, each byte of an incomplete sequence as
// U+FFFD, and resets the decoder.
func (d *StreamDecoder) Flush() string {
	return d.take(true)
}

// take returns the complete characters of pending, and at the end (flush)
// the incomplete rest, and keeps the rest otherwise.
func (d *StreamDecoder) take(flush bool) string {
	var b strings.Builder
	i := 0
	for i < len(d.pending) {
		rest := d.pending[i:]
		if !flush && !utf8.FullRune(rest) {
			break // a sequence later bytes may complete
		}
		r, n := utf8.DecodeRune(rest)
		if r == utf8.RuneError && n <= 1 {
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		b.Write(rest[:n])
		i += n
	}
	d.pending = append(d.pending[:0], d.pending[i:]...)
	return b.String()
}
