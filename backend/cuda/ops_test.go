package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/quant"
	"gotok/sample"
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
	g := &gpu{t: t, c: c, l: &launcher{c: c, k: k, stream: s, sms: c.Info.SMCount, pdl: c.Info.Major >= 9, largeGemm: c.Info.Major >= 9, wgGemm: k.pre.wgGemm}}
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

// kv uploads v as the KV cache holds it, f16 (kernels/kv.cuh), first
// rounding v in place to the values uploaded.
func (g *gpu) kv(v []float32) cu.DevicePtr {
	g.t.Helper()
	b := make([]byte, 2*len(v))
	for i, x := range v {
		h := quant.F32ToF16(x)
		v[i] = quant.F16ToF32(h)
		b[2*i], b[2*i+1] = byte(h), byte(h>>8)
	}
	return g.bytes(b)
}

// readKV reads n elements of a KV cache, widened to float32.
func (g *gpu) readKV(p cu.DevicePtr, n int) []float32 { return g.readHalves(p, n) }

// checkKV checks values written to the KV cache against their float64
// twin: each must be the twin rounded to f16 or a neighbouring half (the
// kernel's float32 value and the twin may sit on either side of a rounding
// boundary, now and then).
func checkKV(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	bad, steps := 0, 0
	for i, w := range want {
		gh, wh := quant.F32ToF16(got[i]), quant.F32ToF16(float32(w))
		if d := halfOrder(gh) - halfOrder(wh); d == 0 {
			continue
		} else if d == 1 || d == -1 {
			steps++
			continue
		}
		if bad++; bad <= 3 {
			t.Errorf("%s: element %d is %g, want %g (its twin %g rounded to f16)", what, i, got[i], f16Round(w), w)
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d elements off", what, bad, len(want))
	}
	if steps > 0 {
		t.Logf("%s: %d of %d elements a half's step from the twin", what, steps, len(want))
	}
}

// halfOrder maps an f16's bits to an integer in the order of the values
// (±0 to 0).
func halfOrder(h uint16) int {
	if h&0x8000 != 0 {
		return -int(h & 0x7fff)
	}
	return int(h)
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
	g.t.Cleanup(func() { g.c.Free(d.Q); g.c.Free(d.header()) })
	return &d
}

// qkv uploads Q, K and V as the engine does: stacked when they share a
// family of their own, else three mixed-type matrices.
func (g *gpu) qkv(q, k, v hostMatrix) (wq, wk, wv *deviceMatrix) {
	g.t.Helper()
	hs, err := fuseLayouts([]hostMatrix{q, k, v})
	if err != nil {
		g.t.Fatal(err)
	}
	if hs[0].Type == wtMix {
		return g.matrix(hs[0]), g.matrix(hs[1]), g.matrix(hs[2])
	}
	s, err := stackRows(hs...)
	if err != nil {
		g.t.Fatal(err)
	}
	d := g.matrix(s)
	a, b, c := d.rowsFrom(0, q.Rows), d.rowsFrom(q.Rows, k.Rows), d.rowsFrom(q.Rows+k.Rows, v.Rows)
	return &a, &b, &c
}

// residual uploads f as a fixed-point residual stream and frees it with the
// test; it returns the device buffer and the values the kernels will read.
func (g *gpu) residual(f []float32) (cu.DevicePtr, []float32) {
	g.t.Helper()
	q := residualFixed(f)
	p := g.int64s(q)
	return p, residualF32(residualBytes(q))
}

func (g *gpu) int64s(q []int64) cu.DevicePtr {
	g.t.Helper()
	p, err := g.c.Alloc(8 * max(len(q), 1))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { g.c.Free(p) })
	if err := g.c.CopyHtoD(p, residualBytes(q)); err != nil {
		g.t.Fatal(err)
	}
	return p
}

func (g *gpu) readInt32s(p cu.DevicePtr, n int) []int32 {
	g.t.Helper()
	q := make([]int32, n)
	for i, f := range g.read(p, n) {
		q[i] = int32(math.Float32bits(f))
	}
	return q
}

func (g *gpu) readInt64s(p cu.DevicePtr, n int) []int64 {
	g.t.Helper()
	f := g.read(p, 2*n)
	q := make([]int64, n)
	for i := range q {
		q[i] = int64(uint64(math.Float32bits(f[2*i])) | uint64(math.Float32bits(f[2*i+1]))<<32)
	}
	return q
}

// residualDelta is after−before as the kernels would read it: the amount
// a kernel added to a fixed-point residual stream.
func residualDelta(after, before []int64) []float32 {
	d := make([]int64, len(after))
	for i := range d {
		d[i] = after[i] - before[i]
	}
	return residualF32(residualBytes(d))
}

// randResidual is n random fixed-point values: a target buffer's state
// before a kernel adds to it. Every element must end up with its own
// addend on top: one a kernel skipped keeps its old value, off by the
// addend.
func randResidual(r *rand.Rand, n int) []int64 { return residualFixed(randFloats(r, n, 3)) }

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
		row := data[i*int(rb) : (i+1)*int(rb)]
		if err := quant.Quantize(typ, randFloats(r, cols, 0.1), row); err != nil {
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

// testTypes are the weight types the kernel tests run: every family's own,
// and every type the mixed-type kernels read.
var testTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q8_0,
	quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.IQ4_NL, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS}

// fits reports whether rows of each length in ks are whole blocks of typ.
func fits(typ quant.Type, ks ...int) bool {
	for _, k := range ks {
		if typ.BlockSize() > 1 && k%typ.BlockSize() != 0 {
			return false
		}
	}
	return true
}

// TestFFNKernel checks the feed-forward block against its twin (norm,
// gate and up, SiLU·up, down, residual) for every layout and compiled
// shape, fused in one kernel and split in two (gate/up, then matvec_add),
// on shapes that end in part of a block, twice on the same inputs (the
// fixed-point sum must give the same bits), and that a product too large
// for the residual stream poisons the step.
func TestFFNKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(2, 2))
	// The block's variations (model.Block), one a kernel shape, turning
	// with the shapes so that each type meets them all.
	variants := []struct {
		act             model.Activation
		noNorm, noCarry bool
		rs              float32
	}{
		{model.SiLU, false, false, 1}, {model.GELUTanh, false, true, 1}, {model.SiLU, true, false, 0.5},
		{model.GELUTanh, true, true, 0.25},
	}
	for _, typ := range testTypes {
		// {44, 4160}, the float layouts only: rows past a lane's 4,096
		// elements in registers (glu's loop), hidden units not whole steps
		// of 8 (matvec_add_h's partial step).
		for shi, sh := range []struct{ hidden, k int }{{1536, 576}, {160, 64}, {96, 2080}, {176, 100}, {40, 36}, {768, 512}, {44, 4160}} {
			if !fits(typ, sh.hidden, sh.k) {
				continue
			}
			_, wg, hg := randWeights(t, r, typ, sh.hidden, sh.k)
			_, wu, hu := randWeights(t, r, typ, sh.hidden, sh.k)
			_, wd, hd := randWeights(t, r, typ, sh.k, sh.hidden)
			gate, up, down := g.matrix(hg), g.matrix(hu), g.matrix(hd)
			shapes := ffnShapes[:]
			if !hg.Type.quantized() {
				shapes = shapes[:1]
			}
			// Every other shape splits the FFN: gate/up into h, then
			// matvec_add. The typed mixed families (Q4_K, Q6_K) have one
			// shape: it runs fused and split.
			type ffnRun struct {
				fs    ffnShape
				split bool
			}
			var runs []ffnRun
			for si, fs := range shapes {
				runs = append(runs, ffnRun{fs, si%2 == 1 || len(shapes) == 1})
			}
			if _, ok := typedQuants[typ]; ok {
				runs = append(runs, ffnRun{ffnShapes[0], true})
			}
			for si, rn := range runs {
				fs := rn.fs
				g.l.ffnShape, g.l.ffnMixShape = fs, fs
				var h, h8 cu.DevicePtr
				if rn.split {
					// h8 zeroed, as the engine allocates it (ffnArgs.h8).
					h, h8 = g.floats(nil, sh.hidden), g.floats(make([]float32, h8Words(sh.hidden)), 0)
				}
				v := variants[(si+shi)%len(variants)]
				x, nw := randFloats(r, sh.k, 1), randFloats(r, sh.k, 1)
				res, xr := g.residual(x)
				dnw := g.floats(nw, 0)
				if v.noNorm {
					nw, dnw = nil, 0
				}
				_, f, err := g.l.ffnPick(ffnArgs{gate: gate, up: up, down: down, h: h})
				if err != nil {
					t.Fatal(err)
				}
				// Kernels that multiply int8 activations only from act_q8
				// (Q4_0's) take them in every other split run, and their
				// float ones otherwise; F16 and BF16 run split on act_f32's
				// row (glu) every other time, on the staged kernel else.
				var x8 cu.DevicePtr
				if rn.split && (g.l.k.int8X8[f] || g.l.k.glu[gate.Type] != nil) && (si+shi)%2 == 0 {
					x8 = g.floats(nil, actF32Words(sh.k))
				}
				// With an int8 down projection (h8) the reference takes the
				// kernel's hidden units, checked on their own, rounded as
				// h8_store rounds them: from its own float64 ones a rounding
				// could land on the other side of a half.
				down8 := g.l.ffnInt8Down(ffnArgs{down: down, h: h, h8: h8}, f) != nil
				name := fmt.Sprintf("%s/%dx%d/u%dw%d/split=%v/h8=%v/x8=%v/%+v", typ, sh.hidden, sh.k, fs.units, fs.perWarp, h != 0, down8,
					x8 != 0, v)
				n := refNorm(xr, nw, 1e-5, g.l.k.rounds8(f, x8 != 0))
				hidden := refGLU(refMatvec(wg, n), refMatvec(wu, n), v.act)
				output := func(hidden []float64) []float64 {
					want := refMatvec(wd, hidden)
					for i := range want {
						want[i] *= float64(v.rs)
						if !v.noCarry {
							want[i] += float64(xr[i])
						}
					}
					return want
				}
				want := output(hidden)
				before := randResidual(r, sh.k)
				poison := g.floats([]float32{0}, 0)
				var first []int64
				for run := 0; run < 2; run++ {
					out := g.int64s(before)
					a := ffnArgs{res: res, out: out, poison: poison, normW: dnw, eps: 1e-5, gate: gate, up: up, down: down, h: h,
						h8: h8, act: v.act, rs: v.rs, noCarry: v.noCarry, x8: x8}
					if err := g.l.ffn(a); err != nil {
						t.Fatal(err)
					}
					got := g.readInt64s(out, sh.k)
					if run == 0 && down8 {
						gotH := g.read(h, sh.hidden)
						check(t, name+" hidden units", gotH, hidden, f32Tol)
						want = output(refQ8Groups(gotH, 16))
					}
					if run == 0 {
						check(t, name, residualDelta(got, before), want, f32Tol)
						first = got
					} else if !slices.Equal(got, first) {
						t.Errorf("%s: a second run on the same inputs gave other bits", name)
					}
				}
				if g.l.k.int8[f] {
					// With act_q8's activations (ffnArgs.x8): the same bits.
					out := g.int64s(before)
					a := ffnArgs{res: res, out: out, poison: poison, normW: dnw, eps: 1e-5, gate: gate, up: up, down: down, h: h,
						h8: h8, act: v.act, rs: v.rs, noCarry: v.noCarry, x8: g.floats(nil, act8Words(sh.k))}
					if err := g.l.ffn(a); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(g.readInt64s(out, sh.k), first) {
						t.Errorf("%s: with act_q8's activations the FFN gave other bits", name)
					}
				}
				if p := math.Float32bits(g.read(poison, 1)[0]); p != 0 {
					t.Errorf("%s: poison word %d after finite inputs", name, p)
				}
			}
			g.l.ffnShape, g.l.ffnMixShape = ffnShape{}, ffnShape{}
			// A norm weight of 1e30: the products pass RES_LIMIT.
			big := make([]float32, sh.k)
			for i := range big {
				big[i] = 1e30
			}
			overflows := []struct{ h, x8 cu.DevicePtr }{{}, {h: g.floats(nil, sh.hidden)}}
			if g.l.k.glu[gate.Type] != nil {
				overflows = append(overflows, struct{ h, x8 cu.DevicePtr }{g.floats(nil, sh.hidden), g.floats(nil, actF32Words(sh.k))})
			}
			for _, o := range overflows {
				res, _ := g.residual(randFloats(r, sh.k, 1))
				poison := g.floats([]float32{0}, 0)
				a := ffnArgs{res: res, out: g.int64s(make([]int64, sh.k)), poison: poison, normW: g.floats(big, 0), eps: 1e-5,
					gate: gate, up: up, down: down, h: o.h, x8: o.x8, rs: 1}
				if err := g.l.ffn(a); err != nil {
					t.Fatal(err)
				}
				if p := math.Float32bits(g.read(poison, 1)[0]); p != 1 {
					t.Errorf("%s/%dx%d/split=%v/x8=%v: poison word %d after an overflow, want 1", typ, sh.hidden, sh.k, o.h != 0, o.x8 != 0, p)
				}
			}
		}
	}
}

func TestEmbedKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(3, 3))
	for _, typ := range testTypes {
		cols := 576
		if !fits(typ, cols) {
			cols = 512
		}
		_, w, hm := randWeights(t, r, typ, 50, cols)
		tok, pos := int32(r.IntN(50)), int32(r.IntN(1000))
		io := []int32{tok, pos, -1, -1}
		for i := 0; i < spWords; i++ {
			io = append(io, int32(r.Uint32()))
		}
		res, dpos, params, poison := g.floats(nil, 2*cols), g.floats(nil, 1), g.floats(nil, spWords), g.floats([]float32{0}, 0)
		// An embedding multiplier (Gemma's √d, Granite's): the row times
		// it in float32, as the kernel rounds it.
		const scale = 1.7
		if err := g.l.embed(g.int32s(io...), dpos, params, spWords, g.matrix(hm), scale, res, poison); err != nil {
			t.Fatal(err)
		}
		row := f32s(w[tok])
		for i := range row {
			row[i] *= scale
		}
		if got, want := g.readInt64s(res, cols), residualFixed(row); !slices.Equal(got, want) {
			t.Errorf("%s: residual stream %v…, want %v…", typ, got[:4], want[:4])
			for i := range got {
				if got[i] != want[i] {
					t.Logf("%s: first difference at %d: %d, want %d", typ, i, got[i], want[i])
					break
				}
			}
		}
		if p := math.Float32bits(g.read(poison, 1)[0]); p != 0 {
			t.Errorf("%s: poison word %d", typ, p)
		}
		if got := int32(math.Float32bits(g.read(dpos, 1)[0])); got != pos {
			t.Errorf("%s: embed published position %d, want %d", typ, got, pos)
		}
		for i, v := range g.read(params, spWords) {
			if int32(math.Float32bits(v)) != io[ioParams+i] {
				t.Errorf("%s: parameter word %d is %#x, want %#x", typ, i, math.Float32bits(v), uint32(io[ioParams+i]))
			}
		}
		// A token that is no row (a chained step after an all-NaN one)
		// poisons the step and reads nothing out of bounds.
		for _, bad := range []int32{-1, 50, math.MaxInt32} {
			poison := g.floats([]float32{0}, 0)
			if err := g.l.embed(g.int32s(bad, pos, -1, -1), dpos, params, 0, g.matrix(hm), 1, res, poison); err != nil {
				t.Fatal(err)
			}
			if p := math.Float32bits(g.read(poison, 1)[0]); p != 1 {
				t.Errorf("%s: token %d: poison word %d, want 1", typ, bad, p)
			}
		}
	}
}

// TestLogitsKernel checks the output head with its fused argmax, on a
// float32 row (the prefill's) and on the fixed-point residual stream, on
// one ticket counter (the last block must leave it at zero), with planted
// ties, writing the token id to host-mapped memory as the engine does; then
// with penalties, which must change exactly the logits of the tokens in the
// history, as package sample's arithmetic does, bit for bit; then with the
// poison word set, which must make every logit NaN and be cleared.
func TestLogitsKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(6, 6))
	host, err := g.c.AllocHost(16)
	if err != nil {
		t.Fatal(err)
	}
	defer g.c.FreeHost(host)
	for _, typ := range testTypes {
		for _, sh := range []struct{ rows, cols int }{{512, 64}, {49152, 576}, {7, 96}, {300, 2080}, {1000, 512}, {600, 4096}, {301, 2304}, {64, 4160}} {
			if !fits(typ, sh.cols) || (sh.rows == 49152 && typ.BlockSize() > 32) {
				continue
			}
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
			// Odd rows: two rows a warp; even: the wide kernels where
			// the rows are wide (logits_wide_*).
			g.l.logitsRows, g.l.logitsWide = []int{0, 2}[sh.rows%2], sh.rows%2 == 0
			blocks := g.l.logitsBlocks(dm)
			key := g.floats(make([]float32, headKeyWords), 0)
			modes := []bool{false}
			if f, _ := g.l.logitsX8Kernel(dm); f != nil {
				modes = append(modes, true) // the head on act_q8's activations (logits_x8_*) or act_f32's row (logits_xf_*)
			}
			for _, onX8 := range modes {
				ticket := g.floats([]float32{0}, 0)
				x, nw := randFloats(r, sh.cols, 1), randFloats(r, sh.cols, 1)
				var plain []float32
				poison := g.floats([]float32{0}, 0)
				for run := 0; run < 4; run++ {
					if run < 2 {
						x, nw = randFloats(r, sh.cols, 1), randFloats(r, sh.cols, 1)
					}
					a := logitsArgs{normW: g.floats(nw, 0), eps: 1e-5, w: dm, scale: 1, logits: g.floats(nil, sh.rows),
						partV: g.floats(nil, blocks), partI: g.floats(nil, blocks), ticket: ticket, best: g.floats(nil, 1),
						result: host.Device}
					if onX8 {
						a.x8, a.key = g.floats(nil, actF32Words(sh.cols)), key
					}
					if run == 1 || run == 2 {
						// A logit multiplier and a final soft-cap (Granite's,
						// Gemma's), before the penalties.
						a.scale, a.softcap = 0.5, 3
					}
					// With the step's position the token goes to slot pos&1
					// and, with pos+1, to the chained step's input.
					slot, pos := 0, int32(r.IntN(4096))
					if run%2 == 1 {
						slot = int(pos & 1)
						a.pos, a.next = g.int32s(pos), g.int32s(-7, -7)
					}
					xr := x
					if run == 0 {
						a.x = g.floats(x, 0)
					} else {
						a.res, xr = g.residual(x)
						a.poison = poison
					}
					if run == 3 {
						if err := g.c.MemsetD32(poison, 1, 1); err != nil {
							t.Fatal(err)
						}
					}
					var counts []int32
					var p sample.Params
					if run == 2 {
						// The inputs of run 1 again, with penalties.
						p = sample.Params{RepeatPenalty: 1.3, FrequencyPenalty: 0.25, PresencePenalty: -0.5, PenaltyLastN: 8}
						counts = make([]int32, sh.rows)
						for range min(40, sh.rows) {
							counts[r.IntN(sh.rows)]++
						}
						words := make([]uint32, spWords)
						encodeParams(words, p, 0, sh.rows)
						cf := make([]float32, sh.rows)
						for i, c := range counts {
							cf[i] = math.Float32frombits(uint32(c))
						}
						a.counts, a.params = g.floats(cf, 0), g.int32s(i32s(words)...)
					}
					host.Uint32s()[0], host.Uint32s()[1] = 0xfffffffe, 0xfffffffe
					if err := g.l.logits(a); err != nil {
						t.Fatal(err)
					}
					got := g.read(a.logits, sh.rows)
					name := fmt.Sprintf("%s/%dx%d/x8=%v run %d", typ, sh.rows, sh.cols, onX8 && run > 0, run)
					if f := g.l.logitsPick(a); onX8 && run > 0 && !g.l.k.int8X8[f] && !g.l.k.floatX[f] {
						t.Fatalf("%s: not the logits_x8 or logits_xf kernel", name)
					}
					if k := g.readInt32s(key, headKeyWords); slices.ContainsFunc(k, func(v int32) bool { return v != 0 }) ||
						g.readInt32s(ticket, 1)[0] != 0 {
						t.Fatalf("%s: the head left a key or its ticket set", name)
					}
					if run == 3 {
						for i, v := range got {
							if v == v {
								t.Fatalf("%s: logit %d is %v with the poison word set", name, i, v)
							}
						}
						if tok := int32(host.Uint32s()[slot]); tok != -1 {
							t.Errorf("%s: token %d with every logit NaN, want -1", name, tok)
						}
						if p := math.Float32bits(g.read(poison, 1)[0]); p != 0 {
							t.Errorf("%s: poison word %d after the head, want it cleared", name, p)
						}
						continue
					}
					tok, best := int(host.Uint32s()[slot]), refArgmax(got)
					if tok != best {
						t.Errorf("%s: token %d in slot %d, want argmax %d of the logits", name, tok, slot, best)
					}
					if other := host.Uint32s()[1-slot]; other != 0xfffffffe {
						t.Errorf("%s: slot %d written (%#x), the token goes to slot %d", name, 1-slot, other, slot)
					}
					if a.next != 0 {
						if got, want := g.readInt32s(a.next, 2), []int32{int32(best), pos + 1}; !slices.Equal(got, want) {
							t.Errorf("%s: the chained step's input is %v, want %v", name, got, want)
						}
					}
					if dev := int(math.Float32bits(g.read(a.best, 1)[0])); dev != best {
						t.Errorf("%s: best %d, want %d", name, dev, best)
					}
					if run < 2 {
						want := refMatvec(w, refNorm(xr, nw, 1e-5, g.l.k.rounds8(g.l.logitsPick(a), a.x8 != 0)))
						for i := range want {
							want[i] = refSoftcap(want[i]*float64(a.scale), a.softcap)
						}
						check(t, name, got, want, f32Tol)
						plain = got
						continue
					}
					changed := 0
					for i, v := range plain {
						want := v
						if counts[i] > 0 {
							want = refPenalize(v, counts[i], p)
							changed++
						}
						if math.Float32bits(got[i]) != math.Float32bits(want) {
							t.Fatalf("%s: logit %d (count %d) is %v, want %v", name, i, counts[i], got[i], want)
						}
					}
					t.Logf("%s: %d penalized logits exact", name, changed)
				}
			}
		}
	}
}

// refPenalize is package sample's penalty, as documented there.
func refPenalize(l float32, count int32, p sample.Params) float32 {
	if p.RepeatPenalty != 0 && p.RepeatPenalty != 1 {
		if l <= 0 {
			l = float32(l * p.RepeatPenalty)
		} else {
			l = float32(l / p.RepeatPenalty)
		}
	}
	freq := float32(float32(count) * p.FrequencyPenalty)
	return float32(l - float32(freq+p.PresencePenalty))
}

func i32s(w []uint32) []int32 {
	v := make([]int32, len(w))
	for i, x := range w {
		v[i] = int32(x)
	}
	return v
}

// TestAttentionStep runs the whole attention block of one layer: qkv_rope
// (norm of the fixed-point residual stream, projections, RoPE, cache
// append, the next residual buffer zeroed), then attention over the cache
// split in chunks with the merge and the output projection added to the
// residual stream, each checked against the twins, at positions that take
// one split (no merge), some, and all of them, with 1 to 8 query heads per
// block and head groups whose W_o columns end inside a 32-element block;
// then the same on thread-block clusters (attention_cl). The cases turn
// through the block's variations (model.Block): no pre-norm, attention
// temperature, Q/K norms per head or over the whole projection (qk_norm
// after qkv_rope), and a sliding window, soft-capped scores and a residual
// multiplier in the attention.
func TestAttentionStep(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(5, 5))
	cases := []struct {
		typ                             quant.Type
		dim, nHead, nKV, headDim, ropeD int
		neox, bias                      bool
		ctx, minChunk                   int
		vTyp                            quant.Type // V's type when it is not typ's (0: typ)
	}{
		{quant.Q4_K, 256, 4, 2, 64, 64, false, true, 300, 16, quant.Q6_K}, // Q4_K_M's mix
		{quant.Q5_K, 512, 8, 2, 64, 64, true, false, 200, 16, 0},
		{quant.Q2_K, 256, 4, 4, 64, 64, false, false, 150, 8, quant.Q3_K},
		{quant.IQ4_XS, 256, 2, 1, 128, 128, false, false, 100, 16, quant.IQ4_NL},
		{quant.Q4_1, 96, 4, 2, 24, 24, true, false, 90, 8, quant.Q5_0},
		{quant.Q5_1, 128, 4, 4, 32, 32, false, false, 64, 4, quant.Q8_0},
		{quant.BF16, 64, 4, 2, 16, 16, false, true, 80, 8, 0},
		{quant.F32, 64, 8, 4, 8, 8, false, false, 512, 8, 0},
		{quant.Q4_0, 576, 9, 3, 64, 64, false, false, 300, 32, 0},
		{quant.Q8_0, 576, 9, 3, 64, 64, true, true, 2100, 32, 0},
		{quant.F16, 256, 4, 4, 64, 32, true, false, 100, 16, 0},
		{quant.Q4_0, 512, 4, 1, 128, 128, false, true, 1100, 16, 0},
		{quant.Q8_0, 384, 12, 1, 32, 32, false, false, 700, 4, 0},
		{quant.Q4_0, 256, 16, 2, 16, 16, true, false, 64, 1, 0},
		{quant.Q8_0, 384, 4, 2, 96, 64, true, false, 500, 8, 0},    // 8 lanes × 3 float4s
		{quant.F16, 512, 4, 1, 256, 128, false, false, 300, 32, 0}, // 32 lanes × 2 float4s
		{quant.Q4_0, 256, 2, 2, 48, 48, false, false, 260, 16, 0},  // 4 lanes × 3 float4s
		{quant.Q6_K, 512, 8, 2, 64, 64, false, true, 150, 16, 0},   // the typed mixed families
		{quant.Q4_K, 256, 4, 4, 64, 64, true, false, 130, 8, 0},
		{quant.Q8_0, 256, 2, 2, 128, 128, true, false, 200, 16, 0},
		{quant.Q4_0, 256, 4, 2, 64, 64, false, false, 100, 8, 0},
		{quant.Q8_0, 512, 4, 1, 256, 256, true, false, 300, 16, 0}, // Gemma 3's heads, with Q/K norms a head
		// The pairs of typedFamily.v, at one and two rows a warp (ci%3
		// 1 and 2; 0 runs the untyped kernels).
		{quant.Q3_K, 256, 4, 1, 64, 64, false, false, 120, 8, quant.Q4_K},
		{quant.IQ4_XS, 256, 8, 2, 32, 32, true, false, 100, 8, quant.Q5_K},
		{quant.Q8_0, 256, 4, 2, 64, 64, false, false, 64, 8, 0},
		{quant.IQ4_NL, 256, 4, 1, 64, 64, false, false, 100, 8, quant.Q5_K},
		{quant.Q3_K, 512, 8, 2, 64, 64, true, true, 130, 16, quant.Q5_K},
		{quant.Q8_0, 256, 4, 2, 64, 64, false, false, 64, 8, 0},
		{quant.Q4_K, 256, 4, 1, 64, 64, false, false, 100, 8, quant.Q5_K},
		{quant.Q2_K, 256, 4, 2, 64, 64, true, false, 80, 8, quant.Q3_K},
		{quant.Q2_K, 256, 4, 1, 64, 64, false, false, 70, 8, quant.Q4_K}, // the untyped kernel
		{quant.Q5_K, 256, 4, 1, 64, 64, false, true, 110, 8, quant.Q6_K},
		{quant.Q2_K, 512, 8, 2, 64, 64, false, true, 90, 8, quant.Q4_K},
	}
	for ci, tc := range cases {
		g.l.rows = []int{4, 2, 1}[ci%3]
		qd, kvd := tc.nHead*tc.headDim, tc.nKV*tc.headDim
		_, wq, hq := randWeights(t, r, tc.typ, qd, tc.dim)
		_, wk, hk := randWeights(t, r, tc.typ, kvd, tc.dim)
		vTyp := tc.typ
		if tc.vTyp != 0 {
			vTyp = tc.vTyp
		}
		_, wv, hv := randWeights(t, r, vTyp, kvd, tc.dim)
		_, wo, ho := randWeights(t, r, tc.typ, tc.dim, qd)
		dwq, dwk, dwv := g.qkv(hq, hk, hv)
		dwo := g.matrix(ho)
		oBlocks := []int{16, 1, 5, 32, 3}[ci%5]
		var bias []float32
		var dbias cu.DevicePtr
		if tc.bias {
			bias = randFloats(r, qd+2*kvd, 0.5)
			dbias = g.floats(bias, 0)
		}
		cs := refRopeTable(tc.ctx, plainRope(tc.ropeD))
		dcs := g.floats(cs, 0)
		acc, ml := attnPartials(tc.nHead, tc.headDim)
		tickets := g.floats(make([]float32, 2*tc.nHead), 0)
		partAcc, partML := g.floats(nil, acc), g.floats(nil, ml)
		noNorm := ci%5 == 2
		qkMode := []model.QKNorm{model.QKNormNone, model.QKNormHead, model.QKNormNone, model.QKNormFull}[ci%4]
		var temp []float32 // the attention temperature by position (nil: none)
		if ci%4 == 2 || ci%7 == 3 {
			temp = tempTable(&model.Block{AttnTempScale: 0.3, AttnTempFloor: 8}, tc.ctx)
		}
		window, capv, rs := 0, float32(0), float32(1)
		if ci%3 == 1 {
			window, rs = tc.minChunk+5, 0.75
			if ci%2 == 1 {
				capv = 0.7 // the CAP instantiations
			}
		}
		qw, kw := randFloats(r, tc.headDim, 1), randFloats(r, tc.headDim, 1)
		if qkMode == model.QKNormFull {
			qw, kw = randFloats(r, qd, 1), randFloats(r, kvd, 1)
		}
		var dtemp cu.DevicePtr
		if temp != nil {
			dtemp = g.floats(temp, 0)
		}
		for pi, pos := range []int{r.IntN(tc.minChunk), tc.ctx/3 + r.IntN(tc.ctx/3), tc.ctx - 1} {
			name := fmt.Sprintf("%s/d%d/h%d/kv%d/hd%d/rope%d/neox=%v/bias=%v/pos%d/nonorm=%v/qk%d/temp=%v/win%d/cap%v/rs%v",
				tc.typ, tc.dim, tc.nHead, tc.nKV, tc.headDim, tc.ropeD, tc.neox, tc.bias, pos, noNorm, qkMode, temp != nil,
				window, capv, rs)
			x, nw := randFloats(r, tc.dim, 1), randFloats(r, tc.dim, 1)
			res, xr := g.residual(x)
			next := g.int64s(randResidual(r, tc.dim))
			poison := g.floats([]float32{0}, 0)
			// A cache filled with random history, except the row being written.
			kc, vc := randFloats(r, kvd*tc.ctx, 1), randFloats(r, kvd*tc.ctx, 1)
			for h := 0; h < tc.nKV; h++ {
				for i := 0; i < tc.headDim; i++ {
					kc[(h*tc.ctx+pos)*tc.headDim+i] = float32(math.NaN())
					vc[(h*tc.ctx+pos)*tc.headDim+i] = float32(math.NaN())
				}
			}
			dkc, dvc := g.kv(kc), g.kv(vc)
			dq := g.floats(nil, qd+kvd)
			dpos := g.int32s(int32(pos))
			eps := float32(1e-5)
			qa := qkvArgs{res: res, resNext: next, poison: poison, normW: g.floats(nw, 0), eps: eps, wq: dwq, wk: dwk, wv: dwv, bias: dbias,
				nHead: tc.nHead, nKV: tc.nKV, headDim: tc.headDim, ropeCS: dcs, ropeDim: tc.ropeD, neox: tc.neox, temp: dtemp,
				pos: dpos, q: dq, kCache: dkc, vCache: dvc, ctxMax: tc.ctx}
			if noNorm {
				qa.normW = 0
			}
			if qkMode != model.QKNormNone {
				// qk_norm rotates, scales and writes the keys, staged after
				// the queries.
				qa.ropeDim, qa.temp, qa.kCache = 0, 0, 0
			}
			// The kernel on act_q8's activations (qkvArgs.x8, where it
			// multiplies int8 ones), checked below; first the same kernel
			// staging its input, which must give the same bits (V in Q6_K
			// has a kernel of its own there: qkv_rope's _v<type>).
			qa.x8 = g.floats(nil, actF32Words(tc.dim))
			// F16 and BF16 take act_f32's row (qkv_rope_xf) at every other
			// position, their staged kernel at the others.
			qa.xf = (ci+pi)%2 == 0
			qa0 := qa
			qa0.x8 = 0
			f0, _ := g.l.qkvKernel(qa0)
			f, _ := g.l.qkvKernel(qa)
			if fam := typedQuants[tc.typ]; g.l.rows <= 2 && slices.Contains(fam.v, vTyp) {
				if fs := g.l.k.typed[tc.typ].qkvV[vTyp]; f != fs[0] && f != fs[1] {
					t.Errorf("%s: V in %v ran another kernel than the pair's", name, vTyp)
				}
			}
			if g.l.k.int8X8[f] && ci%2 == 0 {
				// Q4_0's kernels multiply int8 activations only from
				// act_q8: every other case checks their float path.
				qa.x8 = 0
			}
			var q0, k0, v0 []float32
			if g.l.k.int8[f] && f0 == f {
				if err := g.l.qkvRope(qa0); err != nil {
					t.Fatal(err)
				}
				q0, k0, v0 = g.read(dq, qd+kvd), g.readKV(dkc, kvd*tc.ctx), g.readKV(dvc, kvd*tc.ctx)
			}
			if err := g.l.qkvRope(qa); err != nil {
				t.Fatal(err)
			}
			if q0 != nil && (!sameBits(g.read(dq, qd+kvd), q0) || !sameBits(g.readKV(dkc, kvd*tc.ctx), k0) || !sameBits(g.readKV(dvc, kvd*tc.ctx), v0)) {
				t.Errorf("%s: on act_q8's activations the QKV kernel gave other bits than staging its input", name)
			}
			if qkMode != model.QKNormNone {
				err := g.l.qkNorm(qkNormArgs{q: dq, kCache: dkc, pos: dpos, ctxMax: tc.ctx, nHead: tc.nHead, nKV: tc.nKV,
					headDim: tc.headDim, full: qkMode == model.QKNormFull, qw: g.floats(qw, 0), kw: g.floats(kw, 0), eps: eps,
					ropeCS: dcs, ropeDim: tc.ropeD, neox: tc.neox, temp: dtemp})
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := g.readInt64s(next, tc.dim); slices.ContainsFunc(got, func(v int64) bool { return v != 0 }) {
				t.Errorf("%s: qkv_rope left the next residual buffer nonzero", name)
			}
			if noNorm {
				nw = nil
			}
			n := refNorm(xr, nw, eps, g.l.k.rounds8(f, qa.x8 != 0))
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
			switch qkMode {
			case model.QKNormHead:
				refNormGroups(q, qw, tc.headDim, eps)
				refNormGroups(k, kw, tc.headDim, eps)
			case model.QKNormFull:
				refNormGroups(q, qw, qd, eps)
				refNormGroups(k, kw, kvd, eps)
			}
			refRope(q, tc.nHead, tc.headDim, tc.ropeD, tc.neox, cs, pos)
			refRope(k, tc.nKV, tc.headDim, tc.ropeD, tc.neox, cs, pos)
			if temp != nil {
				for i := range q {
					q[i] *= float64(temp[pos])
				}
			}
			gotQ := g.read(dq, qd)
			check(t, name+" q", gotQ, q, f32Tol)
			gotK, gotV := g.readKV(dkc, kvd*tc.ctx), g.readKV(dvc, kvd*tc.ctx)
			var rowK, rowV []float32
			for h := 0; h < tc.nKV; h++ {
				off := (h*tc.ctx + pos) * tc.headDim
				rowK = append(rowK, gotK[off:off+tc.headDim]...)
				rowV = append(rowV, gotV[off:off+tc.headDim]...)
				copy(kc[off:], gotK[off:off+tc.headDim])
				copy(vc[off:], gotV[off:off+tc.headDim])
			}
			checkKV(t, name+" k row", rowK, k)
			checkKV(t, name+" v row", rowV, v)
			for i := range gotK {
				if math.Float32bits(gotK[i]) != math.Float32bits(kc[i]) || math.Float32bits(gotV[i]) != math.Float32bits(vc[i]) {
					t.Fatalf("%s: cache element %d outside the written row changed", name, i)
				}
			}

			scale := float32(1 / math.Sqrt(float64(tc.headDim)))
			a := attnArgs{q: dq, kCache: dkc, vCache: dvc, ctxMax: tc.ctx, headDim: tc.headDim, nHead: tc.nHead,
				nKV: tc.nKV, pos: dpos, scale: scale, window: window, softcap: capv, rs: rs, minChunk: tc.minChunk,
				oBlocks: oBlocks, partAcc: partAcc, partML: partML, tickets: tickets, wo: dwo, poison: poison, noSpin: ci%2 == 1}
			want := refMatvec(wo, refAttention(gotQ, kc, vc, tc.nHead, tc.nKV, tc.headDim, tc.ctx, pos+1, window, scale, capv))
			for i := range want {
				want[i] *= float64(rs)
			}
			// Twice split (the merge, spinning or not, must leave the
			// tickets at zero for the next step), then in one split, however
			// long, then on clusters (attention_cl, sm_90+: 1 to 8 blocks
			// of a cluster without positions, chunks of several rounds,
			// more than 4 warps a head); then the three again with the
			// heads' outputs projected by matvec_add, and again with them
			// rounded to int8 for matvec_add8 (where W_o's layout has one:
			// the reference then takes the heads as q8_row rounds them).
			heads, heads8 := g.floats(nil, qd), g.floats(nil, h8Words(qd))
			for run := 0; run < 10; run++ {
				switch run {
				case 1:
					a.splits = []int{5, 16, 1}[ci%3] // fewer than attSplits (0)
				case 2, 5, 8:
					a.single = tc.ctx
				case 3, 6, 9:
					a.cluster = []int{8, 4, 2}[ci%3]
					if ci%4 == 3 {
						g.l.attnWarpsPerHead = 8
					}
				case 4:
					a.single, a.cluster, a.heads = 0, 0, heads
				case 7:
					a.single, a.cluster, a.heads8 = 0, 0, heads8
				}
				before := randResidual(r, tc.dim)
				a.res = g.int64s(before)
				if err := g.l.attention(a); err != nil {
					t.Fatal(err)
				}
				got := residualDelta(g.readInt64s(a.res, tc.dim), before)
				wantRun := want
				int8Heads := g.l.headsInt8(a) != nil
				if int8Heads {
					wantRun = refMatvec(wo, refQ8Groups(g.read(heads, qd), 32))
					for i := range wantRun {
						wantRun[i] *= float64(rs)
					}
				}
				check(t, fmt.Sprintf("%s attention+out run %d (%d splits, %d blocks share a split's rows, spin %v, clusters of %d, warps a head %d, heads apart %v, int8 %v)",
					name, run, a.splits, oBlocks, !a.noSpin, a.cluster, g.l.attnWarpsPerHead, a.heads != 0, int8Heads), got, wantRun, 1e-5)
				g.l.attnWarpsPerHead = 0
			}
			if p := math.Float32bits(g.read(poison, 1)[0]); p != 0 {
				t.Errorf("%s: poison word %d", name, p)
			}
			for i, v := range g.read(tickets, 2*tc.nHead) {
				if math.Float32bits(v) != 0 {
					t.Fatalf("%s: ticket %d left at %d", name, i, math.Float32bits(v))
				}
			}
		}
	}
}

// refNormGroups RMS-normalizes v in place in groups of n elements, each
// times the gains w (len n, or len(v) for one group).
func refNormGroups(v []float64, w []float32, n int, eps float32) {
	for g0 := 0; g0 < len(v); g0 += n {
		ss := 0.0
		for _, x := range v[g0 : g0+n] {
			ss += x * x
		}
		f := 1 / math.Sqrt(ss/float64(n)+float64(eps))
		for i := range n {
			v[g0+i] *= f * float64(w[i%len(w)])
		}
	}
}

// TestPostnormKernel checks a post-normed branch joining the residual
// stream against its twin, in place and into another buffer, with and
// without the norm, and that it zeroes the branch and the other branch
// buffer (clear); then act_q8_post, which must give postnorm's stream and
// act_q8's int8 activations of it to the bit, leaving the branch as it was.
func TestPostnormKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(8, 8))
	for ci, tc := range []struct {
		k       int
		norm    bool
		rs      float32
		inPlace bool
	}{{576, true, 1, true}, {2048, true, 0.5, false}, {100, false, 0.25, true}, {4100, true, 1, false}, {36, false, 2, false},
		{4096, true, 0.5, true}, {1088, false, 1, false}} {
		name := fmt.Sprintf("k%d/norm=%v/rs%v/inplace=%v", tc.k, tc.norm, tc.rs, tc.inPlace)
		bf := randFloats(r, tc.k, 2)
		branch, br := g.residual(bf)
		before := randResidual(r, tc.k)
		base := g.int64s(before)
		out := base
		if !tc.inPlace {
			out = g.int64s(randResidual(r, tc.k))
		}
		clear := g.int64s(randResidual(r, tc.k))
		w := randFloats(r, tc.k, 1)
		dw := g.floats(w, 0)
		want := f64s(br)
		if tc.norm {
			refNormGroups(want, w, tc.k, 1e-5)
		} else {
			dw = 0
		}
		for i := range want {
			want[i] *= float64(tc.rs)
		}
		poison := g.floats([]float32{0}, 0)
		if err := g.l.postnorm(branch, base, out, dw, 1e-5, tc.rs, tc.k, poison, clear); err != nil {
			t.Fatal(err)
		}
		joined := g.readInt64s(out, tc.k)
		check(t, name, residualDelta(joined, before), want, f32Tol)
		for _, z := range []struct {
			what string
			p    cu.DevicePtr
		}{{"branch", branch}, {"other branch", clear}} {
			if got := g.readInt64s(z.p, tc.k); slices.ContainsFunc(got, func(v int64) bool { return v != 0 }) {
				t.Errorf("%s: the %s buffer is not zeroed", name, z.what)
			}
		}
		if p := math.Float32bits(g.read(poison, 1)[0]); p != 0 {
			t.Errorf("%s: poison word %d", name, p)
		}
		if tc.k%32 != 0 {
			continue // act_q8 takes whole blocks
		}
		// act_q8_post, through the launcher as a Q8_0 QKV kernel asks for it.
		f := g.l.k.qkvRope2[wtQ8_0]
		var nw cu.DevicePtr
		if ci%2 == 0 {
			nw = g.floats(randFloats(r, tc.k, 1), 0)
		}
		wantX8 := g.floats(nil, act8Words(tc.k))
		if _, _, err := g.l.actQ8(f, wantX8, out, nw, tc.k, 0, nil); err != nil {
			t.Fatal(err)
		}
		branch2, _ := g.residual(bf)
		base2 := g.int64s(before)
		out2 := base2
		if !tc.inPlace {
			out2 = g.int64s(randResidual(r, tc.k))
		}
		clear2 := g.int64s(randResidual(r, tc.k))
		x8 := g.floats(nil, act8Words(tc.k))
		post := &postArgs{branch: branch2, base: base2, w: dw, eps: 1e-5, rs: tc.rs, clear: clear2, poison: poison}
		if _, _, err := g.l.actQ8(f, x8, out2, nw, tc.k, 0, post); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.readInt64s(out2, tc.k), joined) {
			t.Errorf("%s: act_q8_post's stream differs from postnorm's", name)
		}
		if !sameBits(g.read(x8, act8Words(tc.k)), g.read(wantX8, act8Words(tc.k))) {
			t.Errorf("%s: act_q8_post's int8 activations differ from act_q8's", name)
		}
		if got := g.readInt64s(clear2, tc.k); slices.ContainsFunc(got, func(v int64) bool { return v != 0 }) {
			t.Errorf("%s: act_q8_post left the other branch nonzero", name)
		}
		if got, _ := g.residual(bf); !slices.Equal(g.readInt64s(branch2, tc.k), g.readInt64s(got, tc.k)) {
			t.Errorf("%s: act_q8_post changed the branch it read", name)
		}
		if p := math.Float32bits(g.read(poison, 1)[0]); p != 0 {
			t.Errorf("%s: poison word %d after act_q8_post", name, p)
		}
	}
}

func TestAttnLanes(t *testing.T) {
	for _, tc := range []struct{ d, lanes, nq int }{
		{8, 1, 2}, {16, 2, 2}, {32, 4, 2}, {64, 8, 2}, {128, 16, 2}, {256, 32, 2}, {4, 1, 1}, {96, 8, 3}, {48, 4, 3},
		{80, 0, 0}, {6, 0, 0}, {1024, 0, 0}, {512, 32, 4},
	} {
		lanes, nq, ok := attnLanes(tc.d)
		if ok != (tc.lanes > 0) || lanes != tc.lanes || nq != tc.nq {
			t.Errorf("head dimension %d: %d lanes × %d (%v), want %d × %d", tc.d, lanes, nq, ok, tc.lanes, tc.nq)
		}
	}
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}
