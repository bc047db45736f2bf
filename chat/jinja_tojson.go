package chat

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// jsonStyle is how json.dumps writes: its ensure_ascii, indent,
// separators and sort_keys.
type jsonStyle struct {
	ensureASCII     bool
	indented        bool
	indent          string
	itemSep, keySep string
	sortKeys        bool
}

// filterToJSON is transformers' tojson filter:
//
//	def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
//	    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
//
// so ", " and ": " between items without indent, non-ASCII kept, no HTML
// escaping, and a dict's keys in its order. A Go map has no order: its
// keys come sorted.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	style, err := parseJSONStyle(params)
	if err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	var b strings.Builder
	if err := style.write(&b, in.Interface(), 0); err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	return exec.AsSafeValue(b.String())
}

func parseJSONStyle(params *exec.VarArgs) (jsonStyle, error) {
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(params.Args) > len(names) {
		return jsonStyle{}, fmt.Errorf("takes at most %d arguments", len(names))
	}
	args := map[string]*exec.Value{}
	for i, a := range params.Args {
		args[names[i]] = a
	}
	for k, v := range params.KwArgs {
		if !slices.Contains(names, k) {
			return jsonStyle{}, fmt.Errorf("unexpected keyword argument %q", k)
		}
		if _, dup := args[k]; dup {
			return jsonStyle{}, fmt.Errorf("got multiple values for argument %q", k)
		}
		args[k] = v
	}
	s := jsonStyle{itemSep: ", ", keySep: ": "}
	if v, ok := args["ensure_ascii"]; ok {
		s.ensureASCII = v.IsTrue()
	}
	if v, ok := args["sort_keys"]; ok {
		s.sortKeys = v.IsTrue()
	}
	if v, ok := args["indent"]; ok && !v.IsNil() {
		s.indented = true
		switch {
		case v.IsInteger():
			s.indent = strings.Repeat(" ", max(v.Integer(), 0))
		case v.IsString():
			s.indent = v.String()
		default:
			return jsonStyle{}, errors.New("indent must be an integer or a string")
		}
		s.itemSep = ","
	}
	if v, ok := args["separators"]; ok && !v.IsNil() {
		var seps []string
		if v.IsList() {
			v.Iterate(func(_, _ int, e, _ *exec.Value) bool {
				if e.IsString() {
					seps = append(seps, e.String())
				}
				return true
			}, func() {})
		}
		if len(seps) != 2 || v.Len() != 2 {
			return jsonStyle{}, errors.New("separators must be an (item_separator, key_separator) pair of strings")
		}
		s.itemSep, s.keySep = seps[0], seps[1]
	}
	return s, nil
}

func (s jsonStyle) newline(b *strings.Builder, depth int) {
	if s.indented {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(s.indent, depth))
	}
}

type jsonPair struct {
	key   string
	value any
}

func (s jsonStyle) write(b *strings.Builder, v any, depth int) error {
	if depth > 64 {
		return errors.New("nested too deep")
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		s.writeString(b, x)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pythonFloat(x))
	case *exec.Value:
		return s.write(b, x.Interface(), depth)
	case map[string]any:
		pairs := make([]jsonPair, 0, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			pairs = append(pairs, jsonPair{k, x[k]})
		}
		return s.writeObject(b, pairs, depth)
	case *exec.Dict: // a dict the template wrote, or a message: Python keeps its order
		pairs := make([]jsonPair, 0, len(x.Pairs))
		for _, p := range x.Pairs {
			if !p.Key.IsString() {
				return fmt.Errorf("keys must be strings, not %s", p.Key)
			}
			pairs = append(pairs, jsonPair{p.Key.String(), p.Value.Interface()})
		}
		return s.writeObject(b, pairs, depth)
	case exec.Dict:
		return s.write(b, &x, depth)
	default:
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			return fmt.Errorf("cannot write a %T as JSON", v)
		}
		if rv.Len() == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := range rv.Len() {
			if i > 0 {
				b.WriteString(s.itemSep)
			}
			s.newline(b, depth+1)
			if err := s.write(b, rv.Index(i).Interface(), depth+1); err != nil {
				return err
			}
		}
		s.newline(b, depth)
		b.WriteByte(']')
	}
	return nil
}

func (s jsonStyle) writeObject(b *strings.Builder, pairs []jsonPair, depth int) error {
	if len(pairs) == 0 {
		b.WriteString("{}")
		return nil
	}
	if s.sortKeys {
		slices.SortStableFunc(pairs, func(a, b jsonPair) int { return strings.Compare(a.key, b.key) })
	}
	b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(s.itemSep)
		}
		s.newline(b, depth+1)
		s.writeString(b, p.key)
		b.WriteString(s.keySep)
		if err := s.write(b, p.value, depth+1); err != nil {
			return err
		}
	}
	s.newline(b, depth)
	b.WriteByte('}')
	return nil
}

// writeString quotes str as json.dumps does: \" \\ \b \f \n \r \t, other
// control characters as \u00XX, and with ensure_ascii every non-ASCII
// character as \uXXXX (a surrogate pair above U+FFFF).
func (s jsonStyle) writeString(b *strings.Builder, str string) {
	b.WriteByte('"')
	for _, r := range str {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r < 0x20 || s.ensureASCII && r > 0x7e:
				if r > 0xffff {
					r -= 0x10000
					fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pythonFloat is Python's repr of a float, as json.dumps writes it: the
// shortest digits, fixed notation from 1e-4 up to 1e16 with at least one
// decimal, else exponent notation.
func pythonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	fixed := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(fixed, '.') {
		fixed += ".0"
	}
	return fixed
}
