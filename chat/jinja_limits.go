package chat

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	gonjacs "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// A chat template comes with the model file, so a hostile one must fail
// to parse or to render, never take the process down or hang it. gonja
// recurses in Go for macros, recursive for-loops and includes, and a Go
// stack overflow is fatal, not a panic that Render could recover; its
// range sends numbers from a goroutine until the loop has taken them
// all. So chat templates get:
//   - no include, import, from or extends (a template is one string; an
//     include of itself recursed until the stack ran out),
//   - no recursive for-loops (loop(x) on the same list never ends),
//   - macros that fail past macroDepthMax nested calls of themselves,
//   - a range of at most rangeMax numbers, as a list,
//   - at most loopStepsMax iterations of for-loop bodies a render, all
//     loops together (nested ranges multiply),
//   - at most outputMax bytes of output.
// Real templates use none of the first two, and the rest far inside the
// bounds (testdata/conformance.json); and
//   - no string repeated ("a" * n) past outputMax bytes (guardRepeats),
//     and no padding filter or method past widthMax.

// loopStepsMax is the most for-loop body iterations a render runs (gonja
// takes ~3 µs an iteration: 0.3 s).
const loopStepsMax = 100_000

// outputMax is the most bytes a render writes: a chat filling a context of
// a million tokens is ~4 MB. A template writing past it fails after ~0.4 s
// of gonja's loop steps (at 64 MB it took 1.5 s on a loaded 2-core
// machine, near TestJinjaHostile's bound).
const outputMax = 16 << 20

// loopBudgetName is the render's loop budget in the template's context;
// a template that sets a variable of that name only makes its loops fail.
const loopBudgetName = "__gotok_loop_budget"

// macroDepthMax is the most nested calls of one macro a render takes.
const macroDepthMax = 200

// rangeMax is the longest range a template may make.
const rangeMax = 100_000

// limitControlStructures replaces set's parsers for the structures above.
func limitControlStructures(set *exec.ControlStructureSet) *exec.ControlStructureSet {
	for name, verb := range map[string]string{"include": "include", "import": "import", "from": "import from",
		"extends": "extend"} {
		set.Replace(name, func(_ *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			return nil, args.Error(fmt.Sprintf("a chat template cannot %s other templates", verb), nil)
		})
	}
	if forParser, ok := set.Get("for"); ok {
		set.Replace("for", func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			cs, err := forParser(p, args)
			if f, ok := cs.(*gonjacs.ForControlStructure); ok && err == nil {
				if f.Recursive {
					return nil, errors.New("recursive for-loops are not supported in chat templates")
				}
				// Each iteration of the body first takes a step of the
				// render's budget.
				body := f.BodyWrapper
				body.Nodes = append([]nodes.Node{&nodes.ControlStructureBlock{Location: body.Location, Name: "loop step",
					ControlStructure: loopStep{body.Location}}}, body.Nodes...)
			}
			return cs, err
		})
	}
	if macroParser, ok := set.Get("macro"); ok {
		set.Replace("macro", func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			cs, err := macroParser(p, args)
			if m, ok := cs.(*gonjacs.MacroControlStructure); ok {
				return &limitedMacro{m}, err
			}
			return cs, err
		})
	}
	return set
}

// limitedMacro is a macro whose calls fail past macroDepthMax nested ones.
type limitedMacro struct {
	*gonjacs.MacroControlStructure
}

func (m *limitedMacro) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	fn, err := exec.MacroNodeToFunc(m.Macro, r)
	if err != nil {
		return fmt.Errorf("macro %s: %w", m.Name, err)
	}
	depth := 0
	r.Environment.Context.Set(m.Name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if depth >= macroDepthMax {
			return exec.AsValue(fmt.Errorf("macro %s: more than %d nested calls", m.Name, macroDepthMax))
		}
		depth++
		defer func() { depth-- }()
		return fn(params)
	}))
	return nil
}

// rangeList is Jinja's range([start, ]stop[, step]) as a list of at most
// rangeMax numbers.
func rangeList(_ *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	start, stop, step := 0, 0, 1
	args := params.Args
	for _, a := range args {
		if !a.IsInteger() {
			return nil, errors.New("range: arguments must be integers")
		}
	}
	switch len(args) {
	case 1:
		stop = args[0].Integer()
	case 2:
		start, stop = args[0].Integer(), args[1].Integer()
	case 3:
		start, stop, step = args[0].Integer(), args[1].Integer(), args[2].Integer()
	default:
		return nil, errors.New("range: expected [start, ]stop[, step]")
	}
	if step == 0 {
		return nil, errors.New("range: step cannot be 0")
	}
	n := 0
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && stop < start {
		n = (start - stop - step - 1) / -step
	}
	if n > rangeMax {
		return nil, fmt.Errorf("range: %d numbers, more than the %d a chat template may make", n, rangeMax)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = start + i*step
	}
	return out, nil
}

// errorTextMax is the most of a render error's text Render keeps: gonja
// wraps an error once for every call it passes through, so a macro that
// fails deep in its own calls gives a message of tens of KB.
const errorTextMax = 600

// shortError keeps the end of a long error's text, where gonja puts the
// cause.
func shortError(err error) error {
	msg := err.Error()
	if len(msg) <= errorTextMax {
		return err
	}
	cut := len(msg) - errorTextMax
	for cut < len(msg) && !utf8.RuneStart(msg[cut]) {
		cut++
	}
	return errors.New("…" + msg[cut:])
}

// loopBudget is a render's for-loop iterations so far, and the bytes of
// the strings it repeated (mulCheck).
type loopBudget struct{ steps, repeated int }

// loopStep is the first node of every for-loop body: it takes a step of
// the render's loopBudget and fails the render past loopStepsMax.
type loopStep struct{ at *tokens.Token }

func (s loopStep) Position() *tokens.Token { return s.at }
func (s loopStep) String() string          { return "loop step" }

func (s loopStep) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	v, _ := r.Environment.Context.Get(loopBudgetName)
	b, ok := v.(*loopBudget)
	if !ok {
		return errors.New("the template's loop budget is gone (a variable of its name was set)")
	}
	if b.steps++; b.steps > loopStepsMax {
		return fmt.Errorf("more than %d loop iterations", loopStepsMax)
	}
	return nil
}

// limitedWriter keeps at most max bytes, then fails every write.
type limitedWriter struct {
	b   strings.Builder
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, fmt.Errorf("the template wrote more than %d bytes", w.max)
	}
	return w.b.Write(p)
}

// nestingMax bounds how deep a template nests: brackets within a tag,
// runs of unary signs, and blocks ({% if %} … {% endif %}). gonja parses
// each level with Go recursion, and 100,000 parentheses overflowed the
// stack, which is fatal. Real templates nest a few levels.
const nestingMax = 256

// blockTags are the tags that open a block closed by end<name>; set opens
// one only without "=".
var blockTags = map[string]bool{"if": true, "for": true, "macro": true, "call": true, "filter": true, "set": true,
	"with": true, "block": true, "generation": true, "autoescape": true}

// checkNesting refuses a template nested deeper than nestingMax, before
// gonja's parser sees it.
func checkNesting(src string) error {
	blocks := 0
	for i := 0; i < len(src); i++ {
		if src[i] != '{' || i+1 == len(src) {
			continue
		}
		var end string
		switch src[i+1] {
		case '{':
			end = "}}"
		case '%':
			end = "%}"
		case '#':
			end = "#}"
		default:
			continue
		}
		n := strings.Index(src[i+2:], end)
		if n < 0 {
			return nil // unterminated: gonja's parser says so
		}
		tag := src[i+2 : i+2+n]
		i += 2 + n + len(end) - 1
		if end == "#}" {
			continue
		}
		if err := checkTagNesting(tag); err != nil {
			return err
		}
		if end != "%}" {
			continue
		}
		f := strings.Fields(strings.Trim(tag, "-+ \t\n\r"))
		if len(f) == 0 {
			continue
		}
		switch name := f[0]; {
		case name == "raw":
			// Its text is not template: on past {% endraw %}.
			k := strings.Index(src[i+1:], "endraw")
			if k < 0 {
				return nil
			}
			i += k
		case strings.HasPrefix(name, "end"):
			blocks--
		case blockTags[name] && !(name == "set" && strings.Contains(tag, "=")):
			if blocks++; blocks > nestingMax {
				return fmt.Errorf("chat: parse template: blocks nested more than %d deep", nestingMax)
			}
		}
	}
	return nil
}

// checkTagNesting refuses a tag whose brackets, outside string literals,
// nest deeper than nestingMax, or with a longer run of unary signs.
func checkTagNesting(tag string) error {
	depth, signs := 0, 0
	var quote byte
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if quote != 0 {
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
			continue
		}
		switch c {
		case '\'', '"':
			quote = c
		case '(', '[', '{':
			if depth++; depth > nestingMax {
				return fmt.Errorf("chat: parse template: brackets nested more than %d deep", nestingMax)
			}
		case ')', ']', '}':
			depth--
		}
		switch c {
		case '-', '+':
			if signs++; signs > nestingMax {
				return fmt.Errorf("chat: parse template: more than %d signs in a row", nestingMax)
			}
		case ' ', '\t', '\n', '\r':
		default:
			signs = 0
		}
	}
	return nil
}

// mulCheckName is the function guardRepeats puts before every "*": it
// refuses a string repeated past outputMax bytes, which gonja would build
// with strings.Repeat whatever its size (a fatal out-of-memory).
const mulCheckName = "__gotok_mul_check"

// guardRepeats rewrites every a * b of the parsed template into
// __gotok_mul_check(a, b) * b: the check gives a back, or an error where a
// is a string and the product would pass outputMax bytes. It walks the
// tree by reflection: gonja's walker does not descend into expressions.
var binaryExpression = reflect.TypeFor[*nodes.BinaryExpression]()

func guardRepeats(root *nodes.Template) {
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			if v.Type() != binaryExpression {
				walk(v.Elem())
				return
			}
			// gonja keeps some expressions in unexported fields ({% set %},
			// {% with %}, {% filter %}), which reflect reads but will not
			// write through: the node is changed through its address.
			b := (*nodes.BinaryExpression)(v.UnsafePointer())
			if b.Operator != nil && b.Operator.Token != nil && b.Operator.Token.Type == tokens.Multiply {
				at := b.Operator.Token
				b.Left = &nodes.Call{Location: at, Args: []nodes.Expression{b.Left, b.Right},
					Func: &nodes.Name{Name: &tokens.Token{Type: tokens.Name, Val: mulCheckName, Line: at.Line, Col: at.Col}}}
				seen[reflect.ValueOf(b.Left).Pointer()] = true
				// The operands, now the check's arguments.
				walk(reflect.ValueOf(b.Left.(*nodes.Call).Args[0]))
				walk(reflect.ValueOf(b.Right))
				return
			}
			walk(v.Elem())
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(it.Value())
			}
		}
	}
	walk(reflect.ValueOf(root))
}

// mulCheck is __gotok_mul_check(a, b): a, unless a is a string that b
// repeats past outputMax bytes.
func mulCheck(e *exec.Evaluator, params *exec.VarArgs) (any, error) {
	if len(params.Args) != 2 {
		return nil, errors.New("__gotok_mul_check takes two arguments")
	}
	a, b := params.Args[0], params.Args[1]
	if !a.IsString() || !b.IsInteger() || b.Integer() <= 0 {
		return a.Interface(), nil
	}
	n, k := len(a.String()), b.Integer()
	if n > outputMax/k {
		return nil, fmt.Errorf("a string of %d bytes repeated %d times: more than %d bytes", n, k, outputMax)
	}
	// Repeats in a loop: each is bounded, their sum too.
	v, _ := e.Environment.Context.Get(loopBudgetName)
	lb, ok := v.(*loopBudget)
	if !ok {
		return nil, errors.New("the template's budget is gone (a variable of its name was set)")
	}
	if lb.repeated += n * k; lb.repeated > repeatedMax {
		return nil, fmt.Errorf("more than %d bytes of repeated strings", repeatedMax)
	}
	return a.Interface(), nil
}

// repeatedMax is the most bytes of repeated strings ("a" * n) a render
// makes, all repeats together.
const repeatedMax = 256 << 20

// widthMax bounds the width of the filters and str methods that pad to
// one (center, indent, ljust, rjust, zfill, expandtabs): they build
// strings of that size, gonja's slowly (a 64 KiB center took 180 µs), and
// a loop may call them at every iteration. Templates pad to a few dozen.
const widthMax = 1024

// intArgsOver reports the first integer argument of params past max.
func intArgsOver(params *exec.VarArgs, max int) error {
	args := append([]*exec.Value(nil), params.Args...)
	for _, v := range params.KwArgs {
		args = append(args, v)
	}
	for _, a := range args {
		if a.IsInteger() && a.Integer() > max {
			return fmt.Errorf("a width of %d: more than %d", a.Integer(), max)
		}
	}
	return nil
}

// limitWidthFilters wraps set's padding filters with intArgsOver.
func limitWidthFilters(set *exec.FilterSet) {
	for name, max := range map[string]int{"center": widthMax, "indent": widthMax} {
		f, ok := set.Get(name)
		if !ok {
			continue
		}
		set.Replace(name, func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
			if err := intArgsOver(params, max); err != nil {
				return exec.AsValue(fmt.Errorf("%s: %w", name, err))
			}
			return f(e, in, params)
		})
	}
}

// limitWidthMethod wraps a str method that pads with intArgsOver, and
// gives center, ljust and rjust Python's default fill.
func limitWidthMethod(name string, m exec.Method[string]) exec.Method[string] {
	max := widthMax
	pads := name == "center" || name == "ljust" || name == "rjust"
	return func(self string, selfValue *exec.Value, params *exec.VarArgs) (any, error) {
		if err := intArgsOver(params, max); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if _, ok := params.KwArgs["fillchar"]; pads && len(params.Args) == 1 && !ok {
			// Python's default fill is a space; gonja's (32) is refused
			// as not a string.
			params.Args = append(params.Args, exec.AsValue(" "))
		}
		return m(self, selfValue, params)
	}
}
