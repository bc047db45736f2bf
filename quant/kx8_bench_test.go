package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkMatMulKX8Tile multiplies 256 Q4_K or Q6_K rows of Llama-1B's
// width (2048) and of its FFN's (8192) by 128 tokens on one thread, by
// the kernels that batches take without VNNI, and reports
// multiply–accumulates a second.
func BenchmarkMatMulKX8Tile(b *testing.B) {
	if !useAVX2 {
		b.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, tokens = 256, 128
	for _, typ := range []Type{Q4_K, Q6_K} {
		for _, cols := range []int{2048, 8192} {
			nb := cols / QK_K
			w := randK(rng, typ, nb*rows, 0)
			x, _ := randQ8K(b, rng, nb*tokens, 1)
			out := make([]float32, rows*tokens)
			for _, k := range []struct {
				name string
				f    func(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int)
			}{
				{"row4", matMulKTiled},
				{"x8", matMulKX8},
			} {
				b.Run(fmt.Sprint(typ, "/", k.name, "/", cols), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						k.f(typ, w, nb, rows, x, tokens, out, rows)
					}
					b.ReportMetric(float64(rows*tokens*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}
