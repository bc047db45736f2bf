package constrain

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
)

// checkOneOf makes sure that every oneOf's alternatives exclude each other,
// so that a value of any one of them matches exactly one, as oneOf demands.
// The proof is conservative: alternatives of different types, enum/const
// values the other alternative refuses, objects told apart by a required
// property (a discriminator) or by additionalProperties false, strings of
// lengths that cannot meet. Anything else is an error that suggests anyOf.
func (c *compiler) checkOneOf() error {
	work := maxOneOfWork
	for _, o := range c.oneOf {
		for i, a := range o.alts {
			for j := i + 1; j < len(o.alts); j++ {
				// A budget per pair and for all: a hostile schema gets an
				// error, not an exponential or quadratic search.
				pair := min(maxPairWork, work)
				budget := pair
				ok := disjoint(a, o.alts[j], 0, &budget)
				work -= pair - max(budget, 0)
				switch {
				case !ok && work <= 0:
					return fmt.Errorf("%s: the schema's oneOf alternatives are too many or too large to prove that they exclude each other (stopped at %d and %d); oneOf is enforced only for alternatives that do (use anyOf if either may match)", o.path, i, j)
				case !ok && budget < 0:
					return fmt.Errorf("%s: alternatives %d and %d are too large to prove that they exclude each other; oneOf is enforced only for alternatives that do (use anyOf if either may match)", o.path, i, j)
				case !ok:
					return fmt.Errorf("%s: alternatives %d and %d may both match a value; oneOf is enforced only for alternatives that exclude each other (use anyOf if either may match)", o.path, i, j)
				}
			}
		}
	}
	return nil
}

// Limits on proving oneOf alternatives disjoint: the alternatives of one
// oneOf, and the work (nodes compared, bytes read) for one pair and for the
// whole schema. Past them the alternatives count as overlapping.
const (
	maxOneOf     = 128
	maxPairWork  = 10000
	maxOneOfWork = 1 << 20
)

// JSON types as bits, integers counted as numbers.
const (
	typeObject = 1 << iota
	typeArray
	typeString
	typeNumber
	typeBool
	typeNull
)

func firstByteType(b byte) int {
	switch b {
	case '{':
		return typeObject
	case '[':
		return typeArray
	case '"':
		return typeString
	case 't', 'f':
		return typeBool
	case 'n':
		return typeNull
	}
	return typeNumber
}

// disjoint reports whether no value matches both a and b; false when it
// cannot tell.
func disjoint(a, b *node, depth int, budget *int) bool {
	if a.nest >= unreachable || b.nest >= unreachable {
		return true
	}
	if *budget--; *budget < 0 {
		return false
	}
	if a.types&b.types == 0 {
		return true
	}
	if depth > 8 {
		return false
	}
	switch {
	case a.kind == kindUnion:
		for _, x := range a.alts {
			if !disjoint(x, b, depth+1, budget) {
				return false
			}
		}
		return true
	case b.kind == kindUnion:
		return disjoint(b, a, depth+1, budget)
	case a.kind == kindLiteral && b.kind == kindLiteral:
		return literalsDisjoint(a, b, budget)
	case a.kind == kindLiteral:
		for text := range a.lits.all() {
			if accepts(b, text, budget) {
				return false
			}
		}
		return true
	case b.kind == kindLiteral:
		return disjoint(b, a, depth+1, budget)
	case a.kind == kindString && b.kind == kindString:
		return a.maxLen >= 0 && a.maxLen < b.minLen || b.maxLen >= 0 && b.maxLen < a.minLen
	case a.kind == kindObject && b.kind == kindObject:
		return objectsDisjoint(a, b, depth, budget) || objectsDisjoint(b, a, depth, budget)
	}
	return false
}

// literalsDisjoint reports whether literals a and b have no value in
// common. Both hold canonical texts (encode), so values without numbers
// are equal exactly when their texts are; a text with a number (or
// anything else refusalProves doubts) is compared as accepts does.
func literalsDisjoint(a, b *node, budget *int) bool {
	texts := map[string]bool{}
	for text := range b.lits.all() {
		if *budget -= len(text); *budget < 0 {
			return false
		}
		texts[text] = true
	}
	for text := range a.lits.all() {
		if *budget -= len(text); *budget < 0 {
			return false
		}
		if texts[text] || !refusalProves(text) && accepts(b, text, budget) {
			return false
		}
	}
	return true
}

func objectsDisjoint(a, b *node, depth int, budget *int) bool {
	for i, p := range a.props {
		if a.required&(1<<i) == 0 {
			continue
		}
		j := b.prop(p.name)
		if j < 0 {
			if b.additional == nil {
				return true // b has no such property and a requires it
			}
			if disjoint(p.value, b.additional, depth+1, budget) {
				return true
			}
			continue
		}
		if disjoint(p.value, b.props[j].value, depth+1, budget) {
			return true
		}
	}
	return false
}

func (n *node) prop(name string) int {
	for i, p := range n.props {
		if p.name == name {
			return i
		}
	}
	return -1
}

// accepts reports whether text, a JSON text written as encoding/json
// writes it, may be a value of n: false only when n surely refuses it. The
// machine's refusal is taken as proof only where the machine reads what
// JSON Schema means: not for a number (it bounds digits and writes integers
// without fraction or exponent), a value nested near maxDepth, an object
// key with escapes (refused beside named properties), or when it would
// drop readings past maxThreads. Each byte read, and each node compared
// with a number, costs one of budget; past it, text counts as accepted.
func accepts(n *node, text string, budget *int) bool {
	if text[0] == '-' || text[0] >= '0' && text[0] <= '9' {
		f, err := strconv.ParseFloat(text, 64)
		return err != nil || acceptsNumber(n, f, map[*node]bool{}, budget)
	}
	ts := start(&Grammar{root: n})
	for i := 0; i < len(text) && len(ts) > 0; i++ {
		if *budget -= 1 + len(ts); *budget < 0 {
			return true
		}
		var next []thread
		for j := range ts {
			next = step(next, &ts[j], text[i], nil, 2*maxThreads)
		}
		if len(next) >= 2*maxThreads {
			return true
		}
		if len(next) > 1 {
			next = dedupe(next)
		}
		if len(next) >= maxThreads {
			return true
		}
		ts = next
	}
	return complete(ts) || !refusalProves(text)
}

// refusalProves reports whether the machine refusing text (a JSON text as
// encode writes it: compact) proves that the schema does: text holds no
// number, no object key with escapes, and nests well under maxDepth.
func refusalProves(text string) bool {
	depth := 0
	inString, escaped := false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString && c == '\\':
			escaped = true
			i++ // the escaped byte, which may be a quote
		case inString && c == '"':
			inString = false
			if escaped && i+1 < len(text) && text[i+1] == ':' {
				return false // a key with escapes
			}
		case inString:
		case c == '"':
			inString, escaped = true, false
		case c == '-' || c >= '0' && c <= '9':
			return false
		case c == '[' || c == '{':
			if depth++; depth > maxDepth-2 {
				return false
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return true
}

// acceptsNumber reports whether f may be a value of n (numbers of literals
// compared as float64: equal texts are equal floats).
func acceptsNumber(n *node, f float64, seen map[*node]bool, budget *int) bool {
	if seen[n] {
		return false
	}
	seen[n] = true
	if *budget--; *budget < 0 {
		return true
	}
	switch n.kind {
	case kindNumber:
		return !n.integer || isWhole(f)
	case kindLiteral:
		for s := range n.lits.all() {
			if *budget -= len(s); *budget < 0 {
				return true
			}
			if g, err := strconv.ParseFloat(s, 64); err == nil && g == f || errors.Is(err, strconv.ErrRange) {
				return true
			}
		}
	case kindUnion:
		for _, a := range n.alts {
			if acceptsNumber(a, f, seen, budget) {
				return true
			}
		}
	}
	return false
}

// isWhole reports whether f is an integer, as JSON Schema's "integer"
// means: any finite number without a fraction, however large.
func isWhole(f float64) bool {
	return math.Trunc(f) == f && !math.IsInf(f, 0)
}

// all yields the strings of the trie, in order.
func (t *trie) all() iter.Seq[string] {
	return func(yield func(string) bool) {
		var walk func(at int32, prefix []byte) bool
		walk = func(at int32, prefix []byte) bool {
			nd := &t.nodes[at]
			if nd.end >= 0 && !yield(string(prefix)) {
				return false
			}
			for _, e := range nd.edges {
				if !walk(e.next, append(prefix, e.b)) {
					return false
				}
			}
			return true
		}
		if !t.empty() {
			walk(0, nil)
		}
	}
}
