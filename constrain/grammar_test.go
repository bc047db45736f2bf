package constrain

import (
	"math/rand/v2"
	"testing"
)

// TestSetNestsAgreesWithFixedPoint checks setNests against the plain fixed
// point (lower every node from its children until nothing changes) on
// random graphs of objects, arrays, unions and leaves, cycles included.
func TestSetNestsAgreesWithFixedPoint(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for range 300 {
		all := make([]*node, 1+r.IntN(30))
		for i := range all {
			all[i] = &node{id: i}
		}
		pick := func() *node { return all[r.IntN(len(all))] }
		for _, n := range all {
			switch r.IntN(5) {
			case 0:
				n.kind = kindObject
				for i := range r.IntN(4) {
					n.props = append(n.props, property{value: pick()})
					if r.IntN(2) == 0 {
						n.required |= 1 << i
					}
				}
			case 1:
				n.kind, n.items, n.minItems = kindArray, pick(), r.IntN(2)
			case 2:
				n.kind = kindUnion
				for range r.IntN(4) {
					n.alts = append(n.alts, pick())
				}
			case 3:
				n.kind = kindLiteral
				if r.IntN(3) > 0 {
					n.lits.add([]byte("null"), 0)
				}
			default:
				n.kind = kindString
			}
		}
		setNests(all)
		want := make([]int, len(all))
		for i := range want {
			want[i] = unreachable
		}
		for changed := true; changed; {
			changed = false
			for i, n := range all {
				if v := fixedPointNest(n, want); v < want[i] {
					want[i], changed = v, true
				}
			}
		}
		for i, n := range all {
			if n.nest != want[i] {
				t.Fatalf("node %d (kind %d): nest %d, want %d", i, n.kind, n.nest, want[i])
			}
		}
	}
}

func fixedPointNest(n *node, nest []int) int {
	inner := func(c *node) int {
		if nest[c.id] >= unreachable {
			return unreachable
		}
		return nest[c.id] + 1
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
	case kindLiteral:
		if n.lits.empty() {
			return unreachable
		}
		return 1
	case kindUnion:
		v := unreachable
		for _, a := range n.alts {
			v = min(v, nest[a.id])
		}
		return v
	}
	return 1
}
