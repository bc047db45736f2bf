package cpu

import (
	"math"

	"gotok/backend"
	"gotok/quant"
)

// Attention runs as small matrix products, one work item per KV head and
// block of attnTokens query tokens. The query heads that share the KV head
// (GQA) and the block's tokens form the rows of one query matrix Q, so each
// key and value row is loaded once for all of them:
//
//	S = Q·Kᵀ  (scaled scores, a tile of attnTile positions at a time)
//	P = exp(S − running max), causally masked
//	O = O·rescale + P·V
//
// with a running maximum and sum per row (the online softmax of flash
// attention), so the scratch does not grow with the context. Keys are
// cached transposed within each block of kvBlock positions (kvCache),
// which makes both products stream rows of their right operand:
// quant.MatMulF32's kernel then needs no horizontal sums. A decode
// token's context past attnPartTiles tiles runs in parts (attnChunk).
const (
	attnTokens = 16
	attnTile   = 256 // positions; a multiple of kvBlock
)

// attnScratch is one worker's attention buffers.
type attnScratch struct {
	q        []float32 // rows × HeadDim: the scaled queries
	s        []float32 // rows × attnTile: scores, then probabilities
	o        []float32 // rows × HeadDim: unnormalized output
	max, sum []float32 // rows: running maximum and sum of exp(s − max)
	runs     []blockRun
}

// bytes is the scratch's float buffers.
func (s *attnScratch) bytes() int64 {
	return 4 * int64(cap(s.q)+cap(s.s)+cap(s.o)+cap(s.max)+cap(s.sum))
}

// attnRows is the query rows of a work item, rounded up to the kernel's
// 4-row tiles.
func attnRows(group int) int { return (attnTokens*group + 3) &^ 3 }

func newAttnScratch(group, headDim int) attnScratch {
	rows := attnRows(group)
	return attnScratch{
		q:   make([]float32, rows*headDim),
		s:   make([]float32, rows*attnTile),
		o:   make([]float32, rows*headDim),
		max: make([]float32, rows),
		sum: make([]float32, rows),
	}
}

// attnChunk is a work item's tokens: batch tokens [t0, t1) of one
// sequence, at consecutive positions from pos. A decode token (t1 = t0+1)
// whose context spans more than attnPartTiles tiles is split into parts
// of that many tiles, each a work item of its own whose softmax state
// (unnormalized output, maximum, sum) goes to part storage from slot on,
// merged after: otherwise one sequence's decode step has a work item a KV
// head (SmolLM's three on two workers: one idles a third of the time), and
// the items' time goes with the context.
type attnChunk struct {
	seq    *backend.Seq
	t0, t1 int
	pos    int
	parts  int
	slot   int
}

// attnPartTiles is the tiles (attnTile positions each) of a decode
// token's context that one work item takes. A fixed size, so that how a
// lone token's attention is summed does not depend on the other
// sequences of its batch or on the number of workers (a token in a chunk
// of several, as a prompt's, is summed unsplit: a prompt's last token can
// differ in the last bits from the same token decoded alone).
const attnPartTiles = 2

// attnItem is one work item of a layer's attention for a KV head: part
// part of chunk chunk.
type attnItem struct{ chunk, part int }

// setChunks splits the batch (b.pos, b.seqs) into runs of at most
// attnTokens consecutive positions of one sequence.
func (b *Backend) setChunks() {
	b.chunks = b.chunks[:0]
	for t := range b.pos {
		if n := len(b.chunks); n > 0 {
			ch := &b.chunks[n-1]
			if ch.seq == b.seqs[t] && ch.t1 == t && ch.pos+(t-ch.t0) == b.pos[t] && t-ch.t0 < attnTokens {
				ch.t1++
				continue
			}
		}
		b.chunks = append(b.chunks, attnChunk{seq: b.seqs[t], t0: t, t1: t + 1, pos: b.pos[t]})
	}
}

// blockRun is positions of a tile that lie in consecutive cache rows:
// n of them from cache row row, at offset off in the tile.
type blockRun struct{ off, row, n int }

// blockRuns appends the runs of the n positions from p0 (a multiple of
// kvBlock) under block table.
func blockRuns(runs []blockRun, table []int32, p0, n int) []blockRun {
	for j := 0; j < n; j += kvBlock {
		blk := int(table[(p0+j)/kvBlock])
		nj := min(kvBlock, n-j)
		if k := len(runs) - 1; k >= 0 && runs[k].row+runs[k].n == blk*kvBlock && runs[k].n%kvBlock == 0 {
			runs[k].n += nj
			continue
		}
		runs = append(runs, blockRun{off: j, row: blk * kvBlock, n: nj})
	}
	return runs
}

// attention computes, for each token of the batch and each head, softmax
// attention over its sequence's positions up to its own (causal).
func (b *Backend) attention(l int) {
	group := b.c.NumHeads / b.c.NumKVHeads
	hd := b.c.HeadDim
	items, slots := b.attnItems[:0], 0
	for i := range b.chunks {
		ch := &b.chunks[i]
		ch.parts, ch.slot = 1, slots
		if ch.t1 == ch.t0+1 {
			_, tiles := b.attnSpan(l, ch)
			ch.parts = max(1, (tiles+attnPartTiles-1)/attnPartTiles)
		}
		if ch.parts > 1 {
			slots += ch.parts
		}
		for p := range ch.parts {
			items = append(items, attnItem{chunk: i, part: p})
		}
	}
	b.attnItems = items
	// A part's state: group rows of the output, then their maxima and sums,
	// for every KV head.
	stride := group*hd + 2*group
	if need := slots * b.c.NumKVHeads * stride; len(b.attnParts) < need {
		b.attnParts = make([]float32, need)
	}
	n := len(items)
	b.pool.parallelFor(b.c.NumKVHeads*n, 1, func(worker, lo, hi int) {
		sc := &b.attn[worker] // a worker's ranges run one at a time
		for it := lo; it < hi; it++ {
			g, item := it/n, items[it%n]
			ch := &b.chunks[item.chunk]
			var state []float32
			if ch.parts > 1 {
				k := (g*slots + ch.slot + item.part) * stride
				state = b.attnParts[k : k+stride]
			}
			b.attendChunk(sc, l, g, ch, item.part, state)
		}
	})
	if slots == 0 {
		return
	}
	for i := range b.chunks {
		if ch := &b.chunks[i]; ch.parts > 1 {
			for g := range b.c.NumKVHeads {
				k := (g*slots + ch.slot) * stride
				b.mergeParts(ch, g, b.attnParts[k:k+ch.parts*stride], stride)
			}
		}
	}
}

// attnSpan is where chunk ch's tiles start in layer l (p0: the first
// position its first token sees, down to a block) and how many tiles of
// attnTile positions cover them up to its last token's.
func (b *Backend) attnSpan(l int, ch *attnChunk) (p0, tiles int) {
	start := 0 // the first position the first token sees
	if w := b.c.LayerAttn[l].Window; w > 0 {
		start = max(0, ch.pos-w+1)
	}
	end := ch.pos + ch.t1 - ch.t0 // positions the last token sees
	p0 = start / kvBlock * kvBlock
	return p0, (end - p0 + attnTile - 1) / attnTile
}

// mergeParts writes the attention output of decode token ch.t0 for the
// query heads of KV head g from its parts' states (ps: ch.parts of them,
// stride apart): each part's sums and output rescaled to the largest
// maximum, then the output over the sum. Every part sees a position: part
// k starts at tile 2k of the token's span, whose first tile holds the
// first position it sees.
func (b *Backend) mergeParts(ch *attnChunk, g int, ps []float32, stride int) {
	c := &b.c
	hd, group := c.HeadDim, c.NumHeads/c.NumKVHeads
	for r := range group {
		mx := float32(math.Inf(-1))
		for p := range ch.parts {
			mx = max(mx, ps[p*stride+group*hd+r])
		}
		h := g*group + r
		dst := b.att.row(ch.t0)[h*hd : (h+1)*hd]
		clear(dst)
		var sum float32
		for p := range ch.parts {
			st := ps[p*stride:]
			alpha := float32(math.Exp(float64(st[group*hd+r] - mx)))
			sum += st[group*hd+group+r] * alpha
			for i, v := range st[r*hd : (r+1)*hd] {
				dst[i] += v * alpha
			}
		}
		inv := 1 / sum
		for i := range dst {
			dst[i] *= inv
		}
	}
}

// attendChunk computes the attention output of a chunk's query tokens for
// the query heads of KV head g, a block of the sequence's cache at a time:
// into the activations, or, for part part of a split decode token, its
// softmax state into state (attention's layout).
func (b *Backend) attendChunk(sc *attnScratch, l, g int, ch *attnChunk, part int, state []float32) {
	c := &b.c
	hd, qd := c.HeadDim, c.QDim()
	group := c.NumHeads / c.NumKVHeads
	t0, t1, pos := ch.t0, ch.t1, ch.pos-ch.t0 // token t is at position pos+t
	// Row r is token t0 + r/group, head g·group + r%group; rows past m pad
	// to a multiple of 4 and are never read back.
	m := (t1 - t0) * group
	rows := (m + 3) &^ 3
	scale := c.Block.AttnScale
	window, cap := c.LayerAttn[l].Window, c.Block.AttnSoftcap
	for r := 0; r < m; r++ {
		t, h := t0+r/group, g*group+r%group
		q := b.q[t*qd+h*hd : t*qd+(h+1)*hd]
		dst := sc.q[r*hd : (r+1)*hd]
		for i, v := range q {
			dst[i] = v * scale
		}
		sc.max[r] = float32(math.Inf(-1))
		sc.sum[r] = 0
	}
	clear(sc.q[m*hd : rows*hd])

	table := ch.seq.Table()
	end := pos + t1 // positions the last token sees
	p0From, _ := b.attnSpan(l, ch)
	// A tile of up to attnTile positions spans whole blocks: their scores
	// go side by side into sc.s, so that the softmax bookkeeping runs once
	// a tile, and blocks that lie next to each other in the cache (as a
	// sequence's blocks mostly do) are multiplied in one product.
	first := true
	p0To := end
	if state != nil { // tiles [k, k+attnPartTiles) from p0From
		k := part * attnPartTiles
		p0From, p0To = p0From+k*attnTile, min(end, p0From+(k+attnPartTiles)*attnTile)
	}
	for p0 := p0From; p0 < p0To; p0 += attnTile {
		n := min(attnTile, end-p0)
		runs := blockRuns(sc.runs[:0], table, p0, n)
		sc.runs = runs
		for _, rn := range runs {
			b.cache.scores(l, g, hd, rows, (rn.n+15)&^15, sc.q, rn.row, sc.s[rn.off:], attnTile)
		}
		for r := 0; r < m; r++ {
			s := sc.s[r*attnTile : r*attnTile+n]
			tp := pos + t0 + r/group // the token's position
			valid := min(n, tp+1-p0) // causal mask
			lo := 0                  // sliding window: positions > tp-window
			if window > 0 {
				lo = max(0, tp-window+1-p0)
			}
			if valid <= lo {
				clear(s)
				continue
			}
			clear(s[:lo])
			if cap != 0 {
				softcap(s[lo:valid], cap)
			}
			if mx := quant.Max(s[lo:valid]); mx > sc.max[r] {
				if sc.sum[r] != 0 { // an earlier tile: rescale its sums
					alpha := float32(math.Exp(float64(sc.max[r] - mx)))
					sc.sum[r] *= alpha
					for i, v := range sc.o[r*hd : (r+1)*hd] {
						sc.o[r*hd+i] = v * alpha
					}
				}
				sc.max[r] = mx
			}
			sc.sum[r] += quant.ExpSum(s[lo:valid], sc.max[r])
			clear(s[valid:])
		}
		for _, rn := range runs {
			b.cache.values(l, g, hd, rows, rn.n, sc.s[rn.off:], attnTile, rn.row, sc.o, !first)
			first = false
		}
	}

	if state != nil { // one token: m is the group's rows
		copy(state, sc.o[:m*hd])
		copy(state[m*hd:], sc.max[:m])
		copy(state[m*hd+m:], sc.sum[:m])
		return
	}
	for r := 0; r < m; r++ {
		t, h := t0+r/group, g*group+r%group
		dst := b.att.row(t)[h*hd : (h+1)*hd]
		inv := 1 / sc.sum[r]
		for i, v := range sc.o[r*hd : (r+1)*hd] {
			dst[i] = v * inv
		}
	}
}
