package cpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gotok/model"
	"gotok/model/synth"
	"gotok/quant"
)

// randTensor returns rows×cols weights of type typ encoded from Gaussian
// values.
func randTensor(t *testing.T, rng *rand.Rand, typ quant.Type, rows, cols int) *model.Tensor {
	t.Helper()
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.05)
	}
	n, err := typ.RowBytes(uint64(cols))
	if err != nil {
		t.Fatal(err)
	}
	w := &model.Tensor{Name: typ.String(), Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rows*int(n))}
	if quant.QuantizedSupported(typ) {
		if err := quant.Quantize(typ, x, w.Data); err != nil {
			t.Fatal(err)
		}
		return w
	}
	// No encoder (Q2_K, Q3_K): random codes and sub-block scales, with
	// fp16 super-block scales of realistic size.
	for i := range w.Data {
		w.Data[i] = byte(rng.Uint32())
	}
	offsets := map[quant.Type][]int{quant.Q2_K: {80, 82}, quant.Q3_K: {108}}[typ]
	if offsets == nil {
		t.Fatalf("no way to make %v weights", typ)
	}
	bs := typ.BlockBytes()
	for b := 0; b < len(w.Data)/bs; b++ {
		for _, off := range offsets {
			h := quant.F32ToF16(float32(rng.NormFloat64() * 0.002))
			w.Data[b*bs+off], w.Data[b*bs+off+1] = byte(h), byte(h>>8)
		}
	}
	return w
}

// roundingBound bounds how far rounding x to 8 bits (Q8_0 or Q8_K, at most
// half a step of max|x|/127 per element) can move the dot product with row
// r of w: ‖w_r‖·‖x−x̂‖ by Cauchy–Schwarz, plus float32 slack.
func roundingBound(w *model.Tensor, r int, x []float32) float64 {
	row := make([]float32, w.Cols)
	if err := quant.Dequantize(w.Type, w.Row(r), row); err != nil {
		panic(err)
	}
	var ww, amax float64
	for i, v := range row {
		ww += float64(v) * float64(v)
		amax = max(amax, math.Abs(float64(x[i])))
	}
	return math.Sqrt(ww)*math.Sqrt(float64(len(x)))*amax/254 + 1e-4
}

// The K-quant products take Q8_K activations: each output equals the float
// dot product of the weight row with the Q8_K-rounded activations, for one
// token (decode) and for a batch (prefill), next to the Q8_0 products
// (Q4_0, IQ4_NL, Q4_1, Q5_1, Q5_0) reading the same batch, and again after
// the batch's values change.
func TestMatmulKQuantDispatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const cols = 512
	b := &Backend{pool: newPool(2)}
	defer b.pool.close()
	for _, T := range []int{1, 5} {
		x := newActivations(T, cols)
		ws := []*model.Tensor{
			randTensor(t, rng, quant.Q4_K, 37, cols),
			randTensor(t, rng, quant.Q6_K, 19, cols),
			randTensor(t, rng, quant.Q5_K, 8, cols),
			randTensor(t, rng, quant.Q3_K, 6, cols),
			randTensor(t, rng, quant.Q2_K, 5, cols),
			randTensor(t, rng, quant.IQ4_XS, 7, cols),
			randTensor(t, rng, quant.Q4_0, 11, cols),
			randTensor(t, rng, quant.IQ4_NL, 9, cols),
			// Where quant has no tiled kernel for them (no AVX512-VNNI),
			// Q5_0 is re-encoded as Q8_0 and Q4_1 and Q5_1 split into Q8_0
			// codes and mins; 70 rows are more than one chunk of those.
			randTensor(t, rng, quant.Q4_1, 70, cols),
			randTensor(t, rng, quant.Q5_1, 13, cols),
			randTensor(t, rng, quant.Q5_0, 10, cols),
		}
		for round := 0; round < 2; round++ {
			for i := range x.f32 {
				x.f32[i] = float32(rng.NormFloat64())
			}
			x.q8ok = false
			var ps []product
			for _, w := range ws {
				ps = append(ps, product{w: w, out: make([]float32, T*w.Rows), outStride: w.Rows})
			}
			b.matmul(&x, ps...)
			for ti := 0; ti < T; ti++ {
				xk := make([]byte, cols/quant.QK_K*quant.Q8KBytes)
				quant.QuantizeQ8_K(x.row(ti), xk)
				xkf := make([]float32, cols)
				if err := quant.Dequantize(quant.Q8_K, xk, xkf); err != nil {
					t.Fatal(err)
				}
				for _, p := range ps[:6] {
					for r := 0; r < p.w.Rows; r++ {
						got := p.out[ti*p.outStride+r]
						want := quant.DotF32(p.w.Type, p.w.Row(r), xkf)
						plain := quant.DotF32(p.w.Type, p.w.Row(r), x.row(ti))
						if math.Abs(float64(got-want)) > 1e-4*(1+math.Abs(float64(want))) {
							t.Fatalf("T=%d round %d %v row %d token %d: got %g, want %g", T, round, p.w.Type, r, ti, got, want)
						}
						if math.Abs(float64(got-plain)) > roundingBound(p.w, r, x.row(ti)) {
							t.Fatalf("T=%d %v row %d: got %g, float path %g", T, p.w.Type, r, got, plain)
						}
					}
				}
				// Q8_0 products: against the Q8_0-rounded activations exactly
				// and the float path within the rounding bound.
				x8 := make([]byte, cols/32*quant.Q8_0.BlockBytes())
				quant.QuantizeQ8_0(x.row(ti), x8)
				x8f := make([]float32, cols)
				if err := quant.Dequantize(quant.Q8_0, x8, x8f); err != nil {
					t.Fatal(err)
				}
				for _, p := range ps[6:] {
					for r := 0; r < p.w.Rows; r++ {
						got, plain := p.out[ti*p.outStride+r], quant.DotF32(p.w.Type, p.w.Row(r), x.row(ti))
						want := quant.DotF32(p.w.Type, p.w.Row(r), x8f)
						if math.Abs(float64(got-want)) > 1e-4*(1+math.Abs(float64(want))) {
							t.Fatalf("T=%d round %d %v row %d token %d: got %g, want %g", T, round, p.w.Type, r, ti, got, want)
						}
						if math.Abs(float64(got-plain)) > roundingBound(p.w, r, x.row(ti)) {
							t.Fatalf("T=%d %v row %d: got %g, float path %g", T, p.w.Type, r, got, plain)
						}
					}
				}
			}
		}
	}
}

// A K-quant model's logits match the float64 reference over the same
// dequantized weights within what 8-bit activations cost (the bound the
// Q4_0 case uses), and prefill matches token-by-token decoding.
func TestKQuantModelLogits(t *testing.T) {
	shape := synth.Presets["test-256"]
	shape.Layers = 2
	shape.Vocab = 320
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS} {
		t.Run(typ.String(), func(t *testing.T) {
			m := genModelEmbed(t, shape, typ, quant.Q8_0, 3)
			ref := newRef(t, m)
			b, err := New(m, Options{ContextLen: 64, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			rng := rand.New(rand.NewPCG(7, 8))
			prompt := make([]int32, 12)
			var last []float32
			worst := 0.0
			for pos := range prompt {
				prompt[pos] = int32(rng.IntN(m.Config.VocabSize))
				if last, err = b.Logits(context.Background(), prompt[pos], pos); err != nil {
					t.Fatal(err)
				}
				e := relErr(last, ref.step(prompt[pos], pos))
				worst = max(worst, e)
				if !(e < 5e-2) {
					t.Fatalf("pos %d: relative error %.3g against the float64 reference", pos, e)
				}
			}
			t.Logf("%v: worst relative error %.3g", typ, worst)
			batch, err := New(m, Options{ContextLen: 64, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer batch.Close()
			got, err := batch.Forward(context.Background(), prompt, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float64, len(last))
			for i, v := range last {
				want[i] = float64(v)
			}
			if e := relErr(got, want); !(e < 1e-4) {
				t.Fatalf("prefill vs token by token: relative error %.3g", e)
			}
		})
	}
}
