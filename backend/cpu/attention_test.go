package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gotok/backend"
	"gotok/model"
	"gotok/model/synth"
	"gotok/quant"
)

// TestAttentionMatchesReference runs the attention of one layer on random
// queries and a random KV cache and compares every head's output with a
// float64 softmax attention. Contexts of many blocks, in a block table that is not in order,, whose
// keys grow with the position so that later blocks raise the running
// maximum, exercise the online softmax; the shapes cover GQA groups of 1, 2
// and 3 and a head size that is not a multiple of 16; the cache in float32
// and in float16 (against the float64 attention of its rounded values).
func TestAttentionMatchesReference(t *testing.T) {
	shapes := []synth.Shape{
		{Layers: 1, Dim: 192, Heads: 6, KVHeads: 2, FFN: 64, Vocab: 320, Context: 1024, RopeBase: 10000, Tied: true}, // head 32, group 3
		{Layers: 1, Dim: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 320, Context: 1024, RopeBase: 10000, Tied: true},  // head 16, group 2
		{Layers: 1, Dim: 72, Heads: 3, KVHeads: 3, FFN: 64, Vocab: 320, Context: 1024, RopeBase: 10000, Tied: true},  // head 24, group 1
	}
	rng := rand.New(rand.NewPCG(90, 91))
	for _, shape := range shapes {
		m := genModel(t, shape, quant.F32, 3)
		c := m.Config
		for _, kt := range []struct {
			threads int
			typ     quant.Type
		}{{1, quant.F32}, {3, quant.F32}, {3, quant.F16}} {
			threads := kt.threads
			b, err := New(m, Options{ContextLen: 700, KVTokens: 1500, Threads: threads, KVType: kt.typ})
			if err != nil {
				t.Fatal(err)
			}
			// The sequence's blocks alternate with another's, so that its
			// block table is not the identity.
			seq, other := b.kv.NewPrivateSeq(), b.kv.NewPrivateSeq()
			for i := 0; i < 700/kvBlock+1; i++ {
				if err := seq.Reserve((i + 1) * kvBlock); err != nil {
					t.Fatal(err)
				}
				if err := other.Reserve((i + 1) * kvBlock); err != nil {
					t.Fatal(err)
				}
			}
			// Single tokens past attnPartTiles tiles run in parts (merged
			// after); windows move where their tiles start.
			for _, run := range []struct{ T, pos, window int }{{1, 0, 0}, {1, 699, 0}, {1, 511, 0}, {1, 512, 0}, {37, 0, 0}, {64, 230, 0},
				{64, 600, 0}, {5, 511, 0}, {64, 636, 0}, {1, 699, 600}, {1, 699, 300}, {1, 650, 520}, {37, 600, 300}} {
				name := fmt.Sprintf("heads %d/%d × %d, %d threads, %v cache, %d tokens at %d, window %d", c.NumHeads, c.NumKVHeads, c.HeadDim, threads, kt.typ, run.T, run.pos, run.window)
				b.c.LayerAttn = []model.LayerAttention{{Window: run.window}}
				n := run.pos + run.T
				qd, kvd := c.QDim(), c.KVDim()
				keys, values := make([][]float32, n), make([][]float32, n)
				for p := 0; p < n; p++ {
					keys[p], values[p] = randVec(rng, kvd), randVec(rng, kvd)
					for i := range keys[p] {
						keys[p][i] *= 1 + float32(p)/200
					}
					b.cache.store(0, seq.Row(p), keys[p], values[p])
					if kt.typ == quant.F16 { // the reference reads what the cache holds
						for i := range keys[p] {
							keys[p][i] = quant.F16ToF32(quant.F32ToF16(keys[p][i]))
							values[p][i] = quant.F16ToF32(quant.F32ToF16(values[p][i]))
						}
					}
				}
				copy(b.q, randVec(rng, run.T*qd))
				b.att.t = run.T
				b.pos, b.seqs = b.pos[:0], b.seqs[:0]
				for tok := 0; tok < run.T; tok++ {
					b.pos = append(b.pos, run.pos+tok)
					b.seqs = append(b.seqs, seq)
				}
				b.setChunks()
				b.attention(0)
				for tok := 0; tok < run.T; tok++ {
					for h := 0; h < c.NumHeads; h++ {
						from := 0
						if run.window > 0 {
							from = max(0, run.pos+tok+1-run.window)
						}
						want := refAttention(b.q[tok*qd+h*c.HeadDim:tok*qd+(h+1)*c.HeadDim], keys[from:run.pos+tok+1], values[from:], h/(c.NumHeads/c.NumKVHeads)*c.HeadDim)
						got := b.att.row(tok)[h*c.HeadDim : (h+1)*c.HeadDim]
						if e := relErr(got, want); !(e < 1e-5) {
							t.Fatalf("%s: token %d head %d: relative error %.3g", name, tok, h, e)
						}
					}
				}
			}
			b.Close()
		}
	}
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// refAttention is softmax(q·kᵀ/√d)·v in float64 over the given keys, for
// the head whose key and value columns start at off.
func refAttention(q []float32, keys, values [][]float32, off int) []float64 {
	hd := len(q)
	scores := make([]float64, len(keys))
	mx := math.Inf(-1)
	for p, k := range keys {
		for i, v := range q {
			scores[p] += float64(v) * float64(k[off+i])
		}
		scores[p] /= math.Sqrt(float64(hd))
		mx = max(mx, scores[p])
	}
	var sum float64
	for p := range scores {
		scores[p] = math.Exp(scores[p] - mx)
		sum += scores[p]
	}
	out := make([]float64, hd)
	for p, s := range scores {
		for i := range out {
			out[i] += s / sum * float64(values[p][off+i])
		}
	}
	return out
}

// TestAttentionSplitTokensBatched: decode tokens of two sequences in one
// batch, each split in parts (their states in different slots), beside a
// prompt chunk of a third, against the float64 attention; and the same
// bits on one worker and on three.
func TestAttentionSplitTokensBatched(t *testing.T) {
	shape := synth.Shape{Layers: 1, Dim: 192, Heads: 6, KVHeads: 2, FFN: 64, Vocab: 320, Context: 1024, RopeBase: 10000, Tied: true}
	m := genModel(t, shape, quant.F32, 3)
	c := m.Config
	qd, kvd, hd, group := c.QDim(), c.KVDim(), c.HeadDim, c.NumHeads/c.NumKVHeads
	// Sequence s's last token is at pos[s]; the third runs 5 tokens.
	pos, toks := []int{699, 600, 540}, []int{1, 1, 5}
	rng := rand.New(rand.NewPCG(92, 93))
	keys, values := make([][][]float32, 3), make([][][]float32, 3)
	for s := range pos {
		for p := 0; p < pos[s]+1; p++ {
			k, v := randVec(rng, kvd), randVec(rng, kvd)
			for i := range k {
				k[i] *= 1 + float32(p)/200
			}
			keys[s], values[s] = append(keys[s], k), append(values[s], v)
		}
	}
	q := randVec(rng, 7*qd)
	var outs [][]float32
	for _, threads := range []int{1, 3} {
		b, err := New(m, Options{ContextLen: 1024, KVTokens: 2400, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		seqs := []*backend.Seq{b.kv.NewPrivateSeq(), b.kv.NewPrivateSeq(), b.kv.NewPrivateSeq()}
		for n := kvBlock; n < 700+kvBlock; n += kvBlock { // blocks interleaved
			for s, seq := range seqs {
				if err := seq.Reserve(min(n, pos[s]+1)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for s, seq := range seqs {
			for p := range keys[s] {
				b.cache.store(0, seq.Row(p), keys[s][p], values[s][p])
			}
		}
		copy(b.q, q)
		b.att.t = 7
		b.pos, b.seqs = b.pos[:0], b.seqs[:0]
		for s, seq := range seqs {
			for j := toks[s] - 1; j >= 0; j-- {
				b.pos = append(b.pos, pos[s]-j)
				b.seqs = append(b.seqs, seq)
			}
		}
		b.setChunks()
		b.attention(0)
		if got := len(b.attnItems); got != 2+2+1 {
			t.Fatalf("%d work items a KV head, want 5 (two split tokens of two parts, a chunk)", got)
		}
		tok := 0
		for s := range seqs {
			for j := toks[s] - 1; j >= 0; j-- {
				for h := 0; h < c.NumHeads; h++ {
					want := refAttention(b.q[tok*qd+h*hd:tok*qd+(h+1)*hd], keys[s][:pos[s]-j+1], values[s], h/group*hd)
					if e := relErr(b.att.row(tok)[h*hd:(h+1)*hd], want); !(e < 1e-5) {
						t.Fatalf("%d threads: sequence %d token at %d head %d: relative error %.3g", threads, s, pos[s]-j, h, e)
					}
				}
				tok++
			}
		}
		out := make([]float32, 0, 7*qd)
		for tok := range 7 {
			out = append(out, b.att.row(tok)[:qd]...)
		}
		outs = append(outs, out)
		b.Close()
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Error("the attention's bits differ between one worker and three")
	}
}
