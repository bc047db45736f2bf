package backend

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func seqOf(n int, base int32) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = base + int32(i)
	}
	return t
}

// run reserves and commits tokens, as a backend step would.
func run(t *testing.T, s *Seq, tokens []int32) {
	t.Helper()
	if err := s.Reserve(len(tokens)); err != nil {
		t.Fatal(err)
	}
	s.Commit(tokens)
}

func TestKVPoolPrefixReuse(t *testing.T) {
	p, err := NewKVPool(64, 4)
	if err != nil {
		t.Fatal(err)
	}
	prompt := seqOf(10, 100)
	a, reused := p.NewSeq(prompt)
	if reused != 0 {
		t.Fatalf("empty pool reused %d", reused)
	}
	run(t, a, prompt)
	if a.Len() != 10 || len(a.Table()) != 3 {
		t.Fatalf("len %d, %d blocks", a.Len(), len(a.Table()))
	}
	// Same prompt: two full blocks are shared (8 tokens), and at least the
	// last token must run.
	b, reused := p.NewSeq(prompt)
	if reused != 8 {
		t.Fatalf("reused %d, want 8", reused)
	}
	if b.Table()[0] != a.Table()[0] || b.Table()[1] != a.Table()[1] {
		t.Fatal("shared prefix is not the same blocks")
	}
	run(t, b, prompt[8:])
	if b.Table()[2] == a.Table()[2] {
		t.Fatal("partial block shared")
	}
	// A prompt of exactly two blocks reuses only one: its last token runs.
	c, reused := p.NewSeq(prompt[:8])
	if reused != 4 {
		t.Fatalf("reused %d of an 8-token prompt, want 4", reused)
	}
	c.Free()
	// A different token in block 1 stops reuse there.
	other := append([]int32(nil), prompt...)
	other[5] = 7
	d, reused := p.NewSeq(other)
	if reused != 4 {
		t.Fatalf("reused %d after a change at 5, want 4", reused)
	}
	d.Free()
	a.Free()
	b.Free()
	if u := p.Usage(); u.Held != 0 {
		t.Fatalf("%d blocks held after every Free", u.Held)
	}
	// Freed full blocks stay cached.
	e, reused := p.NewSeq(prompt)
	if reused != 8 {
		t.Fatalf("after free: reused %d, want 8", reused)
	}
	e.Free()
}

func TestKVPoolFullAndEviction(t *testing.T) {
	p, _ := NewKVPool(16, 4) // 4 blocks
	a, _ := p.NewSeq(seqOf(8, 0))
	run(t, a, seqOf(8, 0))
	b, _ := p.NewSeq(seqOf(9, 50))
	if err := b.Reserve(9); !errors.Is(err, ErrKVFull) {
		t.Fatalf("reserve past the pool: %v", err)
	}
	if len(b.Table()) != 0 {
		t.Fatal("failed reserve took blocks")
	}
	run(t, b, seqOf(8, 50))
	if p.Available() != 0 {
		t.Fatalf("available %d", p.Available())
	}
	a.Free() // a's two blocks are cached, unheld: evictable
	if p.Available() != 2 {
		t.Fatalf("available %d after free", p.Available())
	}
	run(t, b, []int32{58}) // evicts a's last block first
	c, reused := p.NewSeq(seqOf(8, 0))
	if reused != 4 {
		t.Fatalf("reused %d: a's first block should have survived", reused)
	}
	c.Free()
	b.Free()
}

func TestKVPoolPrivateTruncate(t *testing.T) {
	p, _ := NewKVPool(32, 8)
	s := p.NewPrivateSeq()
	run(t, s, seqOf(12, 0))
	if err := s.Truncate(5); err != nil {
		t.Fatal(err)
	}
	run(t, s, seqOf(3, 9))
	if s.Len() != 8 || s.Row(7) != int(s.Table()[0])*8+7 {
		t.Fatalf("len %d row %d", s.Len(), s.Row(7))
	}
	if err := s.Truncate(9); err == nil {
		t.Fatal("truncate past the end")
	}
	// Private blocks never enter the prefix cache.
	q, reused := p.NewSeq(seqOf(12, 0))
	if reused != 0 {
		t.Fatalf("reused %d from a private sequence", reused)
	}
	run(t, q, seqOf(12, 0))
	if err := q.Truncate(3); err == nil {
		t.Fatal("a cached sequence truncated")
	}
}

// TestKVPoolRandom runs random sequences against the pool and checks its
// invariants: no block in two sequences unless shared by a common prefix,
// and the counts add up.
func TestKVPoolRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p, _ := NewKVPool(256, 4)
	var live []*Seq
	prompts := [][]int32{seqOf(30, 0), seqOf(17, 1000), seqOf(6, 0)}
	for it := 0; it < 2000; it++ {
		switch r.IntN(3) {
		case 0:
			pr := prompts[r.IntN(len(prompts))]
			pr = pr[:1+r.IntN(len(pr))]
			s, reused := p.NewSeq(pr)
			if err := s.Reserve(len(pr) - reused); err != nil {
				s.Free()
				continue
			}
			s.Commit(pr[reused:])
			live = append(live, s)
		case 1:
			if len(live) > 0 {
				s := live[r.IntN(len(live))]
				if s.Reserve(1) == nil {
					s.Commit([]int32{int32(r.IntN(5))})
				}
			}
		case 2:
			if len(live) > 0 {
				i := r.IntN(len(live))
				live[i].Free()
				live = append(live[:i], live[i+1:]...)
			}
		}
		owner := map[int32][]int32{} // block → the tokens it should hold
		held := map[int32]bool{}
		for _, s := range live {
			for bi, b := range s.Table() {
				held[b] = true
				lo := bi * 4
				hi := min(lo+4, s.Len())
				if hi <= lo {
					continue
				}
				want := s.tokens[lo:hi]
				if got, ok := owner[b]; ok && (hi-lo < 4 || len(got) < 4 || !slices.Equal(got, want)) {
					t.Fatalf("iteration %d: block %d shared by different contents %v and %v", it, b, got, want)
				}
				owner[b] = want
			}
		}
		if u := p.Usage(); u.Held != len(held) {
			t.Fatalf("iteration %d: pool says %d held, sequences hold %d", it, u.Held, len(held))
		}
		if p.Available()+len(held) != p.Blocks() {
			t.Fatalf("iteration %d: %d available + %d held != %d", it, p.Available(), len(held), p.Blocks())
		}
	}
}
