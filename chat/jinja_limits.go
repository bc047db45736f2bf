package chat

import (
	"errors"
	"fmt"
	"unicode/utf8"

	gonjacs "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
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
//   - a range of at most rangeMax numbers, as a list.
// Real templates use none of the first two, and macros and ranges far
// inside the bounds (testdata/conformance.json).

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
			if f, ok := cs.(*gonjacs.ForControlStructure); ok && f.Recursive {
				return nil, errors.New("recursive for-loops are not supported in chat templates")
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
