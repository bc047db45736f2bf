package constrain

import (
	"fmt"
	"math"
	"slices"
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
	// byFirst[first[b]:first[b+1]] are the choices whose values can begin
	// with byte b, in order; nil (first) for a union of few choices.
	first   []int32
	byFirst []*node

	types int // the JSON types of its values, as bits (typeObject, ...)
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

// Limits on what the unions of one grammar expand to (each union lists
// the nodes other than unions it leads to, and a value's first byte tries
// each of them), so that neither compiling nor a mask can be made to take
// long.
const (
	// maxChoices bounds the alternatives one union leads to.
	maxChoices = 1024
	// maxExpansion bounds the nodes visited expanding all unions.
	maxExpansion = 1 << 16
)

// finish computes the nesting of every node reachable from root and the
// tables that depend on it; it fails when root admits no finite value, or
// when its unions expand past the limits above.
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
		n.id = i
	}
	setNests(all)
	budget := maxExpansion
	for _, n := range all {
		switch n.kind {
		case kindObject:
			n.buildKeys()
		case kindUnion:
			var err error
			if n.choices, err = flatten(n, nil, map[*node]bool{}, &budget); err != nil {
				return err
			}
			if len(n.choices) > 8 {
				n.indexChoices()
			}
		}
	}
	for _, n := range all {
		n.types = typesOf(n)
	}
	if root.nest >= unreachable {
		return fmt.Errorf("the schema admits no value")
	}
	if root.nest > maxDepth {
		return fmt.Errorf("every value of the schema nests deeper than %d levels, more than can be written", maxDepth)
	}
	return nil
}

// flatten appends the nodes other than unions that union n leads to. A
// union that leads back to itself through unions alone ($ref cycles through
// anyOf) adds nothing the second time, so a value starts without recursion.
// Each node visited costs one of budget.
func flatten(n *node, dst []*node, seen map[*node]bool, budget *int) ([]*node, error) {
	for _, a := range n.alts {
		if seen[a] {
			continue
		}
		seen[a] = true
		if *budget--; *budget < 0 {
			return nil, fmt.Errorf("the unions (anyOf, oneOf, lists of types) expand to more than %d alternatives in all", maxExpansion)
		}
		if a.kind == kindUnion {
			var err error
			if dst, err = flatten(a, dst, seen, budget); err != nil {
				return nil, err
			}
		} else {
			dst = append(dst, a)
		}
		if len(dst) > maxChoices {
			return nil, fmt.Errorf("a union (anyOf, oneOf, a list of types) leads to more than %d alternatives", maxChoices)
		}
	}
	return dst, nil
}

// indexChoices builds the choices of union n by first byte, so that a
// value of a union of many alternatives starts in time for those that fit.
func (n *node) indexChoices() {
	firstBytes := func(c *node, f func(b byte)) {
		switch c.kind {
		case kindObject:
			f('{')
		case kindArray:
			f('[')
		case kindString:
			f('"')
		case kindNumber:
			for _, b := range []byte("-0123456789") {
				f(b)
			}
		case kindLiteral:
			if !c.lits.empty() {
				for _, e := range c.lits.nodes[0].edges {
					f(e.b)
				}
			}
		}
	}
	n.first = make([]int32, 257)
	for _, c := range n.choices {
		firstBytes(c, func(b byte) { n.first[int(b)+1]++ })
	}
	for b := 1; b <= 256; b++ {
		n.first[b] += n.first[b-1]
	}
	n.byFirst = make([]*node, n.first[256])
	next := slices.Clone(n.first[:256])
	for _, c := range n.choices {
		firstBytes(c, func(b byte) {
			n.byFirst[next[b]] = c
			next[b]++
		})
	}
}

// setNests sets the nest of each node of all (ids their indices) to the
// fewest levels of one of its values, unreachable for none. Nodes are
// settled in order of nest, as in Dijkstra's algorithm, so the time is
// linear in the graph: a leaf at 1, a union at its first settled
// alternative, an object or array one above the last of the children it
// requires (required properties, the items of a non-empty array).
func setNests(all []*node) {
	parents := make([][]*node, len(all)) // by child id, one entry per edge
	waiting := make([]int, len(all))     // by id: required children not yet settled
	var buckets [][]*node                // buckets[v]: nodes whose nest was lowered to v
	lower := func(n *node, v int) {
		if v >= n.nest {
			return
		}
		n.nest = v
		for len(buckets) <= v {
			buckets = append(buckets, nil)
		}
		buckets[v] = append(buckets[v], n)
	}
	for _, n := range all {
		n.nest = unreachable
	}
	for _, n := range all {
		switch n.kind {
		case kindObject:
			for i, p := range n.props {
				if n.required&(1<<i) != 0 {
					parents[p.value.id] = append(parents[p.value.id], n)
					waiting[n.id]++
				}
			}
		case kindArray:
			if n.minItems > 0 {
				parents[n.items.id] = append(parents[n.items.id], n)
				waiting[n.id]++
			}
		case kindUnion:
			for _, a := range n.alts {
				parents[a.id] = append(parents[a.id], n)
			}
		}
	}
	for _, n := range all {
		switch {
		case n.kind == kindLiteral && n.lits.empty(), n.kind == kindUnion:
		case waiting[n.id] == 0:
			lower(n, 1)
		}
	}
	deepest := make([]int, len(all)) // by id: the largest nest of a settled required child
	settled := make([]bool, len(all))
	for v := 0; v < len(buckets); v++ {
		for i := 0; i < len(buckets[v]); i++ { // the bucket grows as unions settle
			n := buckets[v][i]
			if settled[n.id] || n.nest != v {
				continue
			}
			settled[n.id] = true
			for _, p := range parents[n.id] {
				if p.kind == kindUnion {
					lower(p, v)
					continue
				}
				deepest[p.id] = max(deepest[p.id], v)
				if waiting[p.id]--; waiting[p.id] == 0 {
					lower(p, deepest[p.id]+1)
				}
			}
		}
	}
}

// typesOf returns the JSON types of the values n admits, once every union's
// choices are known.
func typesOf(n *node) int {
	switch n.kind {
	case kindObject:
		return typeObject
	case kindArray:
		return typeArray
	case kindString:
		return typeString
	case kindNumber:
		return typeNumber
	case kindLiteral:
		t := 0
		if !n.lits.empty() {
			for _, e := range n.lits.nodes[0].edges {
				t |= firstByteType(e.b)
			}
		}
		return t
	case kindUnion:
		t := 0
		for _, c := range n.choices {
			if c.nest < unreachable {
				t |= typesOf(c)
			}
		}
		return t
	}
	return 0
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
