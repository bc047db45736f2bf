package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// This file closes the gaps between gonja (v2.9.1) and the jinja2 that
// transformers renders chat templates with, where templates of real
// models fall into them. testdata/conformance.json holds the cases.

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

// rewriteForGonja applies gonjaRewrites to a template's source.
func rewriteForGonja(src string) string {
	for _, r := range gonjaRewrites {
		src = strings.ReplaceAll(src, r.from, r.to)
	}
	return src
}

// controlStructures is gonja's set plus transformers' {% generation %}
// block (its AssistantTracker extension), which only marks the assistant's
// text for return_assistant_tokens_mask: rendering writes its body as is.
func controlStructures() *exec.ControlStructureSet {
	set := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{
		"generation": generationParser,
	})
	return set.Update(builtins.ControlStructures)
}

type generationBlock struct {
	wrapper *nodes.Wrapper
}

func (g *generationBlock) Position() *tokens.Token { return g.wrapper.Position() }

func (g *generationBlock) String() string {
	t := g.Position()
	return fmt.Sprintf("GenerationControlStructure(Line=%d Col=%d)", t.Line, t.Col)
}

func (g *generationBlock) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return r.ExecuteWrapper(g.wrapper)
}

func generationParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	if !args.Stream().End() {
		return nil, args.Error("generation takes no arguments", nil)
	}
	wrapper, _, err := p.WrapUntil("endgeneration")
	if err != nil {
		return nil, err
	}
	return &generationBlock{wrapper: wrapper}, nil
}

// methods is gonja's set with the str methods templates call given
// Python's signatures: gonja's strip family and split take no default
// that works (a bare .lstrip() or .split() fails), and its replace
// requires a count.
func methods() exec.Methods {
	str := map[string]exec.Method[string]{}
	for _, name := range []string{
		"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith", "expandtabs",
		"find", "format", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "islower",
		"isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
		"partition", "removeprefix", "removesuffix", "rfind", "rjust", "rpartition",
		"splitlines", "startswith", "swapcase", "title", "upper", "zfill",
	} {
		if m, ok := builtins.Methods.Str.Get(name); ok {
			str[name] = m
		}
	}
	str["strip"] = stripMethod(true, true)
	str["lstrip"] = stripMethod(true, false)
	str["rstrip"] = stripMethod(false, true)
	str["split"] = splitMethod(false)
	str["rsplit"] = splitMethod(true)
	str["replace"] = replaceMethod
	m := builtins.Methods
	m.Str = exec.NewMethodSet(str)
	return m
}

// isPySpace is Python's str.isspace for one character: Unicode white
// space and the separators \x1c to \x1f.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// stripMethod is str.strip, lstrip or rstrip: chars None or left out
// strips white space, else any of the characters given.
func stripMethod(left, right bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.KwArgs) > 0 || len(args.Args) > 1 {
			return nil, errors.New("strip takes at most one positional argument")
		}
		cut := isPySpace
		if len(args.Args) == 1 && !args.Args[0].IsNil() {
			if !args.Args[0].IsString() {
				return nil, errors.New("strip arg must be None or str")
			}
			chars := args.Args[0].String()
			cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
		}
		if left {
			self = strings.TrimLeftFunc(self, cut)
		}
		if right {
			self = strings.TrimRightFunc(self, cut)
		}
		return self, nil
	}
}

// splitMethod is str.split or str.rsplit(sep=None, maxsplit=-1).
func splitMethod(fromRight bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		sep, maxsplit := exec.AsValue(nil), exec.AsValue(-1)
		if len(args.Args) > 2 {
			return nil, errors.New("split takes at most 2 arguments")
		}
		if len(args.Args) > 0 {
			sep = args.Args[0]
		}
		if len(args.Args) > 1 {
			maxsplit = args.Args[1]
		}
		for k, v := range args.KwArgs {
			switch k {
			case "sep":
				sep = v
			case "maxsplit":
				maxsplit = v
			default:
				return nil, fmt.Errorf("split got an unexpected keyword argument %q", k)
			}
		}
		if !maxsplit.IsInteger() {
			return nil, errors.New("split: maxsplit must be an integer")
		}
		n := maxsplit.Integer()
		var parts []string
		switch {
		case sep.IsNil():
			parts = splitSpace(self, n, fromRight)
		case !sep.IsString():
			return nil, errors.New("split: sep must be None or str")
		case sep.String() == "":
			return nil, errors.New("split: empty separator")
		case n < 0:
			parts = strings.Split(self, sep.String())
		case fromRight:
			parts = rsplitN(self, sep.String(), n)
		default:
			parts = strings.SplitN(self, sep.String(), n+1)
		}
		list := make([]any, len(parts))
		for i, p := range parts {
			list[i] = p
		}
		return list, nil
	}
}

// rsplitN splits s at the last n occurrences of sep.
func rsplitN(s, sep string, n int) []string {
	var tail []string
	for ; n > 0; n-- {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		tail = append(tail, s[i+len(sep):])
		s = s[:i]
	}
	parts := []string{s}
	for i := len(tail) - 1; i >= 0; i-- {
		parts = append(parts, tail[i])
	}
	return parts
}

// splitSpace is split with no separator: runs of white space separate,
// and the ends give no empty strings. With maxsplit n >= 0, the rest after
// n splits is one part, its white space on the far side kept.
func splitSpace(s string, n int, fromRight bool) []string {
	if n < 0 {
		return strings.FieldsFunc(s, isPySpace)
	}
	var parts []string
	if !fromRight {
		for {
			s = strings.TrimLeftFunc(s, isPySpace)
			if s == "" {
				return parts
			}
			if len(parts) == n {
				return append(parts, s)
			}
			i := strings.IndexFunc(s, isPySpace)
			if i < 0 {
				return append(parts, s)
			}
			parts = append(parts, s[:i])
			s = s[i:]
		}
	}
	for {
		s = strings.TrimRightFunc(s, isPySpace)
		if s == "" {
			break
		}
		if len(parts) == n {
			parts = append(parts, s)
			break
		}
		i := strings.LastIndexFunc(s, isPySpace)
		if i < 0 {
			parts = append(parts, s)
			break
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		parts = append(parts, s[i+size:])
		s = s[:i]
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return parts
}

// replaceMethod is str.replace(old, new, count=-1).
func replaceMethod(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.KwArgs) > 0 || len(args.Args) < 2 || len(args.Args) > 3 {
		return nil, errors.New("replace takes 2 or 3 positional arguments")
	}
	if !args.Args[0].IsString() || !args.Args[1].IsString() {
		return nil, errors.New("replace: old and new must be str")
	}
	count := -1
	if len(args.Args) == 3 {
		if !args.Args[2].IsInteger() {
			return nil, errors.New("replace: count must be an integer")
		}
		count = args.Args[2].Integer()
	}
	return strings.Replace(self, args.Args[0].String(), args.Args[1].String(), count), nil
}
