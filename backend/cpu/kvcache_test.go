package cpu

import (
	"math"
	"testing"

	"gotok/quant"
)

// TestKVCacheHalfClamps: values past float16's range are stored as its
// largest finite value, not as infinities (which would make NaN of the
// masked positions' zero probabilities), and the float32 cache keeps them.
func TestKVCacheHalfClamps(t *testing.T) {
	const kvd, rows = 4, 32
	k := []float32{1e6, -1e6, 1.5, float32(math.Inf(1))}
	v := []float32{-7e4, 7e4, -2.25, 0}
	for _, typ := range []quant.Type{quant.F16, quant.F32} {
		c, err := newKVCache(typ, 1, kvd, 2, rows) // two heads of 2
		if err != nil {
			t.Fatal(err)
		}
		c.store(0, 21, k, v)
		for i := range kvd {
			ka, va := c.keyAt(i/2, 21, i%2), c.valueAt(i/2, 21)+i%2
			var gk, gv float32
			if typ == quant.F16 {
				gk, gv = quant.F16ToF32(c.k16[0][ka]), quant.F16ToF32(c.v16[0][va])
			} else {
				gk, gv = c.k32[0][ka], c.v32[0][va]
			}
			wk, wv := k[i], v[i]
			if typ == quant.F16 {
				wk, wv = max(-65504, min(65504, wk)), max(-65504, min(65504, wv))
			}
			if gk != wk || gv != wv {
				t.Errorf("%v cache, element %d: key %v value %v, want %v %v", typ, i, gk, gv, wk, wv)
			}
		}
	}
}

// TestKVCacheBytes: the cache's size is its keys and values (KVDim each a
// position, the positions rounded up to whole blocks) for every layer, at
// the element's width.
func TestKVCacheBytes(t *testing.T) {
	const layers, kvd, rows = 3, 8, 100
	for _, tc := range []struct {
		typ  quant.Type
		elem int64
	}{{quant.F32, 4}, {quant.F16, 2}} {
		c, err := newKVCache(tc.typ, layers, kvd, 4, rows)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.bytes(), layers*tc.elem*int64(2*kvd*112); got != want { // 100 rows: 7 blocks
			t.Errorf("%v cache: %d bytes, want %d", tc.typ, got, want)
		}
	}
}

// store writes layer l's key k and value v (KVDim each) into cache row
// row: the tests' one-token store (the engine stores a batch at a time,
// Backend.storeKV).
func (c *kvCache) store(l, row int, k, v []float32) {
	c.storeKeys(l, []int{row}, k, len(k), 0, len(k))
	c.storeValue(l, row, v)
}
