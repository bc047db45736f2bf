package hub

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Name says which model to fetch: a Hugging Face repository and, optionally,
// the quantization to pick from it, as in "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M".
type Name struct {
	Repo  string // "org/repo"
	Quant string // "Q4_K_M", matched case-insensitively; "" for the default
}

func (n Name) String() string {
	if n.Quant == "" {
		return n.Repo
	}
	return n.Repo + ":" + n.Quant
}

// ParseName parses "org/repo[:QUANT]". An "hf.co/" or "huggingface.co/"
// prefix is accepted, as ollama writes Hugging Face names. Both parts end up
// in file paths and URLs, so anything that is not a plain Hub repository id
// (no "..", no absolute paths, no backslashes, no "--", which the cache
// layout uses as its separator) is refused.
func ParseName(s string) (Name, error) {
	orig := s
	for _, p := range []string{"https://", "hf.co/", "huggingface.co/"} {
		s = strings.TrimPrefix(s, p)
	}
	repo, quant, hasQuant := strings.Cut(s, ":")
	org, rest, ok := strings.Cut(repo, "/")
	if !ok || strings.Contains(rest, "/") {
		return Name{}, fmt.Errorf("model name %q: want org/repo[:QUANT]", orig)
	}
	for _, part := range []string{org, rest} {
		if err := checkRepoPart(part); err != nil {
			return Name{}, fmt.Errorf("model name %q: %w", orig, err)
		}
	}
	if hasQuant {
		if quant == "" || len(quant) > 64 {
			return Name{}, fmt.Errorf("model name %q: empty or overlong quantization after ':'", orig)
		}
		for _, r := range quant {
			if !isWordRune(r) && r != '-' && r != '.' {
				return Name{}, fmt.Errorf("model name %q: quantization %q may hold only letters, digits, '_', '-' and '.'", orig, quant)
			}
		}
	}
	return Name{Repo: repo, Quant: quant}, nil
}

// checkRepoPart checks one half of a repository id by the Hub's rules:
// letters, digits, '-', '_' and '.', not starting or ending with '-' or '.',
// no "--" or "..", at most 96 characters.
func checkRepoPart(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty organization or repository")
	case len(p) > 96:
		return fmt.Errorf("%q is longer than 96 characters", p)
	case strings.Contains(p, "--") || strings.Contains(p, ".."):
		return fmt.Errorf("%q holds '--' or '..'", p)
	case strings.ContainsAny(p[:1], "-.") || strings.ContainsAny(p[len(p)-1:], "-."):
		return fmt.Errorf("%q starts or ends with '-' or '.'", p)
	}
	for _, r := range p {
		if !isWordRune(r) && r != '-' && r != '.' {
			return fmt.Errorf("%q holds %q: only letters, digits, '-', '_' and '.' are allowed", p, r)
		}
	}
	return nil
}

func isWordRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
}

// checkFileName checks a file name the Hub sent (a path inside the
// repository) before it becomes a path inside the cache: relative, '/'
// separated, no empty, "." or ".." elements, no backslashes or
// colons, and nothing but printable UTF-8: no control characters (C0 or
// C1), no bidirectional overrides, which would garble the terminal the
// name is shown on.
func checkFileName(name string) error {
	if name == "" || len(name) > 1024 {
		return fmt.Errorf("unsafe file name %q: empty or too long", name)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("unsafe file name %q: not UTF-8", name)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || r == '\\' || r == ':' {
			return fmt.Errorf("unsafe file name %q: holds %q", name, r)
		}
	}
	for elem := range strings.SplitSeq(name, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return fmt.Errorf("unsafe file name %q: absolute, or an empty, '.' or '..' element", name)
		}
	}
	return nil
}

// checkHex checks that s is n lowercase hexadecimal digits: commit ids (40)
// and sha256 sums (64) name directories and files in the cache.
func checkHex(what, s string, n int) error {
	if len(s) != n {
		return fmt.Errorf("%s %q: want %d hexadecimal digits", what, s, n)
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return fmt.Errorf("%s %q: want %d lowercase hexadecimal digits", what, s, n)
		}
	}
	return nil
}
