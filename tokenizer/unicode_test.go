package tokenizer

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

func TestDecodeRune(t *testing.T) {
	for _, c := range []struct {
		in   string
		r    rune
		size int
	}{
		{"a", 'a', 1},
		{"é", 'é', 2},
		{"€", '€', 3},
		{"😀", '😀', 4},
		{"\xc0\x80", 0, 2},          // overlong: llama.cpp decodes it
		{"\xed\xa0\x80", 0xd800, 3}, // surrogate: likewise
		{"\x80", utf8.RuneError, 1}, // stray continuation byte
		{"\xe2\x82", utf8.RuneError, 1},
		{"\xe2\x82a", utf8.RuneError, 1},
		{"\xf5\x80\x80\x80", utf8.RuneError, 1}, // past U+10FFFF
		{"\xff", utf8.RuneError, 1},
	} {
		r, n := decodeRune(c.in, 0)
		if r != c.r || n != c.size {
			t.Errorf("decodeRune(%q) = %U, %d; want %U, %d", c.in, r, n, c.r, c.size)
		}
	}
	// On valid UTF-8 it agrees with the standard library.
	rng := rand.New(rand.NewPCG(15, 16))
	for range 10000 {
		s := randomText(rng, 8, false)
		for i := 0; i < len(s); {
			r, n := decodeRune(s, i)
			r2, n2 := utf8.DecodeRuneInString(s[i:])
			if r != r2 || n != n2 {
				t.Fatalf("decodeRune(%q) = %U, %d; utf8 says %U, %d", s[i:], r, n, r2, n2)
			}
			i += n
		}
	}
}

func TestNormalizeUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"a\xffb":           "a\uFFFDb",
		"\xc0\x80":         "\x00",
		"\xed\xa0\x80x":    "\xed\xa0\x80x",
		"\xe2\x82":         "\uFFFD\uFFFD",
		"\xf5\x80\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
	} {
		if got := normalizeUTF8(in); got != want {
			t.Errorf("normalizeUTF8(%q) = %q, want %q", in, got, want)
		}
	}
	// Normalizing twice changes nothing.
	rng := rand.New(rand.NewPCG(17, 18))
	for range 2000 {
		s := normalizeUTF8(randomText(rng, 30, true))
		if again := normalizeUTF8(s); again != s {
			t.Fatalf("normalizeUTF8 not idempotent on %q: %q", s, again)
		}
	}
}

// The whitespace class must be llama.cpp's 25 codepoints.
func TestWhitespaceClass(t *testing.T) {
	want := map[rune]bool{}
	for _, r := range []rune{0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
		0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000} {
		want[r] = true
	}
	for r := rune(0); r < 0x110000; r++ {
		if got := classOfRune(r)&cpSpace != 0; got != want[r] {
			t.Errorf("U+%04X whitespace = %v", r, got)
		}
	}
}

func TestCharacterClasses(t *testing.T) {
	for _, c := range []struct {
		r    rune
		want cpClass
	}{
		{'a', cpValid | cpLetter}, {'ж', cpValid | cpLetter}, {'日', cpValid | cpLetter},
		{'7', cpValid | cpNumber}, {'²', cpValid | cpNumber}, {'Ⅻ', cpValid | cpNumber},
		{'.', cpValid}, {'€', cpValid}, {'\u0301', cpValid}, {0xd800, cpValid}, {' ', cpValid | cpSpace},
	} {
		if got := classOfRune(c.r); got != c.want {
			t.Errorf("class of %U = %b, want %b", c.r, got, c.want)
		}
	}
}
