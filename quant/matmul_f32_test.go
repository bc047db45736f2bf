package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// matMulF32Impl is one way to multiply: f with B in float32, or f16 with
// B in float16 (MatMulF32F16 and its kernels).
type matMulF32Impl struct {
	name string
	f    func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool)
	f16  func(m, n, k int, a []float32, lda int, b []uint16, ldb int, c []float32, ldc int, accumulate bool)
}

func matMulF32Impls() []matMulF32Impl {
	impls := []matMulF32Impl{{name: "generic", f: matMulF32Generic[float32]}, {name: "public", f: MatMulF32},
		{name: "generic f16", f16: matMulF32Generic[uint16]}, {name: "public f16", f16: MatMulF32F16}}
	// The kernels alone, on the 4-row tiles of 16 or 32 columns they take.
	kernel := func(name string, cols int, f func(*float32, int, *float32, int, int, *float32, int, int, int), f16 func(*float32, int, *uint16, int, int, *float32, int, int, int)) matMulF32Impl {
		im := matMulF32Impl{name: name}
		rows := matMulF32KernelRows[name]
		run := func(m, n, k int, acc bool, call func(i, acc int)) {
			if m%rows != 0 || n%cols != 0 || k == 0 {
				panic(name + " kernel test: bad shape")
			}
			a := 0
			if acc {
				a = 1
			}
			for i := 0; i < m; i += rows {
				call(i, a)
			}
		}
		if f != nil {
			im.f = func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
				run(m, n, k, accumulate, func(i, acc int) { f(&a[i*lda], lda, &b[0], ldb, k, &c[i*ldc], ldc, n/cols, acc) })
			}
		} else {
			im.f16 = func(m, n, k int, a []float32, lda int, b []uint16, ldb int, c []float32, ldc int, accumulate bool) {
				run(m, n, k, accumulate, func(i, acc int) { f16(&a[i*lda], lda, &b[0], ldb, k, &c[i*ldc], ldc, n/cols, acc) })
			}
		}
		return im
	}
	if useAVX2 {
		impls = append(impls, kernel("avx2 f16", 16, nil, matMulF32F16AVX2))
	}
	if useAVX512 {
		impls = append(impls, kernel("avx512", 32, matMulF32AVX512, nil), kernel("avx512 f16", 32, nil, matMulF32F16AVX512),
			kernel("avx512x8", 32, matMulF32x8AVX512, nil), kernel("avx512x8 f16", 32, nil, matMulF32F16x8AVX512))
	}
	if useAVX2 {
		impls = append(impls, kernel("avx2", 16, matMulF32AVX2, nil),
			kernel("avx2 row", 16, matMulF32RowAVX2, nil), kernel("avx2 row f16", 16, nil, matMulF32F16RowAVX2))
		// The 8-column kernels take one tile a call: called for each.
		col8 := func(f func(*float32, int, *float32, int, int, *float32, int, int, int), f16 func(*float32, int, *uint16, int, int, *float32, int, int, int)) (func(*float32, int, *float32, int, int, *float32, int, int, int), func(*float32, int, *uint16, int, int, *float32, int, int, int)) {
			var g func(*float32, int, *float32, int, int, *float32, int, int, int)
			var g16 func(*float32, int, *uint16, int, int, *float32, int, int, int)
			if f != nil {
				g = func(a *float32, lda int, b *float32, ldb, k int, c *float32, ldc, tiles, acc int) {
					bs, cs := unsafe.Slice(b, 8*tiles), unsafe.Slice(c, 8*tiles)
					for t := range tiles {
						f(a, lda, &bs[8*t], ldb, k, &cs[8*t], ldc, 1, acc)
					}
				}
			}
			if f16 != nil {
				g16 = func(a *float32, lda int, b *uint16, ldb, k int, c *float32, ldc, tiles, acc int) {
					bs, cs := unsafe.Slice(b, 8*tiles), unsafe.Slice(c, 8*tiles)
					for t := range tiles {
						f16(a, lda, &bs[8*t], ldb, k, &cs[8*t], ldc, 1, acc)
					}
				}
			}
			return g, g16
		}
		f, _ := col8(matMulF32Col8AVX2, nil)
		_, f16 := col8(nil, matMulF32F16Col8AVX2)
		rf, _ := col8(matMulF32RowCol8AVX2, nil)
		_, rf16 := col8(nil, matMulF32F16RowCol8AVX2)
		impls = append(impls, kernel("avx2 col8", 8, f, nil), kernel("avx2 col8 f16", 8, nil, f16),
			kernel("avx2 row col8", 8, rf, nil), kernel("avx2 row col8 f16", 8, nil, rf16))
	}
	return impls
}

// The kernels' tiles: rows of A and columns of B a call takes.
var (
	matMulF32KernelRows = map[string]int{"avx2": 4, "avx2 f16": 4, "avx512": 4, "avx512 f16": 4, "avx512x8": 8, "avx512x8 f16": 8,
		"avx2 row": 1, "avx2 row f16": 1, "avx2 col8": 4, "avx2 col8 f16": 4, "avx2 row col8": 1, "avx2 row col8 f16": 1}
	matMulF32KernelCols = map[string]int{"avx2": 16, "avx2 f16": 16, "avx512": 32, "avx512 f16": 32, "avx512x8": 32, "avx512x8 f16": 32,
		"avx2 row": 16, "avx2 row f16": 16, "avx2 col8": 8, "avx2 col8 f16": 8, "avx2 row col8": 8, "avx2 row col8 f16": 8}
)

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
		for _, m := range []int{1, 3, 4, 8, 9, 12, 16, 20} {
			for _, n := range []int{1, 5, 8, 16, 17, 24, 32, 48, 64, 80, 96} {
				for _, k := range []int{1, 2, 7, 64, 130} {
					if cols := matMulF32KernelCols[impl.name]; cols > 0 && (m%matMulF32KernelRows[impl.name] != 0 || n%cols != 0) {
						continue
					}
					for _, accumulate := range []bool{false, true} {
						lda, ldb, ldc := k+rng.IntN(3), n+rng.IntN(20), n+rng.IntN(3)
						a, b := randF32(rng, m*lda), randF32(rng, k*ldb)
						c := randF32(rng, m*ldc+5)
						c0 := append([]float32(nil), c...)
						if impl.f16 != nil {
							// B in float16: the product of the rounded values.
							bh := make([]uint16, len(b))
							for i, v := range b {
								bh[i] = F32ToF16(v)
								b[i] = F16ToF32(bh[i])
							}
							impl.f16(m, n, k, a, lda, bh, ldb, c, ldc, accumulate)
						} else {
							impl.f(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
						}
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

// TestMatMulF32RowsAlone: a row of A gives the same bits of C whether it
// is multiplied alone or among others (tiles of four or eight, the rows
// past them one at a time), with B in float32 or float16, so that a
// token's attention does not depend on what else is in its product.
func TestMatMulF32RowsAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(72, 73))
	for _, m := range []int{2, 3, 4, 5, 8, 11} {
		for _, n := range []int{8, 16, 24, 30, 64} {
			for _, accumulate := range []bool{false, true} {
				k, lda, ldb, ldc := 40, 43, n+3, n+1
				a, b := randF32(rng, m*lda), randF32(rng, k*ldb)
				bh := make([]uint16, len(b))
				for i, v := range b {
					bh[i] = F32ToF16(v)
				}
				c0 := randF32(rng, m*ldc)
				for _, half := range []bool{false, true} {
					mul := func(rows int, a, c []float32) {
						if half {
							MatMulF32F16(rows, n, k, a, lda, bh, ldb, c, ldc, accumulate)
						} else {
							MatMulF32(rows, n, k, a, lda, b, ldb, c, ldc, accumulate)
						}
					}
					all := append([]float32(nil), c0...)
					mul(m, a, all)
					for r := range m {
						one := append([]float32(nil), c0[r*ldc:r*ldc+n]...)
						mul(1, a[r*lda:], one)
						for j := range n {
							if math.Float32bits(one[j]) != math.Float32bits(all[r*ldc+j]) {
								t.Fatalf("m %d n %d half %v accumulate %v: row %d column %d is %v alone, %v among %d rows",
									m, n, half, accumulate, r, j, one[j], all[r*ldc+j], m)
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
		// A decode token's three query heads of a KV head (SmolLM): scores
		// over a 16-position block, values over 256 positions.
		{"QK3", 3, 16, 64, 16}, {"PV3", 3, 64, 256, 64},
		// The float prefill's tile (backend/cpu floatRowsTiled): 16 weight
		// rows by 64 tokens, SmolLM's and Llama-1B's widths.
		{"rows576", 16, 64, 576, 128}, {"rows2048", 16, 64, 2048, 128}} {
		a, bm, c := randF32(rng, s.m*s.k), randF32(rng, s.k*s.ldb), make([]float32, s.m*s.n)
		bh := make([]uint16, len(bm))
		for i, v := range bm {
			bh[i] = F32ToF16(v)
		}
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(2 * s.m * s.n * s.k)) // flops, as bytes
			for b.Loop() {
				MatMulF32(s.m, s.n, s.k, a, s.k, bm, s.ldb, c, s.n, false)
			}
		})
		b.Run(s.name+"/f16", func(b *testing.B) {
			b.SetBytes(int64(2 * s.m * s.n * s.k))
			for b.Loop() {
				MatMulF32F16(s.m, s.n, s.k, a, s.k, bh, s.ldb, c, s.n, false)
			}
		})
	}
}
