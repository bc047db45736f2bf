package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// expImpls returns the exponential implementations, each applied in place
// to a slice.
func expImpls() map[string]func(x []float32) {
	impls := map[string]func(x []float32){
		"generic": func(x []float32) {
			for i, v := range x {
				x[i] = expf(v)
			}
		},
		"public": func(x []float32) { ExpSum(x, 0) },
	}
	if useAVX2 {
		impls["avx2"] = func(x []float32) { expSumAVX2(&x[0], len(x)&^7, 0) }
	}
	return impls
}

// ulpDiff is the distance in units in the last place between two
// non-negative floats (exp's results), counting through subnormals.
func ulpDiff(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	return max(d, -d)
}

// TestExpAccuracy compares every implementation with the correctly rounded
// float32 of math.Exp on a sweep of all float32 values in (−105, 90), one
// in 127 (the results range from 0 through subnormals and normals to +Inf),
// and on random values.
func TestExpAccuracy(t *testing.T) {
	var in []float32
	for _, hi := range []float32{90, -105} {
		for bits := math.Float32bits(0 * hi); bits < math.Float32bits(hi); bits += 127 {
			in = append(in, math.Float32frombits(bits))
		}
	}
	rng := rand.New(rand.NewPCG(60, 61))
	for range 1 << 16 {
		in = append(in, float32(rng.Float64()*200-105), float32(rng.NormFloat64()))
	}
	in = append(in, 0, float32(math.Copysign(0, -1)), 88.72283, 88.72284, -87.33654, -87.33655, -103.97207, -103.97208, math.MaxFloat32, -math.MaxFloat32)
	in = in[:len(in)&^7] // the avx2 kernel takes multiples of 8
	want := make([]float32, len(in))
	for i, v := range in {
		want[i] = float32(math.Exp(float64(v)))
	}
	for name, f := range expImpls() {
		x := append([]float32(nil), in...)
		f(x)
		worst := int64(0)
		for i, v := range in {
			d := ulpDiff(x[i], want[i])
			worst = max(worst, d)
			if d > 2 || math.IsNaN(float64(x[i])) {
				t.Fatalf("%s: exp(%v) = %v, want %v (%d ulp)", name, v, x[i], want[i], d)
			}
		}
		t.Logf("%s: worst error %d ulp over %d values", name, worst, len(in))
	}
}

func TestExpSpecial(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for name, f := range expImpls() {
		x := []float32{nan, inf, -inf, 100, -110, 1e30, -1e30, 0}
		f(x)
		if !math.IsNaN(float64(x[0])) {
			t.Errorf("%s: exp(NaN) = %v", name, x[0])
		}
		for i, want := range []float32{inf, 0, inf, 0, inf, 0, 1} {
			if x[i+1] != want {
				t.Errorf("%s: special case %d = %v, want %v", name, i+1, x[i+1], want)
			}
		}
	}
}

// TestExpSum checks the softmax form: shifted arguments, lengths that are
// not multiples of 8, and the returned sum.
func TestExpSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(62, 63))
	for n := 0; n <= 70; n++ {
		x := make([]float32, n+1)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 8)
		}
		x[n] = 42 // must stay untouched
		in := append([]float32(nil), x...)
		shift := float32(rng.NormFloat64() * 8)
		sum := ExpSum(x[:n], shift)
		var want float64
		for i := 0; i < n; i++ {
			e := float32(math.Exp(float64(in[i] - shift)))
			if d := ulpDiff(x[i], e); d > 2 {
				t.Fatalf("ExpSum(%d)[%d]: exp(%v) = %v, want %v", n, i, in[i]-shift, x[i], e)
			}
			want += float64(x[i])
		}
		if math.Abs(float64(sum)-want) > 1e-6*want {
			t.Errorf("ExpSum(%d) = %v, want %v", n, sum, want)
		}
		if x[n] != 42 {
			t.Errorf("ExpSum(%d) wrote past the end", n)
		}
	}
}

func TestSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 67))
	impls := map[string]func(dst, gate, up []float32){"generic": swiGLUGeneric, "public": SwiGLU}
	if useAVX2 {
		impls["avx2"] = func(dst, gate, up []float32) {
			n := len(dst) &^ 7
			if n > 0 {
				swiGLUAVX2(&dst[0], &gate[0], &up[0], n)
			}
			swiGLUGeneric(dst[n:], gate[n:], up[n:])
		}
	}
	inf := float32(math.Inf(1))
	for name, f := range impls {
		for n := 0; n <= 70; n++ {
			gate, up := randF32(rng, n), randF32(rng, n)
			for i := range gate {
				gate[i] *= 4
			}
			if n > 4 { // the regions where e^−gate overflows or vanishes
				gate[rng.IntN(n)], gate[rng.IntN(n)], gate[rng.IntN(n)] = -95, 120, -inf
			}
			dst := make([]float32, n+1)
			dst[n] = 42
			f(dst[:n], gate, up)
			for i, g := range gate {
				want := float64(g) * float64(up[i]) / (1 + math.Exp(-float64(g)))
				if math.IsInf(float64(g), -1) {
					want = 0 // −Inf · 0: the product is NaN; checked below
				}
				got := float64(dst[i])
				if math.IsInf(float64(g), -1) {
					if !math.IsNaN(got) {
						t.Errorf("%s: SwiGLU(−Inf, %v) = %v, want NaN", name, up[i], got)
					}
					continue
				}
				if math.Abs(got-want) > 1e-6*math.Abs(want)+1e-38 {
					t.Fatalf("%s: SwiGLU(%v, %v) = %v, want %v", name, g, up[i], got, want)
				}
			}
			if dst[n] != 42 {
				t.Fatalf("%s: SwiGLU(%d) wrote past the end", name, n)
			}
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "quant: ") {
			t.Errorf("SwiGLU with different lengths: recovered %v, want a quant: panic", r)
		}
	}()
	SwiGLU(make([]float32, 3), make([]float32, 3), make([]float32, 2))
}

func BenchmarkExpSum(b *testing.B) {
	rng := rand.New(rand.NewPCG(64, 65))
	x := make([]float32, 512)
	for i := range x {
		x[i] = -float32(rng.Float64() * 20)
	}
	buf := make([]float32, len(x))
	impls := map[string]func([]float32){"public": func(x []float32) { ExpSum(x, 0) }, "math.Exp": func(x []float32) {
		for i, v := range x {
			x[i] = float32(math.Exp(float64(v)))
		}
	}}
	for name, f := range impls {
		b.Run(fmt.Sprintf("%s/n=%d", name, len(x)), func(b *testing.B) {
			for b.Loop() {
				copy(buf, x)
				f(buf)
			}
		})
	}
}
