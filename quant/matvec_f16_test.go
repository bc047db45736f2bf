package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// randF16Matrix returns rows×cols F16 values (normal, rounded to f16) as
// bytes and the float32 value of each.
func randF16Matrix(rng *rand.Rand, rows, cols int) ([]byte, []float32) {
	return randHalfMatrix(rng, F16, rows, cols)
}

// randHalfMatrix is randF16Matrix for F16 or BF16 (t).
func randHalfMatrix(rng *rand.Rand, t Type, rows, cols int) ([]byte, []float32) {
	w := make([]byte, 2*rows*cols)
	v := make([]float32, rows*cols)
	for i := range v {
		f := float32(rng.NormFloat64())
		if t == F16 {
			h := F32ToF16(f)
			binary.LittleEndian.PutUint16(w[2*i:], h)
			v[i] = F16ToF32(h)
		} else {
			h := F32ToBF16(f)
			binary.LittleEndian.PutUint16(w[2*i:], h)
			v[i] = BF16ToF32(h)
		}
	}
	return w, v
}

// checkMatVecF16 compares out with the float64 products of the rows of v
// and x.
func checkMatVecF16(t *testing.T, what string, v, x, out []float32) {
	t.Helper()
	cols := len(x)
	for r := range out {
		var want, mag float64
		for i, xi := range x {
			p := float64(v[r*cols+i]) * float64(xi)
			want += p
			mag += math.Abs(p)
		}
		if d := math.Abs(float64(out[r]) - want); d > 1e-5*mag+1e-30 {
			t.Fatalf("%s: row %d: %v, want %v (|Σ| %v)", what, r, out[r], want, mag)
		}
	}
}

func TestMatVecHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 41))
	for _, typ := range []Type{F16, BF16} {
		for _, cols := range []int{1, 31, 32, 64, 96, 256, 576, 2048, 40} {
			for _, rows := range []int{0, 1, 3, 4, 5, 8, 13} {
				w, v := randHalfMatrix(rng, typ, rows, cols)
				x := make([]float32, cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				out := make([]float32, rows+1)
				out[rows] = 42 // guard
				MatVecHalf(typ, w, x, out[:rows])
				checkMatVecF16(t, "MatVecHalf "+typ.String(), v, x, out[:rows])
				if out[rows] != 42 {
					t.Fatalf("%v cols %d rows %d: the guard past the rows was written", typ, cols, rows)
				}
			}
		}
	}

}

func TestMatVecHalfLengths(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MatVecHalf with bytes for 3 rows and an output of 4: no panic")
		}
	}()
	MatVecHalf(F16, make([]byte, 3*64), make([]float32, 32), make([]float32, 4))
}

// BenchmarkMatVecF16 multiplies 64 MB of F16 rows (past the caches, as
// decode reads them) by a vector: MatVecHalf against a DotF32 a row.
func BenchmarkMatVecF16(b *testing.B) {
	rng := rand.New(rand.NewPCG(44, 44))
	const cols = 576
	rows := (64 << 20) / (2 * cols) &^ 3
	w, _ := randF16Matrix(rng, rows, cols)
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	out := make([]float32, rows)
	b.Run("rows", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for range b.N {
			MatVecHalf(F16, w, x, out)
		}
	})
	b.Run("row-by-row", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for range b.N {
			for r := range out {
				out[r] = DotF32(F16, w[r*2*cols:(r+1)*2*cols], x)
			}
		}
	})
}
