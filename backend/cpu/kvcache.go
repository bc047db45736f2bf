package cpu

import (
	"fmt"

	"gotok/quant"
)

// kvCache holds the keys and values of every layer: per cache row, a row
// of KVDim values, and the keys transposed for attention (KVDim rows,
// head by head, of stride elements, one per cache row). Its elements are
// float32 or, in half the memory, float16 (llama.cpp's default): the
// attention products widen them as they load them.
type kvCache struct {
	half     bool
	kvd      int
	stride   int
	k32, v32 [][]float32
	k16, v16 [][]uint16
}

// newKVCache allocates a cache of rows rows for layers layers of kvd
// values, with elements of type t (F32 or F16).
func newKVCache(t quant.Type, layers, kvd, rows int) (*kvCache, error) {
	c := &kvCache{kvd: kvd, stride: keyStride(rows)}
	switch t {
	case quant.F32:
		c.k32, c.v32 = make([][]float32, layers), make([][]float32, layers)
		for l := range layers {
			c.k32[l], c.v32[l] = make([]float32, kvd*c.stride), make([]float32, kvd*rows)
		}
	case quant.F16:
		c.half = true
		c.k16, c.v16 = make([][]uint16, layers), make([][]uint16, layers)
		for l := range layers {
			c.k16[l], c.v16[l] = make([]uint16, kvd*c.stride), make([]uint16, kvd*rows)
		}
	default:
		return nil, fmt.Errorf("cpu: a KV cache of %v is not supported (f32 or f16)", t)
	}
	return c, nil
}

// keyStride is the length of a transposed key cache row: the pool's rows
// rounded up to MatMulF32's 16-column tiles, plus 16 elements so that the
// rows of a head do not all map to the same L1 cache set when the pool is
// a multiple of 1024 rows.
func keyStride(rows int) int { return (rows+15)&^15 + 16 }

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

// storeKeys writes dimensions [i0, i1) of layer l's keys of a batch into
// the cache: token t's key at k[t·ldk …], its row rows[t]. A dimension's
// cache row takes the tokens in turn, so that consecutive positions land
// in one cache line in a run.
func (c *kvCache) storeKeys(l int, rows []int, k []float32, ldk, i0, i1 int) {
	for i := i0; i < i1; i++ {
		if c.half {
			kc := c.k16[l][i*c.stride:]
			for t, row := range rows {
				kc[row] = toHalf(k[t*ldk+i])
			}
			continue
		}
		kc := c.k32[l][i*c.stride:]
		for t, row := range rows {
			kc[row] = k[t*ldk+i]
		}
	}
}

// storeValue writes layer l's value v (KVDim) into cache row row.
func (c *kvCache) storeValue(l, row int, v []float32) {
	if c.half {
		vc := c.v16[l][row*c.kvd : (row+1)*c.kvd]
		for i, x := range v {
			vc[i] = toHalf(x)
		}
		return
	}
	copy(c.v32[l][row*c.kvd:(row+1)*c.kvd], v)
}

// scores sets s (rows × n, rows ldS apart) to q·Kᵀ for layer l's cache
// rows [row, row+n) of KV head g: q is rows × hd, n a multiple of 16.
func (c *kvCache) scores(l, g, hd, rows, n int, q []float32, row int, s []float32, ldS int) {
	off := g*hd*c.stride + row
	if c.half {
		quant.MatMulF32F16(rows, n, hd, q, hd, c.k16[l][off:], c.stride, s, ldS, false)
		return
	}
	quant.MatMulF32(rows, n, hd, q, hd, c.k32[l][off:], c.stride, s, ldS, false)
}

// values sets o (rows × hd), or adds to it when accumulate, p·V for
// layer l's cache rows [row, row+n) of KV head g: p is rows × n, ldP
// apart.
func (c *kvCache) values(l, g, hd, rows, n int, p []float32, ldP int, row int, o []float32, accumulate bool) {
	off := row*c.kvd + g*hd
	if c.half {
		quant.MatMulF32F16(rows, hd, n, p, ldP, c.v16[l][off:], c.kvd, o, hd, accumulate)
		return
	}
	quant.MatMulF32(rows, hd, n, p, ldP, c.v32[l][off:], c.kvd, o, hd, accumulate)
}

// toHalf rounds x to float16, clamped to its largest finite value: an
// infinity in the cache would turn the zero probabilities of masked
// positions into NaN (0·∞) for every query that reads its row.
func toHalf(x float32) uint16 {
	const maxHalf = 65504
	return quant.F32ToF16(max(-maxHalf, min(maxHalf, x)))
}
