package cpu

import (
	"fmt"

	"gotok/quant"
)

// kvCache holds the keys and values of every layer, KV head by KV head,
// in blocks of kvBlock cache rows (positions): a head's keys a block at a
// time transposed (hd rows of kvBlock, position fastest), so that the
// scores' product streams rows of its right operand and needs no
// horizontal sums; its values a row of hd a position. A head's block is
// one contiguous run of memory (4 KB of f32 keys at head size 64): with
// the keys of a whole layer transposed instead (a row of every position a
// dimension), a 16-position tile of the product read 64 rows far apart,
// and the product over a long context ran at ~4 GB/s a core from memory
// where the weights stream at 8. Its elements are float32 or, in half the
// memory, float16 (llama.cpp's default): the attention products widen
// them as they load them.
type kvCache struct {
	half      bool
	hd, heads int
	rows      int // cache rows, a multiple of kvBlock
	k32, v32  [][]float32
	k16, v16  [][]uint16
}

// newKVCache allocates a cache of rows rows (rounded up to whole blocks)
// for layers layers of kvd values, heads of hd, with elements of type t
// (F32 or F16).
func newKVCache(t quant.Type, layers, kvd, hd, rows int) (*kvCache, error) {
	if hd <= 0 || kvd%hd != 0 {
		return nil, fmt.Errorf("cpu: KV cache of %d values a row in heads of %d", kvd, hd)
	}
	rows = (rows + kvBlock - 1) / kvBlock * kvBlock
	c := &kvCache{hd: hd, heads: kvd / hd, rows: rows}
	switch t {
	case quant.F32:
		c.k32, c.v32 = make([][]float32, layers), make([][]float32, layers)
		for l := range layers {
			c.k32[l], c.v32[l] = make([]float32, kvd*rows), make([]float32, kvd*rows)
		}
	case quant.F16:
		c.half = true
		c.k16, c.v16 = make([][]uint16, layers), make([][]uint16, layers)
		for l := range layers {
			c.k16[l], c.v16[l] = make([]uint16, kvd*rows), make([]uint16, kvd*rows)
		}
	default:
		return nil, fmt.Errorf("cpu: a KV cache of %v is not supported (f32 or f16)", t)
	}
	return c, nil
}

// bytes is the cache's size.
func (c *kvCache) bytes() int64 {
	var n int64
	for l := range c.k32 {
		n += 4 * int64(len(c.k32[l])+len(c.v32[l]))
	}
	for l := range c.k16 {
		n += 2 * int64(len(c.k16[l])+len(c.v16[l]))
	}
	return n
}

// keyAt is where dimension d of KV head g's key of cache row row is.
func (c *kvCache) keyAt(g, row, d int) int {
	return ((g*c.rows+row&^(kvBlock-1))*c.hd + d*kvBlock) + row&(kvBlock-1)
}

// valueAt is where KV head g's value of cache row row starts.
func (c *kvCache) valueAt(g, row int) int { return (g*c.rows + row) * c.hd }

// storeKeys writes dimensions [i0, i1) of layer l's keys of a batch into
// the cache: token t's key at k[t·ldk …], its row rows[t].
func (c *kvCache) storeKeys(l int, rows []int, k []float32, ldk, i0, i1 int) {
	for i := i0; i < i1; i++ {
		g, d := i/c.hd, i%c.hd
		for t, row := range rows {
			if c.half {
				c.k16[l][c.keyAt(g, row, d)] = toHalf(k[t*ldk+i])
			} else {
				c.k32[l][c.keyAt(g, row, d)] = k[t*ldk+i]
			}
		}
	}
}

// storeValue writes layer l's value v (KVDim) into cache row row.
func (c *kvCache) storeValue(l, row int, v []float32) {
	for g := range c.heads {
		at, src := c.valueAt(g, row), v[g*c.hd:(g+1)*c.hd]
		if c.half {
			for i, x := range src {
				c.v16[l][at+i] = toHalf(x)
			}
			continue
		}
		copy(c.v32[l][at:at+c.hd], src)
	}
}

// scores sets s (rows × n, rows ldS apart) to q·Kᵀ for layer l's cache
// rows [row, row+n) of KV head g: q is rows × hd, row a multiple of
// kvBlock and n of 16 (kvBlock), one product a block.
func (c *kvCache) scores(l, g, hd, rows, n int, q []float32, row int, s []float32, ldS int) {
	for j := 0; j < n; j += kvBlock {
		at := c.keyAt(g, row+j, 0)
		if c.half {
			quant.MatMulF32F16(rows, kvBlock, hd, q, hd, c.k16[l][at:], kvBlock, s[j:], ldS, false)
			continue
		}
		quant.MatMulF32(rows, kvBlock, hd, q, hd, c.k32[l][at:], kvBlock, s[j:], ldS, false)
	}
}

// values sets o (rows × hd), or adds to it when accumulate, p·V for
// layer l's cache rows [row, row+n) of KV head g: p is rows × n, ldP
// apart.
func (c *kvCache) values(l, g, hd, rows, n int, p []float32, ldP int, row int, o []float32, accumulate bool) {
	at := c.valueAt(g, row)
	if c.half {
		quant.MatMulF32F16(rows, hd, n, p, ldP, c.v16[l][at:], hd, o, hd, accumulate)
		return
	}
	quant.MatMulF32(rows, hd, n, p, ldP, c.v32[l][at:], hd, o, hd, accumulate)
}

// toHalf rounds x to float16, clamped to its largest finite value: an
// infinity in the cache would turn the zero probabilities of masked
// positions into NaN (0·∞) for every query that reads its row.
func toHalf(x float32) uint16 {
	const maxHalf = 65504
	return quant.F32ToF16(max(-maxHalf, min(maxHalf, x)))
}
