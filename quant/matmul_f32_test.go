package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

type matMulF32Impl struct {
	name string
	f    func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool)
}

func matMulF32Impls() []matMulF32Impl {
	impls := []matMulF32Impl{{"generic", matMulF32Generic}, {"public", MatMulF32}}
	if useAVX2 {
		// The kernel alone, on the 4-row, 16-column tiles it handles.
		impls = append(impls, matMulF32Impl{"avx2", func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
			if m%4 != 0 || n%16 != 0 || k == 0 {
				panic("avx2 kernel test: bad shape")
			}
			acc := 0
			if accumulate {
				acc = 1
			}
			for i := 0; i < m; i += 4 {
				matMulF32AVX2(&a[i*lda], lda, &b[0], ldb, k, &c[i*ldc], ldc, n/16, acc)
			}
		}})
	}
	return impls
}

func randF32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// TestMatMulF32 multiplies random matrices of many shapes, stored with
// strides wider than their rows, and checks every element of c against a
// float64 product, and that c is untouched outside the m×n result.
func TestMatMulF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(70, 71))
	for _, impl := range matMulF32Impls() {
		for _, m := range []int{1, 3, 4, 8, 9, 12} {
			for _, n := range []int{1, 5, 16, 17, 32, 48, 64, 80, 96} {
				for _, k := range []int{1, 2, 7, 64, 130} {
					if impl.name == "avx2" && (m%4 != 0 || n%16 != 0) {
						continue
					}
					for _, accumulate := range []bool{false, true} {
						lda, ldb, ldc := k+rng.IntN(3), n+rng.IntN(20), n+rng.IntN(3)
						a, b := randF32(rng, m*lda), randF32(rng, k*ldb)
						c := randF32(rng, m*ldc+5)
						c0 := append([]float32(nil), c...)
						impl.f(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
						for i := 0; i < m; i++ {
							for j := 0; j < ldc; j++ {
								at := fmt.Sprintf("%s %d×%d×%d accumulate=%v: c[%d][%d]", impl.name, m, n, k, accumulate, i, j)
								got := c[i*ldc+j]
								if j >= n {
									if got != c0[i*ldc+j] {
										t.Fatalf("%s outside the result changed", at)
									}
									continue
								}
								var want, mag float64
								if accumulate {
									want, mag = float64(c0[i*ldc+j]), math.Abs(float64(c0[i*ldc+j]))
								}
								for l := 0; l < k; l++ {
									p := float64(a[i*lda+l]) * float64(b[l*ldb+j])
									want += p
									mag += math.Abs(p)
								}
								checkClose(t, at, got, want, mag)
							}
						}
						for i := m * ldc; i < len(c); i++ {
							if c[i] != c0[i] {
								t.Fatalf("%s %d×%d×%d wrote past the last row", impl.name, m, n, k)
							}
						}
					}
				}
			}
		}
	}
}

func TestMatMulF32Empty(t *testing.T) {
	c := []float32{1, 2, 3, 4}
	MatMulF32(2, 2, 0, nil, 0, nil, 0, c, 2, true)
	if c[0] != 1 || c[3] != 4 {
		t.Errorf("k=0 accumulate changed c: %v", c)
	}
	MatMulF32(2, 2, 0, nil, 0, nil, 0, c, 2, false)
	for _, v := range c {
		if v != 0 {
			t.Fatalf("k=0 did not clear c: %v", c)
		}
	}
	MatMulF32(0, 3, 3, nil, 0, make([]float32, 9), 3, nil, 0, false)
	MatMulF32(3, 0, 3, make([]float32, 9), 3, nil, 0, nil, 0, false)
}

func TestMatMulF32Panics(t *testing.T) {
	a, b, c := make([]float32, 4*8), make([]float32, 8*16), make([]float32, 4*16)
	cases := map[string]func(){
		"negative":     func() { MatMulF32(-1, 16, 8, a, 8, b, 16, c, 16, false) },
		"short a":      func() { MatMulF32(4, 16, 8, a[:31], 8, b, 16, c, 16, false) },
		"short b":      func() { MatMulF32(4, 16, 8, a, 8, b[:127], 16, c, 16, false) },
		"short c":      func() { MatMulF32(4, 16, 8, a, 8, b, 16, c[:63], 16, false) },
		"narrow lda":   func() { MatMulF32(4, 16, 8, a, 7, b, 16, c, 16, false) },
		"narrow ldc":   func() { MatMulF32(4, 16, 8, a, 8, b, 16, c, 15, false) },
		"narrow ldb":   func() { MatMulF32(4, 16, 8, a, 8, b, 15, c, 16, false) },
		"short a rows": func() { MatMulF32(5, 16, 8, a, 8, b, 16, c, 16, false) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "quant: ") {
					t.Errorf("%s: recovered %v, want a quant: panic", name, r)
				}
			}()
			f()
		}()
	}
}

// BenchmarkMatMulF32 runs the attention shapes of SmolLM-135M for 16
// tokens of one KV head group (48 query rows, head size 64) against 256
// positions: scores = Q·Kᵀ and output = P·V.
func BenchmarkMatMulF32(b *testing.B) {
	rng := rand.New(rand.NewPCG(72, 73))
	for _, s := range []struct {
		name         string
		m, n, k, ldb int
	}{{"QK", 48, 256, 64, 512}, {"PV", 48, 64, 256, 192},
		// The float prefill's tile (backend/cpu floatRowsTiled): 16 weight
		// rows by 64 tokens, SmolLM's and Llama-1B's widths.
		{"rows576", 16, 64, 576, 128}, {"rows2048", 16, 64, 2048, 128}} {
		a, bm, c := randF32(rng, s.m*s.k), randF32(rng, s.k*s.ldb), make([]float32, s.m*s.n)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(2 * s.m * s.n * s.k)) // flops, as bytes
			for b.Loop() {
				MatMulF32(s.m, s.n, s.k, a, s.k, bm, s.ldb, c, s.n, false)
			}
		})
	}
}
