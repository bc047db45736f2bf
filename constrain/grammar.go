package constrain

import (
	"fmt"
	"math"
)

// maxDepth bounds the nesting of values (each object, array, string, number
// or literal is one level): deeper containers are never started, so a value
// nested past it cannot be produced and a model cannot recurse forever.
const maxDepth = 64

// maxProperties bounds the properties one object schema names (they are
// tracked in a 64-bit set).
const maxProperties = 64

// Limits on the digits of a number, so that a model cannot write digits
// forever; beyond them float64 and int64 hold nothing more anyway. Two
// exponent digits keep every number within float64's range (under 1e120),
// so parsers that read numbers as float64 accept them all.
const (
	maxIntDigits  = 20
	maxFracDigits = 20
	maxExpDigits  = 2
)

// unreachable is the nesting of a node that admits no finite value.
const unreachable = math.MaxInt32

type kind uint8

const (
	kindObject  kind = iota // {...}
	kindArray               // [...]
	kindString              // "..."
	kindNumber              // a JSON number (integer: no fraction or exponent)
	kindLiteral             // one of a fixed set of JSON texts (enum, const, true, false, null)
	kindUnion               // one of several nodes (anyOf, oneOf, a list of types)
)

// node is one compiled schema: what a JSON value may look like, character
// by character. Nodes form a graph (a $ref may point back up).
type node struct {
	kind kind
	id   int // its index in its grammar, for hashing
	// nest is the fewest stack levels a value of this node needs, counting
	// its own; unreachable when it admits no finite value.
	nest int

	// object
	props      []property
	required   uint64 // properties that must appear, by index
	additional *node  // schema of other properties; nil: none allowed
	keys       trie   // the property names as JSON-encoded bytes after the opening quote, ending with the closing quote

	// array
	items              *node
	minItems, maxItems int // maxItems < 0: no bound

	// string
	minLen, maxLen int // in code points; maxLen < 0: no bound

	// number
	integer bool

	// literal
	lits trie

	// union
	alts    []*node
	choices []*node // the nodes other than unions that alts lead to, in order, each once
}

type property struct {
	name  string
	value *node
}

// Grammar is a compiled JSON schema (or "any JSON"), the set of JSON texts a
// constrained generation may produce. It is immutable and safe to share
// between concurrent generations; each generation gets its own state from
// NewConstraint.
type Grammar struct {
	root *node
}

// AnyValue returns a grammar that accepts any JSON value (nested at most 64
// deep).
func AnyValue() *Grammar {
	return &Grammar{root: newAny()}
}

// AnyObject returns a grammar that accepts any JSON object, as OpenAI's
// response_format {"type": "json_object"} asks.
func AnyObject() *Grammar {
	any := newAny()
	return &Grammar{root: any.alts[0]}
}

// newAny builds the node of any JSON value: an object of any values, an
// array of any values, a string, a number, true, false or null.
func newAny() *node {
	any := &node{kind: kindUnion}
	obj := &node{kind: kindObject, additional: any}
	arr := &node{kind: kindArray, items: any, maxItems: -1}
	str := &node{kind: kindString, maxLen: -1}
	num := &node{kind: kindNumber}
	lit := &node{kind: kindLiteral}
	for _, s := range []string{"true", "false", "null"} {
		lit.lits.add([]byte(s), 0)
	}
	any.alts = []*node{obj, arr, str, num, lit}
	if err := finish(any); err != nil {
		panic(err) // a fixed graph: cannot fail
	}
	return any
}

// finish computes the nesting of every node reachable from root and the
// tables that depend on it; it fails when root admits no finite value.
func finish(root *node) error {
	var all []*node
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		all = append(all, n)
		for _, p := range n.props {
			walk(p.value)
		}
		walk(n.additional)
		walk(n.items)
		for _, a := range n.alts {
			walk(a)
		}
	}
	walk(root)
	for i, n := range all {
		n.id, n.nest = i, unreachable
	}
	// A fixed point from above: each pass can only lower nests, and a
	// lowered nest is finite and at least 1, so it ends.
	for changed := true; changed; {
		changed = false
		for _, n := range all {
			if v := nestOf(n); v < n.nest {
				n.nest, changed = v, true
			}
		}
	}
	for _, n := range all {
		switch n.kind {
		case kindObject:
			n.buildKeys()
		case kindUnion:
			n.choices = flatten(n, nil, map[*node]bool{})
		}
	}
	if root.nest >= unreachable {
		return fmt.Errorf("the schema admits no value")
	}
	return nil
}

// flatten appends the nodes other than unions that union n leads to. A
// union that leads back to itself through unions alone ($ref cycles through
// anyOf) adds nothing the second time, so a value starts without recursion.
func flatten(n *node, dst []*node, seen map[*node]bool) []*node {
	for _, a := range n.alts {
		if seen[a] {
			continue
		}
		seen[a] = true
		if a.kind == kindUnion {
			dst = flatten(a, dst, seen)
		} else {
			dst = append(dst, a)
		}
	}
	return dst
}

func nestOf(n *node) int {
	inner := func(c *node) int {
		if c == nil || c.nest >= unreachable {
			return unreachable
		}
		return c.nest + 1
	}
	switch n.kind {
	case kindObject:
		v := 1
		for i, p := range n.props {
			if n.required&(1<<i) != 0 {
				v = max(v, inner(p.value))
			}
		}
		return v
	case kindArray:
		if n.minItems > 0 {
			return inner(n.items)
		}
		return 1
	case kindString, kindNumber:
		return 1
	case kindLiteral:
		if n.lits.empty() {
			return unreachable
		}
		return 1
	case kindUnion:
		v := unreachable
		for _, a := range n.alts {
			v = min(v, a.nest)
		}
		return v
	}
	return unreachable
}

// buildKeys builds the trie of the property names. A property whose
// schema admits no value stays in it: its bit in a frame's fit is never
// set, so its name is refused, never read as an additional property's.
func (n *node) buildKeys() {
	n.keys = trie{}
	for i, p := range n.props {
		n.keys.add(encodeString(p.name)[1:], i)
	}
}

// trie holds byte strings, each ending at a node with the index of its
// string; every node knows which indices lie below it.
type trie struct {
	nodes []trieNode
}

type trieNode struct {
	edges []trieEdge
	end   int    // index of the string ending here, -1 if none
	below uint64 // indices (mod 64) of the strings at or below this node
}

type trieEdge struct {
	b    byte
	next int32
}

func (t *trie) empty() bool { return len(t.nodes) == 0 }

func (t *trie) add(s []byte, index int) {
	if len(t.nodes) == 0 {
		t.nodes = append(t.nodes, trieNode{end: -1})
	}
	bit := uint64(1) << (index % 64)
	at := int32(0)
	t.nodes[0].below |= bit
	for _, b := range s {
		next := t.child(at, b)
		if next < 0 {
			next = int32(len(t.nodes))
			t.nodes = append(t.nodes, trieNode{end: -1})
			t.nodes[at].edges = append(t.nodes[at].edges, trieEdge{b, next})
		}
		at = next
		t.nodes[at].below |= bit
	}
	if t.nodes[at].end < 0 {
		t.nodes[at].end = index
	}
}

// child returns the node below at along b, or -1.
func (t *trie) child(at int32, b byte) int32 {
	for _, e := range t.nodes[at].edges {
		if e.b == b {
			return e.next
		}
	}
	return -1
}
