package tokenizer

import "fmt"

// TokenType is a token's type as tokenizer.ggml.token_type stores it
// (llama.cpp's llama_token_type).
type TokenType int32

// Token types.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

var typeNames = [...]string{"undefined", "normal", "unknown", "control", "user-defined", "unused", "byte"}

func (t TokenType) String() string {
	if t >= 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("TokenType(%d)", int32(t))
}

// tokenAttr is llama.cpp's llama_token_attr: a token's type as a bit, plus
// how special-token matching treats the whitespace around it.
type tokenAttr uint16

const (
	attrUnknown     tokenAttr = 1 << 0
	attrUnused      tokenAttr = 1 << 1
	attrNormal      tokenAttr = 1 << 2
	attrControl     tokenAttr = 1 << 3
	attrUserDefined tokenAttr = 1 << 4
	attrByte        tokenAttr = 1 << 5
	attrLStrip      tokenAttr = 1 << 7 // eat the whitespace before the token
	attrRStrip      tokenAttr = 1 << 8 // eat the whitespace after the token
)

func attrOf(t TokenType) tokenAttr {
	switch t {
	case TypeNormal:
		return attrNormal
	case TypeUnknown:
		return attrUnknown
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeUnused:
		return attrUnused
	case TypeByte:
		return attrByte
	}
	return 0
}
