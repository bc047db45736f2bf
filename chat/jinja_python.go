package chat

import (
	"errors"
	"fmt"
	"slices"
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

// controlStructures is gonja's set plus transformers' {% generation %}
// block (its AssistantTracker extension), which only marks the assistant's
// text for return_assistant_tokens_mask: rendering writes its body as is.
func controlStructures() *exec.ControlStructureSet {
	set := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{
		"generation": generationParser,
	})
	return limitControlStructures(set.Update(builtins.ControlStructures))
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

// dictPairs are a dict's keys and values in Python's order: a dict the
// template wrote, or a message, keeps the order it was made in; a Go map
// has none, so its keys come sorted.
func dictPairs(v *exec.Value) []*exec.Pair {
	switch d := v.Interface().(type) {
	case *exec.Dict:
		return d.Pairs
	case exec.Dict:
		return d.Pairs
	}
	var pairs []*exec.Pair
	v.Iterate(func(_, _ int, key, value *exec.Value) bool {
		pairs = append(pairs, &exec.Pair{Key: key, Value: value})
		return true
	}, func() {})
	return pairs
}

// filterItems is jinja2's items filter: a dict's (key, value) pairs, for
// {% for k, v in d|items %}; none or undefined gives none. gonja's reads
// only Go maps, so a dict the template wrote gave no pairs.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return exec.AsValue(errors.New("items takes no arguments"))
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("items: can only get item pairs from a mapping"))
	}
	items := []any{}
	for _, p := range dictPairs(in) {
		items = append(items, []any{p.Key.Interface(), p.Value.Interface()})
	}
	return exec.AsValue(items)
}

// filterDictSort is jinja2's dictsort(case_sensitive=False, by='key',
// reverse=False): the (key, value) pairs sorted, equal ones in the dict's
// order. gonja's reads only Go maps.
func filterDictSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("dictsort: can only sort a mapping"))
	}
	caseSensitive, by, reverse := false, "key", false
	for i, a := range params.Args {
		switch i {
		case 0:
			caseSensitive = a.IsTrue()
		case 1:
			by = a.String()
		case 2:
			reverse = a.IsTrue()
		default:
			return exec.AsValue(errors.New("dictsort takes at most 3 arguments"))
		}
	}
	for k, v := range params.KwArgs {
		switch k {
		case "case_sensitive":
			caseSensitive = v.IsTrue()
		case "by":
			by = v.String()
		case "reverse":
			reverse = v.IsTrue()
		default:
			return exec.AsValue(fmt.Errorf("dictsort got an unexpected keyword argument %q", k))
		}
	}
	if by != "key" && by != "value" {
		return exec.AsValue(errors.New("dictsort: by must be 'key' or 'value'"))
	}
	pairs := slices.Clone(dictPairs(in))
	sortKey := func(p *exec.Pair) *exec.Value {
		v := p.Key
		if by == "value" {
			v = p.Value
		}
		if !caseSensitive && v.IsString() {
			return exec.AsValue(strings.ToLower(v.String()))
		}
		return v
	}
	var err error
	less := func(a, b *exec.Value) bool {
		switch {
		case a.IsString() && b.IsString():
			return a.String() < b.String()
		case a.IsNumber() && b.IsNumber():
			return a.Float() < b.Float()
		}
		err = fmt.Errorf("dictsort: cannot compare %s and %s", a, b)
		return false
	}
	slices.SortStableFunc(pairs, func(p, q *exec.Pair) int {
		a, b := sortKey(p), sortKey(q)
		if reverse {
			a, b = b, a
		}
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
	if err != nil {
		return exec.AsValue(err)
	}
	items := make([]any, len(pairs))
	for i, p := range pairs {
		items[i] = []any{p.Key.Interface(), p.Value.Interface()}
	}
	return exec.AsValue(items)
}

// dictMethod is one of dict.items, keys and values, in the dict's order
// (gonja's sort the keys).
func dictMethod(name string) exec.Method[map[string]any] {
	return func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) > 0 || len(args.KwArgs) > 0 {
			return nil, fmt.Errorf("%s takes no arguments", name)
		}
		out := []any{}
		for _, p := range dictPairs(self) {
			switch name {
			case "items":
				out = append(out, []any{p.Key.Interface(), p.Value.Interface()})
			case "keys":
				out = append(out, p.Key.Interface())
			case "values":
				out = append(out, p.Value.Interface())
			}
		}
		return out, nil
	}
}

// methods is gonja's set with the str methods templates call given
// Python's signatures (gonja's strip family and split take no default
// that works: a bare .lstrip() or .split() fails; its replace requires a
// count), and dict.items, keys and values in the dict's order.
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
			switch name {
			case "center", "ljust", "rjust", "zfill", "expandtabs":
				m = limitWidthMethod(name, m)
			}
			str[name] = m
		}
	}
	str["strip"] = stripMethod(true, true)
	str["lstrip"] = stripMethod(true, false)
	str["rstrip"] = stripMethod(false, true)
	str["split"] = splitMethod(false)
	str["rsplit"] = splitMethod(true)
	str["replace"] = replaceMethod
	dict := map[string]exec.Method[map[string]any]{}
	for _, name := range []string{"get", "pop", "setdefault", "update", "copy", "clear"} {
		if m, ok := builtins.Methods.Dict.Get(name); ok {
			dict[name] = m
		}
	}
	for _, name := range []string{"items", "keys", "values"} {
		dict[name] = dictMethod(name)
	}
	m := builtins.Methods
	m.Str = exec.NewMethodSet(str)
	m.Dict = exec.NewMethodSet(dict)
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
