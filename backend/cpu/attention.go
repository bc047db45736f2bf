package cpu

import (
	"math"

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
// cached transposed, head by head (position fastest), which makes both
// products stream rows of their right operand: quant.MatMulF32's kernel
// then needs no horizontal sums.
const (
	attnTokens = 16
	attnTile   = 256 // positions; a multiple of 16
)

// attnScratch is one worker's attention buffers.
type attnScratch struct {
	q        []float32 // rows × HeadDim: the scaled queries
	s        []float32 // rows × attnTile: scores, then probabilities
	o        []float32 // rows × HeadDim: unnormalized output
	max, sum []float32 // rows: running maximum and sum of exp(s − max)
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

// keyStride is the length of a transposed key cache row: the context
// rounded up to MatMulF32's 16-column tiles, plus 16 floats so that the
// rows of a head do not all map to the same L1 cache set when the context
// is a multiple of 1024.
func keyStride(ctxLen int) int { return (ctxLen+15)&^15 + 16 }

// storeKey writes the key k (KVDim floats) of position p into the
// transposed key cache kc.
func (b *Backend) storeKey(kc, k []float32, p int) {
	for i, v := range k {
		kc[i*b.kstride+p] = v
	}
}

// attention computes, for each of the T query tokens at positions pos, …
// and each head, softmax attention over the cached positions up to the
// token's own (causal).
func (b *Backend) attention(l, T, pos int) {
	blocks := (T + attnTokens - 1) / attnTokens
	items := b.c.NumKVHeads * blocks
	b.pool.parallelFor(items, 1, func(lo, hi int) {
		// Each range gets its own scratch: ranges are disjoint and there
		// are at most threads of them.
		sc := &b.attn[lo*len(b.attn)/items]
		for it := lo; it < hi; it++ {
			g, t0 := it/blocks, it%blocks*attnTokens
			b.attendBlock(sc, l, g, t0, min(t0+attnTokens, T), pos)
		}
	})
}

// attendBlock computes the attention output of query tokens [t0, t1) of
// the batch for the query heads of KV head g.
func (b *Backend) attendBlock(sc *attnScratch, l, g, t0, t1, pos int) {
	c := &b.c
	hd, qd, kvd := c.HeadDim, c.QDim(), c.KVDim()
	group := c.NumHeads / c.NumKVHeads
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

	kc := b.kcache[l][g*hd*b.kstride:]
	vc := b.vcache[l][g*hd:]
	end := pos + t1 // positions the last token sees
	start := 0      // the first position the first token sees
	if window > 0 {
		start = max(0, pos+t0-window+1)
	}
	for p0 := start; p0 < end; p0 += attnTile {
		n := min(attnTile, end-p0)
		quant.MatMulF32(rows, (n+15)&^15, hd, sc.q, hd, kc[p0:], b.kstride, sc.s, attnTile, false)
		for r := 0; r < m; r++ {
			s := sc.s[r*attnTile : r*attnTile+n]
			tp := pos + t0 + r/group // the token's position
			valid := min(n, tp+1-p0) // causal mask
			first := 0               // sliding window: positions > tp-window
			if window > 0 {
				first = max(0, tp-window+1-p0)
			}
			if valid <= first {
				clear(s)
				continue
			}
			clear(s[:first])
			if cap != 0 {
				softcap(s[first:valid], cap)
			}
			if mx := quant.Max(s[first:valid]); mx > sc.max[r] {
				if sc.sum[r] != 0 { // an earlier tile: rescale its sums
					alpha := float32(math.Exp(float64(sc.max[r] - mx)))
					sc.sum[r] *= alpha
					for i, v := range sc.o[r*hd : (r+1)*hd] {
						sc.o[r*hd+i] = v * alpha
					}
				}
				sc.max[r] = mx
			}
			sc.sum[r] += quant.ExpSum(s[first:valid], sc.max[r])
			clear(s[valid:])
		}
		quant.MatMulF32(rows, hd, n, sc.s, attnTile, vc[p0*kvd:], kvd, sc.o, hd, p0 > start)
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
