package tokenizer

import "unicode/utf8"

// The GPT-2 byte-level alphabet maps each byte to a printable character so
// that byte strings can be stored as text: printable Latin-1 bytes stand for
// themselves, the other 68 bytes map to U+0100 upwards in byte order.
var (
	byteToRune  [256]rune
	runeToByte  = map[rune]byte{}
	byteToUTF8s [256]string // byteToRune as UTF-8
)

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae && b <= 0xff {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
		byteToUTF8s[b] = string(byteToRune[b])
	}
}

// byteLevelEncode maps raw bytes into the byte-level alphabet.
func byteLevelEncode(raw string) string {
	b := make([]byte, 0, 2*len(raw))
	for i := 0; i < len(raw); i++ {
		b = utf8.AppendRune(b, byteToRune[raw[i]])
	}
	return string(b)
}

// byteLevelDecode maps byte-level text back to raw bytes. ok is false when
// text holds a character outside the alphabet.
func byteLevelDecode(text string) (raw string, ok bool) {
	b := make([]byte, 0, len(text))
	for _, r := range text {
		c, in := runeToByte[r]
		if !in {
			return "", false
		}
		b = append(b, c)
	}
	return string(b), true
}
