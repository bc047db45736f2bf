package tokenizer

// A splitStep splits text[start:end] into consecutive pieces and appends the
// end offset of each to out. text is normalized UTF-8 (normalizeUTF8) and
// start, end fall on codepoint boundaries.
//
// llama.cpp runs a pre-tokenizer's regexes one after another: each splits
// every piece the previous one produced into its matches and the unmatched
// stretches between them, both kept as pieces. The steps here reproduce that;
// the hand-written ones are tested against their regexes (split_regexp.go).
type splitStep func(text string, start, end int, out []int) []int

// splitPieces runs steps over text and returns the end offset of each piece.
func splitPieces(text string, steps []splitStep) []int {
	if text == "" {
		return nil
	}
	ends := []int{len(text)}
	var next []int
	for _, step := range steps {
		next = next[:0]
		start := 0
		for _, end := range ends {
			next = step(text, start, end, next)
			start = end
		}
		ends, next = next, ends
	}
	return ends
}

// addEnd appends end to out unless it is already the last boundary, so that
// no empty piece is produced.
func addEnd(out []int, end int) []int {
	if len(out) > 0 && out[len(out)-1] == end {
		return out
	}
	return append(out, end)
}

// skipClass returns the offset of the first codepoint at or after p that has
// none of the classes in want.
func skipClass(text string, p, end int, want cpClass) int {
	for p < end {
		c, n := classAt(text, p, end)
		if c&want == 0 {
			break
		}
		p += n
	}
	return p
}

// skipOther skips codepoints that are neither whitespace, letters nor
// numbers: [^\s\p{L}\p{N}]+.
func skipOther(text string, p, end int) int {
	for p < end {
		c, n := classAt(text, p, end)
		if c&(cpSpace|cpLetter|cpNumber) != 0 {
			break
		}
		p += n
	}
	return p
}

// contraction returns the length of 's|'t|'re|'ve|'m|'ll|'d at text[p:end]
// (text[p] is an apostrophe), or 0. foldCase also accepts upper-case letters.
func contraction(text string, p, end int, foldCase bool) int {
	if p+1 >= end {
		return 0
	}
	lower := func(c byte) byte {
		if foldCase && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	c1 := lower(text[p+1])
	if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
		return 2
	}
	if p+2 < end {
		c2 := lower(text[p+2])
		if c1 == 'r' && c2 == 'e' || c1 == 'v' && c2 == 'e' || c1 == 'l' && c2 == 'l' {
			return 3
		}
	}
	return 0
}

// whitespaceRun measures the run of whitespace at text[p:end]: its end, the
// start of its last codepoint, its length in codepoints, and the offset just
// past its last '\r' or '\n' (-1 when it has none).
func whitespaceRun(text string, p, end int) (runEnd, lastStart, count, pastNewline int) {
	runEnd, lastStart, pastNewline = p, p, -1
	for runEnd < end {
		c, n := classAt(text, runEnd, end)
		if c&cpSpace == 0 {
			break
		}
		if b := text[runEnd]; b == '\r' || b == '\n' {
			pastNewline = runEnd + 1
		}
		lastStart = runEnd
		runEnd += n
		count++
	}
	return runEnd, lastStart, count, pastNewline
}

// splitGPT2 is the GPT-2 pre-tokenizer regex
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// as llama.cpp's unicode_regex_split_custom_gpt2 implements it.
func splitGPT2(text string, start, end int, out []int) []int {
	for pos := start; pos < end; {
		if text[pos] == '\'' {
			if k := contraction(text, pos, end, false); k > 0 {
				pos += k
				out = addEnd(out, pos)
				continue
			}
		}
		c, n := classAt(text, pos, end)
		c2, p2 := c, pos
		if text[pos] == ' ' {
			c2, _ = classAt(text, pos+1, end)
			p2 = pos + 1
		}
		switch {
		case c2&cpLetter != 0:
			pos = skipClass(text, p2, end, cpLetter)
		case c2&cpNumber != 0:
			pos = skipClass(text, p2, end, cpNumber)
		case c2&cpValid != 0 && c2&(cpSpace|cpLetter|cpNumber) == 0:
			pos = skipOther(text, p2, end)
		default:
			runEnd, lastStart, count, _ := whitespaceRun(text, pos, end)
			switch {
			case count > 1 && runEnd < end: // \s+(?!\S): leave the last one to the next piece
				pos = lastStart
			case count > 0:
				pos = runEnd
			default:
				pos += n
			}
		}
		out = addEnd(out, pos)
	}
	return out
}

// splitLlama3 is the Llama 3 pre-tokenizer regex
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// as llama.cpp's unicode_regex_split_custom_llama3 implements it, with
// \p{N}{1,maxDigits}: 3 for Llama 3, 1 for Qwen2 and StableLM2.
func splitLlama3(text string, start, end int, out []int, maxDigits int) []int {
	for pos := start; pos < end; {
		b := text[pos]
		if b == '\'' {
			if k := contraction(text, pos, end, true); k > 0 {
				pos += k
				out = addEnd(out, pos)
				continue
			}
		}
		c, n := classAt(text, pos, end)
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if b != '\r' && b != '\n' && c&cpNumber == 0 {
			if next, _ := classAt(text, pos+n, end); c&cpLetter != 0 || next&cpLetter != 0 {
				pos = skipClass(text, pos+n, end, cpLetter)
				out = addEnd(out, pos)
				continue
			}
		}
		// \p{N}{1,maxDigits}
		if c&cpNumber != 0 {
			digits := 0
			for pos < end {
				cd, nd := classAt(text, pos, end)
				if cd&cpNumber == 0 {
					break
				}
				pos += nd
				if digits++; digits == maxDigits {
					out = addEnd(out, pos)
					digits = 0
				}
			}
			out = addEnd(out, pos)
			continue
		}
		//  ?[^\s\p{L}\p{N}]+[\r\n]*
		c2, p2 := c, pos
		if b == ' ' {
			c2, _ = classAt(text, pos+1, end)
			p2 = pos + 1
		}
		if c2&(cpSpace|cpLetter|cpNumber) == 0 {
			pos = skipOther(text, p2, end)
			for pos < end && (text[pos] == '\r' || text[pos] == '\n') {
				pos++
			}
			out = addEnd(out, pos)
			continue
		}
		runEnd, lastStart, count, pastNewline := whitespaceRun(text, pos, end)
		switch {
		case pastNewline > 0: // \s*[\r\n]+
			pos = pastNewline
		case count > 1 && runEnd < end: // \s+(?!\S)
			pos = lastStart
		case count > 0: // \s+
			pos = runEnd
		default:
			pos += n
		}
		out = addEnd(out, pos)
	}
	return out
}

// splitNumbers is the regex \p{N}: every number codepoint is a piece of its
// own, and so is each stretch between them.
func splitNumbers(text string, start, end int, out []int) []int {
	for pos := start; pos < end; {
		c, n := classAt(text, pos, end)
		if c&cpNumber != 0 {
			pos += n
		} else {
			for pos < end {
				c, n := classAt(text, pos, end)
				if c&cpNumber != 0 {
					break
				}
				pos += n
			}
		}
		out = addEnd(out, pos)
	}
	return out
}
