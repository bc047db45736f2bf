package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randFloatRows returns rows×cols random values of type t as tensor bytes
// and as the float32 values they hold.
func randFloatRows(rng *rand.Rand, t Type, rows, cols int) ([]byte, []float32) {
	w := make([]byte, rows*cols*t.BlockBytes())
	v := make([]float32, rows*cols)
	for i := range v {
		f := float32(rng.NormFloat64())
		switch t {
		case F32:
			binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(f))
		case F16:
			h := F32ToF16(f)
			binary.LittleEndian.PutUint16(w[2*i:], h)
			f = F16ToF32(h)
		case BF16:
			h := F32ToBF16(f)
			binary.LittleEndian.PutUint16(w[2*i:], h)
			f = BF16ToF32(h)
		}
		v[i] = f
	}
	return w, v
}

// TestMatMulFloat multiplies random float rows by random tokens, for row,
// column and token counts on and off the kernel's tiles (panels of 48 rows
// packed 16 at a time, 16 columns, 8 tokens, then 4, 2, 1), scratch larger
// than needed and output strides wider than the rows, and checks every
// result against a float64 product and that out is untouched elsewhere.
// The weights go on past the rows at times, as the CPU backend passes them.
func TestMatMulFloat(t *testing.T) {
	testMatMulFloat(t, rand.New(rand.NewPCG(72, 73)), []int{1, 3, 13, 16, 17, 36, 47, 48, 49, 64, 96, 100, 150},
		[]int{7, 16, 48, 256}, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 64})
}

// TestMatMulFloatLongRows is TestMatMulFloat for rows of more columns than
// a chunk of the AVX2 panel (panelColsAVX2), whose sums are added chunk
// by chunk.
func TestMatMulFloatLongRows(t *testing.T) {
	testMatMulFloat(t, rand.New(rand.NewPCG(74, 75)), []int{5, 24, 31}, []int{panelColsAVX2 + 16, 2*panelColsAVX2 + 48}, []int{1, 3, 4, 6})
}

func testMatMulFloat(t *testing.T, rng *rand.Rand, rowCounts, colCounts, tokenCounts []int) {
	for _, typ := range []Type{F32, F16, BF16} {
		for _, rows := range rowCounts {
			for _, cols := range colCounts {
				for _, tokens := range tokenCounts {
					scratch := MatMulFloatScratch(cols) + rng.IntN(2)*cols
					outStride := rows + rng.IntN(3)
					at := fmt.Sprintf("%v %d rows × %d columns × %d tokens (scratch %d, stride %d)",
						typ, rows, cols, tokens, scratch, outStride)
					// Rows past those multiplied, which it may prefetch.
					w, wv := randFloatRows(rng, typ, rows+rng.IntN(2)*50, cols)
					x := randF32(rng, tokens*cols)
					out := randF32(rng, tokens*outStride+3)
					out0 := append([]float32(nil), out...)
					MatMulFloat(typ, w, cols, rows, x, tokens, out, outStride, make([]float32, scratch))
					for i := 0; i < tokens; i++ {
						for r := 0; r < outStride; r++ {
							got := out[i*outStride+r]
							if r >= rows {
								if got != out0[i*outStride+r] {
									t.Fatalf("%s: out[%d][%d] outside the result changed", at, i, r)
								}
								continue
							}
							var want, mag float64
							for l := 0; l < cols; l++ {
								p := float64(wv[r*cols+l]) * float64(x[i*cols+l])
								want += p
								mag += math.Abs(p)
							}
							checkClose(t, fmt.Sprintf("%s: out[%d][%d]", at, i, r), got, want, mag)
						}
					}
					for i := tokens * outStride; i < len(out); i++ {
						if out[i] != out0[i] {
							t.Fatalf("%s: wrote past the last token", at)
						}
					}
				}
			}
		}
	}
}

func TestMatMulFloatPanics(t *testing.T) {
	w, x, out, sc := make([]byte, 4*16*2), make([]float32, 8*16), make([]float32, 8*4), make([]float32, MatMulFloatScratch(16))
	cases := map[string]func(){
		"type":          func() { MatMulFloat(Q8_0, w, 16, 4, x, 8, out, 4, sc) },
		"short w":       func() { MatMulFloat(F16, w[:127], 16, 4, x, 8, out, 4, sc) },
		"short x":       func() { MatMulFloat(F16, w, 16, 4, x[:127], 8, out, 4, sc) },
		"short out":     func() { MatMulFloat(F16, w, 16, 4, x, 8, out[:31], 4, sc) },
		"narrow stride": func() { MatMulFloat(F16, w, 16, 4, x, 8, out, 3, sc) },
		"short scratch": func() { MatMulFloat(F16, w, 16, 4, x, 8, out, 4, sc[:len(sc)-1]) },
		"no columns":    func() { MatMulFloat(F16, w, 0, 4, x, 8, out, 4, sc) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// BenchmarkMatMulFloat is SmolLM-135M's largest products over a 64-token
// batch: 1536 F16 rows of 576 columns (gate, up) and 576 of 1536 (down).
func BenchmarkMatMulFloat(b *testing.B) {
	for _, sh := range []struct{ rows, cols int }{{1536, 576}, {576, 1536}} {
		b.Run(fmt.Sprintf("%dx%d", sh.rows, sh.cols), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			const tokens = 64
			w, _ := randFloatRows(rng, F16, sh.rows, sh.cols)
			x := randF32(rng, tokens*sh.cols)
			out := make([]float32, tokens*sh.rows)
			sc := make([]float32, MatMulFloatScratch(sh.cols))
			b.SetBytes(int64(2 * sh.rows * sh.cols * tokens)) // FLOPs, reported as MB/s
			for b.Loop() {
				MatMulFloat(F16, w, sh.cols, sh.rows, x, tokens, out, sh.rows, sc)
			}
		})
	}
}

// BenchmarkMatMulFloatLlama1B is Llama-3.2-1B's F16 products over the CPU
// backend's 128-token batch, 96 rows at a time as its workers take them:
// the attention's (2048 columns) and the down projection's (8192), in
// FLOP/s reported as MB/s.
func BenchmarkMatMulFloatLlama1B(b *testing.B) {
	for _, cols := range []int{2048, 8192} {
		b.Run(fmt.Sprint(cols), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			const rows, tokens = 96, 128
			w, _ := randFloatRows(rng, F16, rows, cols)
			x := randF32(rng, tokens*cols)
			out := make([]float32, tokens*rows)
			sc := make([]float32, MatMulFloatScratch(cols))
			b.SetBytes(int64(2 * rows * cols * tokens))
			for b.Loop() {
				MatMulFloat(F16, w, cols, rows, x, tokens, out, rows, sc)
			}
		})
	}
}

// TestMatMulBF16 multiplies random BF16 rows by random tokens rounded to
// bfloat16 pairs (ToBF16Pairs), on and off the kernel's tiles as
// TestMatMulFloat, and checks every result against a float64 product of
// the rounded values and that out is untouched elsewhere.
func TestMatMulBF16(t *testing.T) {
	if !MatMulBF16Fast() {
		t.Skip("no AVX512_BF16 on this CPU")
	}
	rng := rand.New(rand.NewPCG(74, 75))
	for _, rows := range []int{1, 13, 16, 17, 47, 48, 49, 100, 150} {
		for _, cols := range []int{32, 64, 576} {
			for _, tokens := range []int{1, 2, 3, 5, 7, 8, 9, 13, 16, 33} {
				scratch := MatMulFloatScratch(cols) + rng.IntN(2)*cols
				outStride := rows + rng.IntN(3)
				at := fmt.Sprintf("%d rows × %d columns × %d tokens (scratch %d, stride %d)", rows, cols, tokens, scratch, outStride)
				w, wv := randFloatRows(rng, BF16, rows+rng.IntN(2)*50, cols)
				x := randF32(rng, tokens*cols)
				xp := make([]uint32, tokens*cols/2+rng.IntN(3))
				ToBF16Pairs(x, xp)
				out := randF32(rng, tokens*outStride+3)
				out0 := append([]float32(nil), out...)
				MatMulBF16(w, cols, rows, xp, tokens, out, outStride, make([]float32, scratch))
				for i := 0; i < tokens; i++ {
					for r := 0; r < outStride; r++ {
						got := out[i*outStride+r]
						if r >= rows {
							if got != out0[i*outStride+r] {
								t.Fatalf("%s: out[%d][%d] outside the result changed", at, i, r)
							}
							continue
						}
						var want, mag float64
						for l := 0; l < cols; l++ {
							p := float64(wv[r*cols+l]) * float64(BF16ToF32(F32ToBF16(x[i*cols+l])))
							want += p
							mag += math.Abs(p)
						}
						checkClose(t, fmt.Sprintf("%s: out[%d][%d]", at, i, r), got, want, mag)
					}
				}
				for i := tokens * outStride; i < len(out); i++ {
					if out[i] != out0[i] {
						t.Fatalf("%s: wrote past the last token", at)
					}
				}
			}
		}
	}
}

// TestToBF16Pairs checks the packing (element 2i low, 2i+1 high, each
// rounded as F32ToBF16) on lengths on and off the vector kernel's 16, with
// ties, subnormals, infinities and NaNs among random values.
func TestToBF16Pairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(78, 79))
	special := []float32{1, -2.5, float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000),
		3.1415927, 1e-40, -1e-45, float32(math.Inf(-1)), float32(math.Inf(1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), math.Float32frombits(0x7f7fffff)}
	for _, n := range []int{2, 6, 16, 30, 32, 34, 64, 578} {
		x := randF32(rng, n)
		for i := range x {
			if rng.IntN(3) == 0 {
				x[i] = special[rng.IntN(len(special))]
			}
		}
		dst := make([]uint32, n/2)
		ToBF16Pairs(x, dst)
		for i, w := range dst {
			if lo, hi := uint16(w), uint16(w>>16); lo != F32ToBF16(x[2*i]) || hi != F32ToBF16(x[2*i+1]) {
				t.Fatalf("n %d: word %d is %#x, want %#x|%#x<<16 (of %#x, %#x)", n, i, w, F32ToBF16(x[2*i]),
					F32ToBF16(x[2*i+1]), math.Float32bits(x[2*i]), math.Float32bits(x[2*i+1]))
			}
		}
	}
}

// TestDotBF16Pairs checks the decode twin against a float64 product of
// the rounded values, at lengths with and without the 64-element steps'
// 32-element tail.
func TestDotBF16Pairs(t *testing.T) {
	if !MatMulBF16Fast() {
		t.Skip("no AVX512_BF16 on this CPU")
	}
	rng := rand.New(rand.NewPCG(76, 77))
	for _, cols := range []int{32, 64, 96, 576, 2048, 2080} {
		for range 5 {
			w, wv := randFloatRows(rng, BF16, 1, cols)
			x := randF32(rng, cols)
			xp := make([]uint32, cols/2)
			ToBF16Pairs(x, xp)
			var want, mag float64
			for l := range cols {
				p := float64(wv[l]) * float64(BF16ToF32(F32ToBF16(x[l])))
				want += p
				mag += math.Abs(p)
			}
			checkClose(t, fmt.Sprintf("%d columns", cols), DotBF16Pairs(w, xp), want, mag)
		}
	}
}

// TestMatVecBF16Pairs checks the row loop: several rows, with and without
// the 32-element tail (which must leave the next row where it starts),
// each row against DotBF16Pairs, bit for bit, and a guard past the rows.
func TestMatVecBF16Pairs(t *testing.T) {
	if !MatMulBF16Fast() {
		t.Skip("no AVX512_BF16 on this CPU")
	}
	rng := rand.New(rand.NewPCG(78, 79))
	for _, cols := range []int{32, 96, 576, 2080} {
		for _, rows := range []int{1, 3, 8} {
			w, _ := randFloatRows(rng, BF16, rows, cols)
			x := randF32(rng, cols)
			xp := make([]uint32, cols/2)
			ToBF16Pairs(x, xp)
			out := make([]float32, rows+1)
			out[rows] = 42
			MatVecBF16Pairs(w, xp, out[:rows])
			for r := range rows {
				if want := DotBF16Pairs(w[2*r*cols:2*(r+1)*cols], xp); out[r] != want {
					t.Fatalf("%d×%d: row %d: %v, DotBF16Pairs %v", rows, cols, r, out[r], want)
				}
			}
			if out[rows] != 42 {
				t.Fatalf("%d×%d: the guard past the rows was written", rows, cols)
			}
		}
	}
}
