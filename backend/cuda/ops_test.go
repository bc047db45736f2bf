package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gotok/backend/cuda/cu"
	"gotok/quant"
)

// gpu is a test's device: context, kernels and a launcher on one stream.
type gpu struct {
	t *testing.T
	c *cu.Context
	l *launcher
}

func newGPU(t *testing.T) *gpu {
	t.Helper()
	if err := cu.Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	c, err := cu.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	k, err := loadKernels(c)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	g := &gpu{t: t, c: c, l: &launcher{c: c, k: k, stream: s, sms: c.Info.SMCount, pdl: c.Info.Major >= 9}}
	t.Cleanup(func() {
		c.DestroyStream(s)
		k.unload()
		c.Close()
	})
	return g
}

// nanBits poisons outputs: a kernel that skips an element leaves a NaN.
const nanBits = 0x7fc00000

// floats uploads f (nil: n poisoned floats) and frees it with the test.
func (g *gpu) floats(f []float32, n int) cu.DevicePtr {
	g.t.Helper()
	if f != nil {
		n = len(f)
	}
	p, err := g.c.Alloc(4 * max(n, 1))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { g.c.Free(p) })
	if f != nil {
		err = g.c.CopyHtoD(p, f32Bytes(f))
	} else {
		err = g.c.MemsetD32(p, nanBits, n)
	}
	if err != nil {
		g.t.Fatal(err)
	}
	return p
}

func (g *gpu) int32s(v ...int32) cu.DevicePtr {
	g.t.Helper()
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = math.Float32frombits(uint32(x))
	}
	return g.floats(f, 0)
}

func (g *gpu) read(p cu.DevicePtr, n int) []float32 {
	g.t.Helper()
	b := make([]byte, 4*n)
	if err := g.c.SyncStream(g.l.stream); err != nil {
		g.t.Fatal(err)
	}
	if err := g.c.CopyDtoH(b, p); err != nil {
		g.t.Fatal(err)
	}
	return bytesF32(b)
}

func (g *gpu) matrix(m hostMatrix) *deviceMatrix {
	g.t.Helper()
	d, err := upload(g.c, m)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { g.c.Free(d.Q); g.c.Free(d.D) })
	return &d
}

func randFloats(r *rand.Rand, n int, std float64) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(r.NormFloat64() * std)
	}
	return f
}

// randWeights returns random rows×cols weights of typ in GGML layout, their
// float64 values, and the kernels' layout of them.
func randWeights(t *testing.T, r *rand.Rand, typ quant.Type, rows, cols int) ([]byte, [][]float64, hostMatrix) {
	t.Helper()
	rb, err := typ.RowBytes(uint64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	for i := 0; i < rows; i++ {
		if err := quant.Quantize(typ, randFloats(r, cols, 0.1), data[i*int(rb):(i+1)*int(rb)]); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := refDequant(typ, data, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	m, err := layoutRows(typ, data, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return data, ref, m
}

// f32Tol is the relative error allowed where the GPU sums float32 products
// in another order than the float64 reference.
const f32Tol = 5e-6

func check(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if e := relErr(got, want); !(e <= tol) {
		t.Errorf("%s: relative error %.3g > %.1g", what, e, tol)
	} else {
		t.Logf("%s: relative error %.3g (bound %.1g)", what, e, tol)
	}
}

var testTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q8_0}

func TestMatvecKernels(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range testTypes {
		for _, sh := range []struct{ rows, cols int }{{64, 64}, {131, 576}, {1536, 576}, {576, 1536}, {40, 172}, {3, 4096}} {
			if sh.cols%32 != 0 && typ.BlockSize() == 32 {
				continue
			}
			name := fmt.Sprintf("%s/%dx%d", typ, sh.rows, sh.cols)
			_, w, hm := randWeights(t, r, typ, sh.rows, sh.cols)
			dm := g.matrix(hm)
			x := randFloats(r, sh.cols, 1)
			nw := randFloats(r, sh.cols, 1)
			eps := float32(1e-5)

			y := g.floats(nil, sh.rows)
			if err := g.l.matvec(g.floats(x, 0), g.floats(nw, 0), eps, dm, y); err != nil {
				t.Fatal(err)
			}
			check(t, name+" norm", g.read(y, sh.rows), refMatvec(w, refRMSNorm(x, nw, eps)), f32Tol)

			if err := g.l.matvec(g.floats(x, 0), 0, 0, dm, y); err != nil {
				t.Fatal(err)
			}
			check(t, name+" plain", g.read(y, sh.rows), refMatvec(w, refRMSNorm(x, nil, 0)), f32Tol)

			y0 := randFloats(r, sh.rows, 1)
			ya := g.floats(y0, 0)
			if err := g.l.matvecAdd(g.floats(x, 0), dm, ya); err != nil {
				t.Fatal(err)
			}
			want := refMatvec(w, refRMSNorm(x, nil, 0))
			for i := range want {
				want[i] += float64(y0[i])
			}
			check(t, name+" add", g.read(ya, sh.rows), want, f32Tol)
		}
	}
}

func TestGateUpKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(2, 2))
	for _, typ := range testTypes {
		for _, sh := range []struct{ rows, cols int }{{172, 64}, {1536, 576}} {
			_, wg, hg := randWeights(t, r, typ, sh.rows, sh.cols)
			_, wu, hu := randWeights(t, r, typ, sh.rows, sh.cols)
			x, nw := randFloats(r, sh.cols, 1), randFloats(r, sh.cols, 1)
			h := g.floats(nil, sh.rows)
			if err := g.l.gateUp(g.floats(x, 0), g.floats(nw, 0), 1e-5, g.matrix(hg), g.matrix(hu), h); err != nil {
				t.Fatal(err)
			}
			n := refRMSNorm(x, nw, 1e-5)
			check(t, fmt.Sprintf("%s/%dx%d", typ, sh.rows, sh.cols), g.read(h, sh.rows), refSiLUMul(refMatvec(wg, n), refMatvec(wu, n)), f32Tol)
		}
	}
}

func TestEmbedKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(3, 3))
	for _, typ := range testTypes {
		cols := 576
		_, w, hm := randWeights(t, r, typ, 50, cols)
		tok, pos := int32(r.IntN(50)), int32(r.IntN(1000))
		x, dpos := g.floats(nil, cols), g.floats(nil, 1)
		if err := g.l.embed(g.int32s(tok, pos), dpos, g.matrix(hm), x); err != nil {
			t.Fatal(err)
		}
		check(t, typ.String(), g.read(x, cols), w[tok], 0)
		if got := int32(math.Float32bits(g.read(dpos, 1)[0])); got != pos {
			t.Errorf("%s: embed published position %d, want %d", typ, got, pos)
		}
	}
}

func TestArgmaxKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{1, 5, 1000, 49152, 151936} {
		for trial := 0; trial < 3; trial++ {
			x := randFloats(r, n, 3)
			if n > 10 && trial > 0 {
				// Plant a tie for the maximum; the lower index must win.
				i, j := r.IntN(n), r.IntN(n)
				x[i] = 100
				x[j] = 100
				x[r.IntN(n)] = float32(math.NaN())
			}
			out := g.floats(nil, 1)
			if err := g.l.argmax(g.floats(x, 0), n, out); err != nil {
				t.Fatal(err)
			}
			got := int(math.Float32bits(g.read(out, 1)[0]))
			if want := refArgmax(x); got != want {
				t.Errorf("n=%d trial %d: argmax %d (%v), want %d (%v)", n, trial, got, x[min(got, n-1)], want, x[want])
			}
		}
	}
}

// TestLogitsKernel checks the output head with its fused argmax, twice on
// one ticket counter (the last block must leave it at zero), with planted
// ties, writing the token id to host-mapped memory as the engine does.
func TestLogitsKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(6, 6))
	host, err := g.c.AllocHost(16)
	if err != nil {
		t.Fatal(err)
	}
	defer g.c.FreeHost(host)
	for _, typ := range testTypes {
		for _, sh := range []struct{ rows, cols int }{{512, 64}, {49152, 576}, {7, 96}} {
			_, w, hm := randWeights(t, r, typ, sh.rows, sh.cols)
			if sh.rows > 100 {
				// Two identical rows: equal logits, the lower index must win.
				i, j := r.IntN(sh.rows/2), sh.rows/2+r.IntN(sh.rows/2)
				copy(hm.Q[j*len(hm.Q)/sh.rows:(j+1)*len(hm.Q)/sh.rows], hm.Q[i*len(hm.Q)/sh.rows:(i+1)*len(hm.Q)/sh.rows])
				if hm.D != nil {
					copy(hm.D[j*len(hm.D)/sh.rows:(j+1)*len(hm.D)/sh.rows], hm.D[i*len(hm.D)/sh.rows:(i+1)*len(hm.D)/sh.rows])
				}
				w[j] = w[i]
			}
			dm := g.matrix(hm)
			blocks := g.l.logitsBlocks(sh.rows)
			ticket := g.floats([]float32{0}, 0)
			for run := 0; run < 2; run++ {
				x, nw := randFloats(r, sh.cols, 1), randFloats(r, sh.cols, 1)
				y := g.floats(nil, sh.rows)
				host.Uint32s()[0] = 0xffffffff
				err := g.l.logits(logitsArgs{x: g.floats(x, 0), normW: g.floats(nw, 0), eps: 1e-5, w: dm, logits: y,
					partV: g.floats(nil, blocks), partI: g.floats(nil, blocks), ticket: ticket, result: host.Device})
				if err != nil {
					t.Fatal(err)
				}
				want := refMatvec(w, refRMSNorm(x, nw, 1e-5))
				got := g.read(y, sh.rows)
				name := fmt.Sprintf("%s/%dx%d run %d", typ, sh.rows, sh.cols, run)
				check(t, name, got, want, f32Tol)
				if tok, best := int(host.Uint32s()[0]), refArgmax(got); tok != best {
					t.Errorf("%s: token %d, want argmax %d of the logits", name, tok, best)
				}
			}
		}
	}
}

// TestAttentionStep runs the whole attention block of one layer: qkv_rope
// (norm, projections, RoPE, cache append), attention over the cache split in
// chunks with the merge, and the output projection with the residual, each
// checked against the twins.
func TestAttentionStep(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(5, 5))
	cases := []struct {
		typ                             quant.Type
		dim, nHead, nKV, headDim, ropeD int
		neox, bias                      bool
		ctx, chunk                      int
	}{
		{quant.F32, 64, 8, 4, 8, 8, false, false, 512, 128},
		{quant.Q4_0, 576, 9, 3, 64, 64, false, false, 300, 128},
		{quant.Q8_0, 576, 9, 3, 64, 64, true, true, 700, 64},
		{quant.F16, 256, 4, 4, 64, 32, true, false, 100, 16},
		{quant.Q4_0, 512, 4, 1, 128, 128, false, true, 1100, 128},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%s/d%d/h%d/kv%d/hd%d/rope%d/neox=%v/bias=%v", tc.typ, tc.dim, tc.nHead, tc.nKV, tc.headDim, tc.ropeD, tc.neox, tc.bias)
		qd, kvd := tc.nHead*tc.headDim, tc.nKV*tc.headDim
		_, wq, hq := randWeights(t, r, tc.typ, qd, tc.dim)
		_, wk, hk := randWeights(t, r, tc.typ, kvd, tc.dim)
		_, wv, hv := randWeights(t, r, tc.typ, kvd, tc.dim)
		_, wo, ho := randWeights(t, r, tc.typ, tc.dim, qd)
		qkv, err := stackRows(hq, hk, hv)
		if err != nil {
			t.Fatal(err)
		}
		x, nw := randFloats(r, tc.dim, 1), randFloats(r, tc.dim, 1)
		var bias []float32
		var dbias cu.DevicePtr
		if tc.bias {
			bias = randFloats(r, qd+2*kvd, 0.5)
			dbias = g.floats(bias, 0)
		}
		cs := refRopeTable(tc.ctx, tc.ropeD, 10000, 1)
		// A cache filled with random history, except the row being written.
		pos := tc.ctx/2 + r.IntN(tc.ctx/2)
		kc, vc := randFloats(r, kvd*tc.ctx, 1), randFloats(r, kvd*tc.ctx, 1)
		for h := 0; h < tc.nKV; h++ {
			for i := 0; i < tc.headDim; i++ {
				kc[(h*tc.ctx+pos)*tc.headDim+i] = float32(math.NaN())
				vc[(h*tc.ctx+pos)*tc.headDim+i] = float32(math.NaN())
			}
		}
		dkc, dvc := g.floats(kc, 0), g.floats(vc, 0)
		dq := g.floats(nil, qd)
		dpos := g.int32s(int32(pos))
		eps := float32(1e-5)
		err = g.l.qkvRope(qkvArgs{x: g.floats(x, 0), normW: g.floats(nw, 0), eps: eps, w: g.matrix(qkv), bias: dbias,
			nHead: tc.nHead, nKV: tc.nKV, headDim: tc.headDim, ropeCS: g.floats(cs, 0), ropeDim: tc.ropeD, neox: tc.neox,
			pos: dpos, q: dq, kCache: dkc, vCache: dvc, ctxMax: tc.ctx})
		if err != nil {
			t.Fatal(err)
		}
		n := refRMSNorm(x, nw, eps)
		q, k, v := refMatvec(wq, n), refMatvec(wk, n), refMatvec(wv, n)
		if tc.bias {
			for i := range q {
				q[i] += float64(bias[i])
			}
			for i := range k {
				k[i] += float64(bias[qd+i])
				v[i] += float64(bias[qd+kvd+i])
			}
		}
		refRope(q, tc.nHead, tc.headDim, tc.ropeD, tc.neox, cs, pos)
		refRope(k, tc.nKV, tc.headDim, tc.ropeD, tc.neox, cs, pos)
		gotQ := g.read(dq, qd)
		check(t, name+" q", gotQ, q, f32Tol)
		gotK, gotV := g.read(dkc, kvd*tc.ctx), g.read(dvc, kvd*tc.ctx)
		var rowK, rowV []float32
		for h := 0; h < tc.nKV; h++ {
			off := (h*tc.ctx + pos) * tc.headDim
			rowK = append(rowK, gotK[off:off+tc.headDim]...)
			rowV = append(rowV, gotV[off:off+tc.headDim]...)
			copy(kc[off:], gotK[off:off+tc.headDim])
			copy(vc[off:], gotV[off:off+tc.headDim])
		}
		check(t, name+" k row", rowK, k, f32Tol)
		check(t, name+" v row", rowV, v, f32Tol)
		for i := range gotK {
			if math.Float32bits(gotK[i]) != math.Float32bits(kc[i]) || math.Float32bits(gotV[i]) != math.Float32bits(vc[i]) {
				t.Fatalf("%s: cache element %d outside the written row changed", name, i)
			}
		}

		splits := (tc.ctx + tc.chunk - 1) / tc.chunk
		scale := float32(1 / math.Sqrt(float64(tc.headDim)))
		a := attnArgs{q: dq, kCache: dkc, vCache: dvc, ctxMax: tc.ctx, headDim: tc.headDim, nHead: tc.nHead, nKV: tc.nKV,
			pos: dpos, scale: scale, chunk: tc.chunk, splits: splits,
			partAcc: g.floats(nil, tc.nHead*splits*tc.headDim), partML: g.floats(nil, tc.nHead*splits*2),
			tickets: g.floats(make([]float32, tc.nHead), 0), out: g.floats(nil, qd)}
		att := refAttention(gotQ, kc, vc, tc.nHead, tc.nKV, tc.headDim, tc.ctx, pos+1, scale)
		// Twice: the merge must leave the tickets at zero for the next step.
		for run := 0; run < 2; run++ {
			g.c.MemsetD32(a.out, nanBits, qd)
			if err := g.l.attention(a); err != nil {
				t.Fatal(err)
			}
			check(t, fmt.Sprintf("%s attention run %d", name, run), g.read(a.out, qd), att, 1e-5)
		}
		x0 := randFloats(r, tc.dim, 1)
		dx := g.floats(x0, 0)
		if err := g.l.matvecAdd(a.out, g.matrix(ho), dx); err != nil {
			t.Fatal(err)
		}
		want := refMatvec(wo, att)
		for i := range want {
			want[i] += float64(x0[i])
		}
		check(t, name+" attention+out", g.read(dx, tc.dim), want, 1e-5)
	}
}
