package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

var kTypes = []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}

// scaleOffsets gives, per K type, where its fp16 super-block scales lie.
var scaleOffsets = map[Type][]int{
	Q2_K: {80, 82},
	Q3_K: {108},
	Q4_K: {0, 2},
	Q5_K: {0, 2},
	Q6_K: {208},
}

// randK returns n random super-blocks of K type t: every code, sub-block
// scale and min is random, and the fp16 scales are of realistic size.
// fill, when non-zero, sets every byte but the fp16 scales to it instead.
func randK(rng *rand.Rand, t Type, n int, fill byte) []byte {
	bs := t.BlockBytes()
	b := make([]byte, n*bs)
	for i := range b {
		if fill != 0 {
			b[i] = fill
		} else {
			b[i] = byte(rng.Uint32())
		}
	}
	for i := 0; i < n; i++ {
		for _, off := range scaleOffsets[t] {
			putF16(b[i*bs+off:], float32(rng.NormFloat64()*0.01))
		}
	}
	return b
}

func randQ8K(t testing.TB, rng *rand.Rand, nblocks int, scale float64) ([]byte, []float32) {
	x := make([]float32, QK_K*nblocks)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	q := make([]byte, nblocks*Q8KBytes)
	QuantizeQ8_K(x, q)
	return q, x
}

func TestQuantizeQ8_K(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, nb := range []int{1, 3} {
		for _, scale := range []float64{0, 1e-30, 1, 1e6} {
			q, x := randQ8K(t, rng, nb, scale)
			got := dequantAll(t, Q8_K, q, len(x))
			for i := 0; i < nb; i++ {
				b := q[i*Q8KBytes:]
				d := math.Float32frombits(binary.LittleEndian.Uint32(b))
				var amax float32
				for _, v := range x[i*QK_K : (i+1)*QK_K] {
					amax = max(amax, abs32(v))
				}
				if want := amax / 127; d != want {
					t.Fatalf("nb %d scale %g block %d: d = %g, want %g", nb, scale, i, d, want)
				}
				for j := 0; j < QK_K; j++ {
					e := i*QK_K + j
					if c := int8(b[4+j]); c < -127 {
						t.Fatalf("code %d below -127", c)
					}
					if diff := math.Abs(float64(got[e] - x[e])); diff > float64(d)/2*1.0001 {
						t.Fatalf("nb %d scale %g element %d: %g rounds to %g, step %g", nb, scale, e, x[e], got[e], d)
					}
				}
				for g := 0; g < 16; g++ {
					var want int16
					for j := 16 * g; j < 16*g+16; j++ {
						want += int16(int8(b[4+j]))
					}
					if s := int16(binary.LittleEndian.Uint16(b[260+2*g:])); s != want {
						t.Fatalf("bsums[%d] = %d, want %d", g, s, want)
					}
				}
			}
		}
	}
}

// The K dot products equal the float64 dot product of the dequantized
// operands up to float32 rounding of the per-super-block sums.
func TestKDotMatchesDequantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	type impl struct {
		name string
		typ  Type
		dot  func(w, x []byte, nblocks int) float32
	}
	var impls []impl
	for _, typ := range kTypes {
		// On amd64 with AVX2 the exported kernels are the assembly.
		impls = append(impls, impl{"exported", typ, KDot(typ)})
	}
	impls = append(impls, impl{"generic", Q2_K, dotQ2_KQ8_KGeneric}, impl{"generic", Q3_K, dotQ3_KQ8_KGeneric}, impl{"generic", Q4_K, dotQ4_KQ8_KGeneric}, impl{"generic", Q5_K, dotQ5_KQ8_KGeneric}, impl{"generic", Q6_K, dotQ6_KQ8_KGeneric})
	for _, im := range impls {
		typ, dot := im.typ, im.dot
		for _, nb := range []int{1, 2, 3, 9, 17, 40} {
			for trial := 0; trial < 20; trial++ {
				var fill byte
				switch trial {
				case 0:
					fill = 0xff // every code, scale and min at its top
				case 1:
					fill = 0x80
				}
				w := randK(rng, typ, nb, fill)
				xq, _ := randQ8K(t, rng, nb, 1)
				if trial == 2 { // activations at the code range's ends
					for i := 0; i < nb; i++ {
						for j := 0; j < QK_K; j++ {
							xq[i*Q8KBytes+4+j] = byte(int8(127 - 254*(j%2)))
						}
						for g := 0; g < 16; g++ {
							binary.LittleEndian.PutUint16(xq[i*Q8KBytes+260+2*g:], 0)
						}
					}
				}
				wf := dequantAll(t, typ, w, nb*QK_K)
				xf := dequantAll(t, Q8_K, xq, nb*QK_K)
				var want, mag float64
				for i := range wf {
					want += float64(wf[i]) * float64(xf[i])
					mag += math.Abs(float64(wf[i]) * float64(xf[i]))
				}
				got := dot(w, xq, nb)
				if diff := math.Abs(float64(got) - want); !(diff <= 1e-5*mag+1e-30) {
					t.Fatalf("%s %v nb %d trial %d: got %g, want %g (|terms| %g)", im.name, typ, nb, trial, got, want, mag)
				}
			}
		}
	}
}

func TestKDotBadLengths(t *testing.T) {
	for _, typ := range kTypes {
		mustPanic(t, typ.String()+" short weights", func() {
			KDot(typ)(make([]byte, typ.BlockBytes()-1), make([]byte, Q8KBytes), 1)
		})
		mustPanic(t, typ.String()+" short activations", func() {
			KDot(typ)(make([]byte, typ.BlockBytes()), make([]byte, Q8KBytes-1), 1)
		})
	}
	mustPanic(t, "QuantizeQ8_K length", func() { QuantizeQ8_K(make([]float32, 255), make([]byte, Q8KBytes)) })
	mustPanic(t, "QuantizeQ8_K dst", func() { QuantizeQ8_K(make([]float32, 256), make([]byte, Q8KBytes-1)) })
}

func BenchmarkDotQ2_KQ8_K(b *testing.B) { benchKDot(b, Q2_K) }
func BenchmarkDotQ3_KQ8_K(b *testing.B) { benchKDot(b, Q3_K) }
func BenchmarkDotQ4_KQ8_K(b *testing.B) { benchKDot(b, Q4_K) }
func BenchmarkDotQ5_KQ8_K(b *testing.B) { benchKDot(b, Q5_K) }
func BenchmarkDotQ6_KQ8_K(b *testing.B) { benchKDot(b, Q6_K) }

func benchKDot(b *testing.B, typ Type) {
	rng := rand.New(rand.NewPCG(1, 1))
	const nb = 8 // a 2048-wide row
	w := randK(rng, typ, nb, 0)
	xq, xf := randQ8K(b, rng, nb, 1)
	dot := KDot(typ)
	b.Run("q8k", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dot(w, xq, nb)
		}
	})
	b.Run("f32", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			DotF32(typ, w, xf)
		}
	})
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "quant: ") {
			t.Errorf("%s: recovered %v, want a quant: panic", name, r)
		}
	}()
	f()
}

// MatMulKQ8_K equals KDot row by row, for one token and for a batch, with
// the output cells it must not touch left alone.
func TestMatMulKQ8_K(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, typ := range kTypes {
		for _, c := range []struct{ nb, rows, tokens int }{{1, 7, 1}, {9, 33, 1}, {3, 5, 4}, {20, 3, 2}, {2, 1, 9}} {
			w := randK(rng, typ, c.nb*c.rows, 0)
			x, _ := randQ8K(t, rng, c.nb*c.tokens, 1)
			stride := c.rows + 3
			out := make([]float32, c.tokens*stride)
			for i := range out {
				out[i] = -7
			}
			MatMulKQ8_K(typ, w, c.nb, c.rows, x, c.tokens, out, stride)
			rb, xb := c.nb*typ.BlockBytes(), c.nb*Q8KBytes
			for tk := 0; tk < c.tokens; tk++ {
				for r := 0; r < stride; r++ {
					got := out[tk*stride+r]
					if r >= c.rows {
						if got != -7 {
							t.Fatalf("%v %+v: wrote cell %d of token %d", typ, c, r, tk)
						}
						continue
					}
					want := KDot(typ)(w[r*rb:], x[tk*xb:], c.nb)
					// Both are within float32 rounding of the exact
					// sum, TestKDotMatchesDequantized's bound, which
					// cancellation can make large beside want.
					_, mag := refDot(dequantAll(t, typ, w[r*rb:(r+1)*rb], QK_K*c.nb), dequantAll(t, Q8_K, x[tk*xb:(tk+1)*xb], QK_K*c.nb))
					if math.Abs(float64(got-want)) > 2e-5*mag+1e-30 {
						t.Fatalf("%v %+v: row %d token %d: got %g, want %g (|terms| %g)", typ, c, r, tk, got, want, mag)
					}
				}
			}
		}
	}
	mustPanic(t, "MatMulKQ8_K type", func() { MatMulKQ8_K(Q4_0, nil, 1, 1, nil, 1, nil, 1) })
	mustPanic(t, "MatMulKQ8_K short x", func() {
		MatMulKQ8_K(Q4_K, make([]byte, 144), 1, 1, make([]byte, Q8KBytes-1), 1, make([]float32, 1), 1)
	})
	mustPanic(t, "MatMulKQ8_K short out", func() {
		MatMulKQ8_K(Q4_K, make([]byte, 144), 1, 1, make([]byte, 2*Q8KBytes), 2, make([]float32, 1), 1)
	})
}

// On AVX2 QuantizeQ8_K is assembly: it must match the Go code byte for
// byte, non-finite inputs included (those blocks fall back to Go).
func TestQuantizeQ8_KMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const nb = 12
	x := make([]float32, nb*QK_K)
	for trial := 0; trial < 30; trial++ {
		scale := math.Pow(10, float64(rng.IntN(12)-6))
		for i := range x {
			x[i] = float32(rng.NormFloat64() * scale)
		}
		switch trial {
		case 0:
			clear(x[:QK_K])
		case 1:
			x[5] = float32(math.NaN())
			x[QK_K+9] = float32(math.Inf(-1))
			x[2*QK_K] = float32(math.Inf(1))
		case 2: // exact ties after scaling: multiples of d/2
			for i := range x {
				x[i] = float32(rng.IntN(255)-127) / 2
			}
		}
		got := make([]byte, nb*Q8KBytes)
		QuantizeQ8_K(x, got)
		want := make([]byte, nb*Q8KBytes)
		for i := 0; i < nb; i++ {
			quantQ8_KBlock((*[QK_K]float32)(x[i*QK_K:]), (*[q8_KBytes]byte)(want[i*q8_KBytes:]))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("trial %d: byte %d (block %d, offset %d): got %#x, want %#x", trial, i, i/Q8KBytes, i%Q8KBytes, got[i], want[i])
			}
		}
	}
}

func BenchmarkQuantizeQ8_K(b *testing.B) {
	x := make([]float32, 2048)
	for i := range x {
		x[i] = float32(i%37) - 18
	}
	dst := make([]byte, len(x)/QK_K*Q8KBytes)
	for i := 0; i < b.N; i++ {
		QuantizeQ8_K(x, dst)
	}
}

// BenchmarkMatMulQ4_KQ8_K is a prefill product of 64 rows of 2048 by 64
// tokens: MatMulKQ8_K, against the row kernel called for every (row,
// token) pair (amd64).
func BenchmarkMatMulQ4_KQ8_K(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const nb, rows, tokens = 8, 64, 64
	w := randK(rng, Q4_K, nb*rows, 0)
	x, _ := randQ8K(b, rng, nb*tokens, 1)
	out := make([]float32, rows*tokens)
	b.Run("matmul", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			MatMulKQ8_K(Q4_K, w, nb, rows, x, tokens, out, rows)
		}
	})
	b.Run("row-kernel", func(b *testing.B) {
		dot := KDot(Q4_K)
		rb, xb := nb*Q4_K.BlockBytes(), nb*Q8KBytes
		for i := 0; i < b.N; i++ {
			for r := 0; r < rows; r++ {
				for t := 0; t < tokens; t++ {
					out[t*rows+r] = dot(w[r*rb:(r+1)*rb], x[t*xb:(t+1)*xb], nb)
				}
			}
		}
	})
}
