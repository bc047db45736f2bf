package tokenizer

import (
	"fmt"

	"github.com/dlclark/regexp2"
)

// The pre-tokenizer regexes llama.cpp uses (src/llama-vocab.cpp), in a form
// regexp2 runs with the same meaning: \s is unicode.IsSpace, the same set as
// llama.cpp's, and \z stands for ECMAScript's $ (end of the piece only).
const (
	regexGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	// Python's (?i:...) is spelled out, as llama.cpp does for std::regex.
	regexLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexNumber = `\p{N}`

	// Written with escapes: several of its characters (U+1F7D, U+1FBE,
	// U+1FD3, U+1FDB, U+2126, U+212A) are not in Unicode normal form, and an
	// editor that normalizes them would silently change the ranges.
	regexDeepSeekLLMLetters = "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
	regexDeepSeekLLMPunct   = `\s?[!-/:-~！-／：-～‘-‟　-。]+`
	regexCJK                = `[一-龥ࠀ-一가-퟿]+`
)

// regexpStep returns a splitStep that splits by a regexp2 pattern: each match
// and each unmatched stretch between matches is a piece.
func regexpStep(pattern string) (splitStep, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: compile pre-tokenizer regex %q: %w", pattern, err)
	}
	return func(text string, start, end int, out []int) []int {
		return splitRegexp(re, text, start, end, out)
	}, nil
}

func splitRegexp(re *regexp2.Regexp, text string, start, end int, out []int) []int {
	// Match on codepoints decoded as llama.cpp decodes them, so that offsets
	// map back to text exactly, surrogates included.
	runes, offsets := decodeRunes(text[start:end])
	prev := 0
	m, err := re.FindRunesMatch(runes)
	for err == nil && m != nil {
		if m.Index > prev {
			out = addEnd(out, start+offsets[m.Index])
		}
		if m.Length > 0 {
			out = addEnd(out, start+offsets[m.Index+m.Length])
		}
		prev = m.Index + m.Length
		m, err = re.FindNextMatch(m)
	}
	// A regexp2 error (only a timeout, and none is set) leaves the rest as
	// one piece.
	return addEnd(out, end)
}
