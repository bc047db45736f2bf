package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// cpClass holds the Unicode classes the pre-tokenizers test, in the manner of
// llama.cpp's unicode_cpt_flags.
type cpClass uint8

const (
	// cpValid is set for every codepoint inside the piece being split and for
	// none past its end, so "next codepoint has class X" is false at the end.
	cpValid  cpClass = 1 << iota
	cpLetter         // \p{L}
	cpNumber         // \p{N}
	cpSpace          // \s: unicode.IsSpace, the same 25 codepoints as llama.cpp's whitespace set
)

// asciiClass is the class of each ASCII byte, the common case.
var asciiClass = func() (t [utf8.RuneSelf]cpClass) {
	for r := range t {
		t[r] = classOfRune(rune(r))
	}
	return t
}()

func classOfRune(r rune) cpClass {
	c := cpValid
	switch {
	case unicode.IsLetter(r):
		c |= cpLetter
	case unicode.IsNumber(r):
		c |= cpNumber
	case unicode.IsSpace(r):
		c |= cpSpace
	}
	return c
}

// classAt decodes the codepoint at text[p:] and returns its class and size;
// at or past end it returns (0, 0). text must be normalized (see
// normalizeUTF8).
func classAt(text string, p, end int) (cpClass, int) {
	if p >= end {
		return 0, 0
	}
	if c := text[p]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := decodeRune(text, p)
	return classOfRune(r), n
}

// decodeRune decodes the codepoint at s[i:] the way llama.cpp's
// unicode_cpt_from_utf8 does: continuation bytes are checked, overlong forms
// and surrogates are not. An invalid sequence is (U+FFFD, 1). Codepoints past
// U+10FFFF, on which llama.cpp throws, are also (U+FFFD, 1).
func decodeRune(s string, i int) (rune, int) {
	c := s[i]
	if c < 0x80 {
		return rune(c), 1
	}
	n := len(s) - i
	switch {
	case c&0x40 == 0:
		return utf8.RuneError, 1
	case c&0x20 == 0:
		if n < 2 || s[i+1]&0xc0 != 0x80 {
			return utf8.RuneError, 1
		}
		return rune(c&0x1f)<<6 | rune(s[i+1]&0x3f), 2
	case c&0x10 == 0:
		if n < 3 || s[i+1]&0xc0 != 0x80 || s[i+2]&0xc0 != 0x80 {
			return utf8.RuneError, 1
		}
		return rune(c&0x0f)<<12 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), 3
	case c&0x08 == 0:
		if n < 4 || s[i+1]&0xc0 != 0x80 || s[i+2]&0xc0 != 0x80 || s[i+3]&0xc0 != 0x80 {
			return utf8.RuneError, 1
		}
		r := rune(c&0x07)<<18 | rune(s[i+1]&0x3f)<<12 | rune(s[i+2]&0x3f)<<6 | rune(s[i+3]&0x3f)
		if r > unicode.MaxRune {
			return utf8.RuneError, 1
		}
		return r, 4
	}
	return utf8.RuneError, 1
}

// appendCodepoint appends the UTF-8 form of r as llama.cpp's
// unicode_cpt_to_utf8 writes it; unlike utf8.AppendRune it encodes
// surrogates as themselves.
func appendCodepoint(b []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(b, byte(r))
	case r < 0x800:
		return append(b, 0xc0|byte(r>>6), 0x80|byte(r)&0x3f)
	case r < 0x10000:
		return append(b, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
	}
	return append(b, 0xf0|byte(r>>18), 0x80|byte(r>>12)&0x3f, 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
}

// normalizeUTF8 returns s decoded with decodeRune and encoded again, which is
// what llama.cpp's byte-level BPE path tokenizes: every invalid byte becomes
// U+FFFD. Valid UTF-8 comes back unchanged and without copying.
func normalizeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		b = appendCodepoint(b, r)
		i += n
	}
	return string(b)
}

// decodeRunes decodes a normalized string into codepoints and the byte offset
// of each (plus a final entry, len(s)).
func decodeRunes(s string) (runes []rune, offsets []int) {
	runes = make([]rune, 0, len(s))
	offsets = make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		runes = append(runes, r)
		offsets = append(offsets, i)
		i += n
	}
	return runes, append(offsets, len(s))
}
