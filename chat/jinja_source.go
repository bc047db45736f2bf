package chat

import "strings"

// This file prepares a template's source for gonja: where gonja would
// read text otherwise than jinja2 does, an exact rewrite of the text makes
// it read it the same.

// gonjaRewrites are exact rewrites of template text that gonja cannot
// parse into text it can, with the same output. gonja reads `a if c else
// b` only as a whole {{ }} or {% set %} expression, never inside
// parentheses, so each rewrite is one real template's expression, kept
// only where splitting it is provably the same.
var gonjaRewrites = []struct{ from, to string }{
	// Gemma 3 (google/gemma-3-*-it). Both operands of the last + are
	// strings: '<start_of_turn>' + role + '\n' is a concatenation of
	// strings, and the template sets first_user_prefix only to strings. So
	// adding them is writing one after the other, and an error of the
	// first part is an error in both forms.
	{
		from: `{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}`,
		to:   `{{ '<start_of_turn>' + role + '\n' }}{{ first_user_prefix if loop.first else "" }}`,
	},
}

// rewriteForGonja applies gonjaRewrites and keepInlineWhitespace to a
// template's source.
func rewriteForGonja(src string) string {
	for _, r := range gonjaRewrites {
		src = strings.ReplaceAll(src, r.from, r.to)
	}
	return keepInlineWhitespace(src)
}

// keepInlineWhitespace marks with + (no lstrip) each {% or {# tag that
// follows another tag on the same line with only spaces or tabs between.
// jinja2's lstrip_blocks strips the white space before a tag only from the
// start of a line; gonja's also strips it after a tag ("{{ x }} {% if %}"
// loses its space). A tag whose white space goes anyway (the tag before
// ends with -, this one starts with -) or is marked already is left.
// Text that does not lex (an unclosed tag or string) is left to gonja, to
// refuse.
func keepInlineWhitespace(src string) string {
	var b strings.Builder
	copied := 0    // src[:copied] is in b
	dataStart := 0 // where the text since the last tag starts
	afterTag := false
	rightStripped := false // the last tag ends with -
	for i := 0; ; {
		j := nextTagStart(src, i)
		if j < 0 {
			break
		}
		open := src[j : j+2]
		data := src[dataStart:j]
		if open != "{{" && afterTag && !rightStripped && data != "" && strings.Trim(data, " \t") == "" &&
			(j+2 == len(src) || src[j+2] != '-' && src[j+2] != '+') {
			b.WriteString(src[copied : j+2])
			b.WriteByte('+')
			copied = j + 2
		}
		end := tagEnd(src, j)
		if end < 0 {
			break
		}
		rightStripped = src[end-3] == '-'
		afterTag = true
		i, dataStart = end, end
		if open == "{%" && isRawTag(src[j+2:end-2]) {
			// A raw block's body is text up to {% endraw %}; gonja keeps
			// the white space before it, as jinja2 does.
			k := endRaw(src, end)
			if k < 0 {
				break
			}
			end = tagEnd(src, k)
			if end < 0 {
				break
			}
			rightStripped = src[end-3] == '-'
			i, dataStart = end, end
		}
	}
	if copied == 0 {
		return src
	}
	b.WriteString(src[copied:])
	return b.String()
}

// nextTagStart is the index of the next {{, {% or {# at or after i, or -1.
func nextTagStart(src string, i int) int {
	for {
		k := strings.IndexByte(src[i:], '{')
		if k < 0 || i+k+1 >= len(src) {
			return -1
		}
		i += k
		switch src[i+1] {
		case '{', '%', '#':
			return i
		}
		i++
	}
}

// tagEnd is the index just past the closer of the tag that starts at j,
// or -1. A comment ends at the first #}; an expression or statement at
// the first }} or %} outside strings and brackets, as jinja2 lexes it.
func tagEnd(src string, j int) int {
	if src[j+1] == '#' {
		k := strings.Index(src[j+2:], "#}")
		if k < 0 {
			return -1
		}
		return j + 2 + k + 2
	}
	closer := "}}"
	if src[j+1] == '%' {
		closer = "%}"
	}
	depth := 0
	for i := j + 2; i < len(src); i++ {
		switch c := src[i]; c {
		case '\'', '"':
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' {
					i++
				}
			}
			if i >= len(src) {
				return -1
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth > 0 {
				depth--
			} else if closer == "}}" && strings.HasPrefix(src[i:], "}}") {
				return i + 2
			}
		case '%':
			if depth == 0 && closer == "%}" && strings.HasPrefix(src[i:], "%}") {
				return i + 2
			}
		}
	}
	return -1
}

// isRawTag reports whether a statement's text is "raw".
func isRawTag(body string) bool {
	return strings.Trim(body, "-+ \t\n\r") == "raw"
}

// endRaw is the index of the {% endraw %} tag from i, or -1.
func endRaw(src string, i int) int {
	for {
		k := strings.Index(src[i:], "{%")
		if k < 0 {
			return -1
		}
		i += k
		rest := strings.TrimLeft(src[i+2:], "-+ \t\n\r")
		if strings.HasPrefix(rest, "endraw") {
			return i
		}
		i += 2
	}
}
