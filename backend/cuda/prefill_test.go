package cuda

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/quant"
)

// Bounds of the prefill kernel tests (relative error ‖got−want‖/‖want‖
// against the float64 twins; NaN fails):
const (
	// f32 accumulation of exact f16 products on the tensor cores, in
	// another order than the twin.
	gemmTol = 1e-4
	// A result rounded to f16 (2⁻¹¹ relative) on top of f32 arithmetic.
	f16OutTol = 1e-3
	// Attention: P rounded to f16 for the P·V product, the output to f16.
	prefillAttnTol = 2e-3
)

// f16NaN2 is two f16 NaNs: poison for f16 outputs.
const f16NaN2 = 0x7e007e00

// bytes uploads b and frees it with the test.
func (g *gpu) bytes(b []byte) cu.DevicePtr {
	g.t.Helper()
	p, err := g.c.Alloc(max(len(b), 4))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { g.c.Free(p) })
	if err := g.c.CopyHtoD(p, b); err != nil {
		g.t.Fatal(err)
	}
	return p
}

// settle waits for the uploads: a synchronous copy from pageable memory may
// return before its DMA lands, and the legacy stream it runs on does not
// order the test stream's kernels after it.
func (g *gpu) settle() {
	g.t.Helper()
	if err := g.c.Synchronize(); err != nil {
		g.t.Fatal(err)
	}
}

// halves allocates n f16 poisoned with NaN.
func (g *gpu) halves(n int) cu.DevicePtr {
	g.t.Helper()
	words := (n + 1) / 2
	p, err := g.c.Alloc(4 * max(words, 1))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { g.c.Free(p) })
	if err := g.c.MemsetD32(p, f16NaN2, words); err != nil {
		g.t.Fatal(err)
	}
	return p
}

func (g *gpu) readHalves(p cu.DevicePtr, n int) []float32 {
	g.t.Helper()
	if err := g.c.SyncStream(g.l.stream); err != nil {
		g.t.Fatal(err)
	}
	b := make([]byte, 2*n)
	if err := g.c.CopyDtoH(b, p); err != nil {
		g.t.Fatal(err)
	}
	return halvesF32(b)
}

// untouched fails unless every value is still NaN (the poison).
func untouched(t *testing.T, what string, f []float32) {
	t.Helper()
	for i, v := range f {
		if v == v {
			t.Errorf("%s: guard element %d was written (%v)", what, i, v)
			return
		}
	}
}

// TestGemmKernels checks the three gemm epilogues for every family's
// weights (the mixed-type family with every type it reads, its gate and up
// of different types) on shapes that are and are not multiples of each
// tile (gemmTiles, every shape through each), with a poisoned guard row past the output; and the store
// into a column range of a wider output (ldo), as Q, K and V of different
// types are multiplied. Q4_K and Q6_K take the typed families' gemms,
// checked bit for bit against the mixed family's.
func TestGemmKernels(t *testing.T) {
	g := newGPU(t)
	if g.c.Info.Major == 9 && g.c.Info.Minor == 0 && !g.l.k.pre.wgGemm {
		t.Errorf("gemm_wg (wgmma) did not load on a 9.0 device: %v", g.l.k.pre.wgErr)
	}
	r := rand.New(rand.NewPCG(11, 11))
	shapes := []struct{ m, n, k int }{
		{1, 64, 64}, {7, 40, 96}, {64, 64, 32}, {100, 200, 576}, {130, 832, 576}, {65, 96, 1536}, {200, 1536, 160}, {3, 5, 32},
		{100, 200, 512}, {130, 300, 256}, {300, 520, 576}, {257, 1000, 1024},
	}
	for _, typ := range testTypes {
		if typ == quant.F32 {
			continue // F32 models prefill through the decode graph
		}
		for _, sh := range shapes {
			m, n, k := sh.m, sh.n, sh.k
			if !fits(typ, k) {
				continue
			}
			a16, a := randHalves(r, m*k, 1)
			da := g.bytes(a16)
			_, w, hm := randWeights(t, r, typ, n, k)
			// The gate/up pair of another type (the mixed family reads any
			// mix), but for the typed families' types, whose kernels take
			// matrices of one type.
			_, typed := typedQuants[typ]
			typ2 := typ
			if hm.Type == wtMix && !typed {
				typ2 = quant.Q8_0
			}
			_, w2, hm2 := randWeights(t, r, typ2, n, k)
			hs, err := fuseLayouts([]hostMatrix{hm, hm2})
			if err != nil {
				t.Fatal(err)
			}
			dw, dw2 := g.matrix(hs[0]), g.matrix(hs[1])
			c := refGemm(a, m, k, refF16Rows(w))
			u := refGemm(a, m, k, refF16Rows(w2))
			// gemm_wg multiplies BF16 weights as they are by the
			// activations rounded to bf16 (prefill_bf16.go).
			var cB, uB []float64
			if typ == quant.BF16 {
				cB, uB = refGemm(refBF16(a), m, k, w), refGemm(refBF16(a), m, k, w2)
				g.l.bf16Act, g.l.bf16ActBytes = g.halves(m*k), 2*m*k
			}
			// Every tile, then wgmma's with the weights dequantized to f16
			// first (launcher.gemmDequantized): into scratch for the pair,
			// then into scratch for one tile's rows at a time (slices).
			scratch := g.floats(nil, 2*n*k/2)
			cF16 := c
			for ti := range len(gemmTiles) + 2 {
				dequant, sliced := ti >= len(gemmTiles), ti > len(gemmTiles)
				if dequant {
					ti = gemmWG
				}
				tile := gemmTiles[ti]
				if g.l.k.pre.gemm[wtQ4_0][gemmStore][ti] == nil {
					continue // gemm_wg's tile off 9.0 devices
				}
				g.l.gemmTile = ti + 1
				name := fmt.Sprintf("%s/m%d/n%d/k%d/tile%dx%d%s", typ, m, n, k, tile.m, tile.n, tile.suffix)
				c, u := c, u
				if cB != nil && tile.wg {
					c, u = cB, uB
				}
				if dequant {
					if g.l.k.pre.dequant[dw.Type] == nil {
						continue
					}
					g.l.dequant, g.l.dequantBytes, g.l.dequantMin = scratch, 4*n*k, 1
					name += "/dequantized"
					if sliced {
						g.l.dequantBytes = 2 * gemmTiles[gemmWG].n * k
						name += "/sliced"
					}
				}
				out := g.floats(nil, (m+1)*n)
				g.settle()
				if err := g.l.gemm(da, m, dw, gemmStore, out); err != nil {
					t.Fatal(err)
				}
				got := g.read(out, (m+1)*n)
				check(t, name+" store", got[:m*n], c, gemmTol)
				untouched(t, name+" store", got[m*n:])
				if typed {
					// The typed kernel dequantizes as the mixed one does: the
					// same bits.
					out2 := g.floats(nil, m*n)
					g.settle()
					g.l.untyped = true
					err := g.l.gemm(da, m, dw, gemmStore, out2)
					g.l.untyped = false
					if err != nil {
						t.Fatal(err)
					}
					if got2 := g.read(out2, m*n); !slices.EqualFunc(got[:m*n], got2, func(a, b float32) bool {
						return math.Float32bits(a) == math.Float32bits(b)
					}) {
						t.Errorf("%s: the typed gemm differs from the mixed one", name)
					}
				}

				y0 := randFloats(r, m*n, 1)
				ya := g.floats(y0, 0)
				g.settle()
				if err := g.l.gemm(da, m, dw, gemmAdd, ya); err != nil {
					t.Fatal(err)
				}
				want := make([]float64, m*n)
				for i := range want {
					want[i] = c[i] + float64(y0[i])
				}
				check(t, name+" add", g.read(ya, m*n), want, gemmTol)
				// Split-K (one row tile): the same sums, added in parts.
				yb := g.floats(y0, 0)
				g.settle()
				g.l.splitK = true
				err = g.l.gemm(da, m, dw, gemmAdd, yb)
				g.l.splitK = false
				if err != nil {
					t.Fatal(err)
				}
				if cB != nil && tile.wg && m <= gemmTiles[gemmSmall].m {
					// Split-K runs one row tile on the small tile, whatever
					// the fixed one: f16 activations.
					for i := range want {
						want[i] = cF16[i] + float64(y0[i])
					}
				}
				check(t, name+" add split-K", g.read(yb, m*n), want, gemmTol)

				for _, act := range []model.Activation{model.SiLU, model.GELUTanh} {
					h := g.halves((m + 1) * n)
					g.settle()
					if err := g.l.gemmGLU(da, m, dw, dw2, act, h); err != nil {
						t.Fatal(err)
					}
					gotH := g.readHalves(h, (m+1)*n)
					check(t, fmt.Sprintf("%s glu act %d", name, act), gotH[:m*n], refGLU(c, u, act), f16OutTol)
					untouched(t, name+" glu", gotH[m*n:])
				}

				// Columns [3, 3+n) of rows n+5 wide.
				ldo := n + 5
				wide := g.floats(nil, (m+1)*ldo)
				g.settle()
				if err := g.l.gemmInto(da, m, dw, nil, 0, gemmStore, wide.Offset(4*3), ldo); err != nil {
					t.Fatal(err)
				}
				gotW := g.read(wide, (m+1)*ldo)
				cols := make([]float32, 0, m*n)
				for i := 0; i < m; i++ {
					cols = append(cols, gotW[i*ldo+3:i*ldo+3+n]...)
					untouched(t, name+" ldo", gotW[i*ldo:i*ldo+3])
					untouched(t, name+" ldo", gotW[i*ldo+3+n:(i+1)*ldo])
				}
				check(t, name+" ldo", cols, c, gemmTol)
				g.l.dequant, g.l.dequantBytes, g.l.dequantMin = 0, 0, 0
			}
			g.l.gemmTile = 0
			g.l.bf16Act, g.l.bf16ActBytes = 0, 0
		}
	}
}

// TestToBF16Kernel checks to_bf16.cu's rounding of f16 activations to bf16
// bit for bit against quant.F32ToBF16, on random halves of every
// magnitude, subnormals, infinities and ties: a tie to even needs a half
// with more than eight significant bits.
func TestToBF16Kernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(17, 17))
	const n = 1<<16 + 8 // past one grid row of blocks, a multiple of eight
	in := make([]byte, 2*n)
	for i := range n {
		h := uint16(r.Uint32())
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			h &^= 0x3ff // NaN: its payload's rounding is not specified
		}
		in[2*i], in[2*i+1] = byte(h), byte(h>>8)
	}
	out := g.halves(n)
	l := g.l
	l.bf16Act, l.bf16ActBytes = out, 2*n
	if _, _, err := l.bf16Activations(g.bytes(in), 1, n); err != nil {
		t.Fatal(err)
	}
	if err := g.c.SyncStream(g.l.stream); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2*n)
	if err := g.c.CopyDtoH(got, out); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range n {
		h := uint16(in[2*i]) | uint16(in[2*i+1])<<8
		want := quant.F32ToBF16(quant.F16ToF32(h))
		if b := uint16(got[2*i]) | uint16(got[2*i+1])<<8; b != want {
			if bad++; bad <= 5 {
				t.Errorf("f16 %#04x: bf16 %#04x, want %#04x", h, b, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values differ", bad, n)
	}
}

// TestDequantKernel checks dequant.cu's f16 rows against the CPU's
// dequantization rounded to f16, for every family it reads, rows of one
// block and of many, and a row count that is not a multiple of the grid's
// blocks.
func TestDequantKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(13, 13))
	for _, typ := range testTypes {
		for _, sh := range []struct{ rows, cols int }{{1, 32}, {3, 256}, {37, 512}, {130, 1536}} {
			if !fits(typ, sh.cols) {
				continue
			}
			_, w, hm := randWeights(t, r, typ, sh.rows, sh.cols)
			dw := g.matrix(hm)
			if g.l.k.pre.dequant[dw.Type] == nil {
				continue // F32 and F16
			}
			// The rows from a third of the way on.
			r0 := sh.rows / 3
			name := fmt.Sprintf("%s/%dx%d/from%d", typ, sh.rows, sh.cols, r0)
			n := (sh.rows - r0) * sh.cols
			out := g.halves(n + 64)
			g.settle()
			if err := g.l.dequantRows(dw, r0, sh.rows-r0, out); err != nil {
				t.Fatal(err)
			}
			got := g.readHalves(out, n+64)
			untouched(t, name, got[n:])
			bad := 0
			for i, row := range refF16Rows(w[r0:]) {
				for j, want := range row {
					// The mixed layouts' scales multiply in another order
					// than the CPU's: one f16 rounding step apart at most.
					if v := float64(got[i*sh.cols+j]); math.Abs(v-want) > math.Abs(want)/1024+1e-7 {
						if bad++; bad <= 3 {
							t.Errorf("%s: [%d][%d] = %g, want %g", name, i, j, v, want)
						}
					}
				}
			}
		}
	}
}

func TestPrefillNormKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(12, 12))
	for i, sh := range []struct{ m, k int }{{1, 64}, {5, 576}, {130, 1000}, {512, 576}, {9, 100}} {
		x, w := randFloats(r, sh.m*sh.k, 2), randFloats(r, sh.k, 1)
		out := g.halves((sh.m + 1) * sh.k)
		// Every other shape without weights: no pre-norm, the rows only
		// rounded.
		noNorm := i%2 == 1
		dw, want := g.floats(w, 0), refPrefillNorm(x, w, 1e-5, sh.m, sh.k)
		if noNorm {
			dw, want = 0, f64s(x)
		}
		g.settle()
		if err := g.l.prefillNorm(g.floats(x, 0), dw, 1e-5, sh.m, sh.k, out); err != nil {
			t.Fatal(err)
		}
		got := g.readHalves(out, (sh.m+1)*sh.k)
		name := fmt.Sprintf("m%d/k%d/nonorm=%v", sh.m, sh.k, noNorm)
		check(t, name, got[:sh.m*sh.k], want, f16OutTol)
		untouched(t, name, got[sh.m*sh.k:])
	}
}

func TestPrefillEmbedKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(13, 13))
	for _, typ := range testTypes {
		rows, cols, m := 300, 576, 37
		if !fits(typ, cols) {
			cols = 512
		}
		_, w, hm := randWeights(t, r, typ, rows, cols)
		toks := make([]int32, m)
		const scale = 1.7 // an embedding multiplier, in float32 as the kernel rounds it
		var want []float64
		for i := range toks {
			toks[i] = int32(r.IntN(rows))
			for _, v := range w[toks[i]] {
				want = append(want, float64(float32(v)*scale))
			}
		}
		x := g.floats(nil, (m+1)*cols)
		g.settle()
		if err := g.l.prefillEmbed(g.int32s(toks...), m, g.matrix(hm), scale, x); err != nil {
			t.Fatal(err)
		}
		got := g.read(x, (m+1)*cols)
		check(t, typ.String(), got[:m*cols], want, 0)
		untouched(t, typ.String(), got[m*cols:])
	}
}

// TestPrefillRopeKernel checks biases, both RoPE pairings and the cache
// writes: the m rows at pos0.. hold K and V, every other element of the
// caches is unchanged.
func TestPrefillRopeKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(14, 14))
	cases := []struct {
		nHead, nKV, hd, ropeDim int
		neox, bias              bool
		m, pos0, ctx            int
		temp                    model.Block // its attention temperature
	}{
		{4, 2, 16, 16, false, false, 7, 0, 64, model.Block{}},
		{9, 3, 64, 64, false, false, 130, 37, 300, model.Block{AttnTempScale: 0.3, AttnTempFloor: 8}},
		{8, 2, 64, 32, true, true, 50, 100, 200, model.Block{}},
		{4, 4, 128, 128, true, false, 1, 9, 16, model.Block{}},
		{4, 2, 32, 0, true, true, 20, 3, 40, model.Block{AttnTempScale: 0.5, AttnTempFloor: 4}}, // no rotation (SmolLM3's layers)
	}
	for _, tc := range cases {
		name := fmt.Sprintf("h%d/kv%d/hd%d/rope%d/neox=%v/bias=%v/m%d/pos%d/temp%v", tc.nHead, tc.nKV, tc.hd, tc.ropeDim, tc.neox, tc.bias, tc.m, tc.pos0, tc.temp.AttnTempScale)
		w := (tc.nHead + 2*tc.nKV) * tc.hd
		qkv := randFloats(r, tc.m*w, 1)
		var bias []float32
		var dbias cu.DevicePtr
		if tc.bias {
			bias = randFloats(r, w, 0.5)
			dbias = g.floats(bias, 0)
		}
		cs := refRopeTable(tc.ctx, plainRope(max(tc.ropeDim, 2)))
		kc, vc := randFloats(r, tc.nKV*tc.ctx*tc.hd, 1), randFloats(r, tc.nKV*tc.ctx*tc.hd, 1)
		dkc, dvc := g.kv(kc), g.kv(vc)
		qd := tc.nHead * tc.hd
		dq := g.halves((tc.m + 1) * qd)
		g.settle()
		temp := tempTable(&tc.temp, tc.ctx)
		var dtemp cu.DevicePtr
		if temp != nil {
			dtemp = g.floats(temp, 0)
		}
		err := g.l.prefillRope(ropeArgs{qkv: g.floats(qkv, 0), bias: dbias, m: tc.m, pos0: tc.pos0, nHead: tc.nHead,
			nKV: tc.nKV, hd: tc.hd, ropeCS: g.floats(cs, 0), ropeDim: tc.ropeDim, neox: tc.neox, temp: dtemp, q: dq,
			kCache: dkc, vCache: dvc, ctxMax: tc.ctx})
		if err != nil {
			t.Fatal(err)
		}
		q, wantK, wantV := refPrefillRope(qkv, bias, tc.m, tc.nHead, tc.nKV, tc.hd, tc.ropeDim, tc.neox, cs, temp, tc.pos0, kc, vc, tc.ctx)
		gotQ := g.readHalves(dq, (tc.m+1)*qd)
		check(t, name+" q", gotQ[:tc.m*qd], q, f16OutTol)
		untouched(t, name+" q", gotQ[tc.m*qd:])
		gotK, gotV := g.readKV(dkc, len(kc)), g.readKV(dvc, len(vc))
		checkKV(t, name+" k cache", gotK, f64s(wantK))
		checkKV(t, name+" v cache", gotV, f64s(wantV))
		for i := range kc {
			p := i / tc.hd % tc.ctx
			if p >= tc.pos0 && p < tc.pos0+tc.m {
				continue
			}
			if math.Float32bits(gotK[i]) != math.Float32bits(kc[i]) || math.Float32bits(gotV[i]) != math.Float32bits(vc[i]) {
				t.Fatalf("%s: cache element %d (position %d) outside the written rows changed", name, i, p)
			}
		}
	}
}

// TestPrefillAttentionKernel runs causal attention for m tokens after a
// cached prefix of pos0, every supported head dimension and several query
// groupings, with NaN in the cache past the last position (it must never be
// read) and in the output (every element must be written).
func TestPrefillAttentionKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(15, 15))
	cases := []struct {
		hd, nHead, nKV, m, pos0 int
		window                  int     // sliding window (0: none)
		cap                     float32 // soft-cap (0: none)
	}{
		{16, 4, 2, 7, 0, 0, 0}, {16, 4, 2, 200, 37, 0, 0}, {32, 8, 1, 65, 0, 0, 0}, {64, 9, 3, 1, 0, 0, 0}, {64, 9, 3, 130, 0, 0, 0},
		{64, 9, 3, 100, 130, 0, 0}, {64, 4, 4, 64, 64, 0, 0}, {128, 4, 1, 70, 10, 0, 0}, {128, 2, 2, 33, 200, 0, 0},
		// Windows shorter than a tile, longer than one, past the prompt;
		// soft-caps with and without them.
		{32, 4, 2, 150, 20, 8, 0}, {64, 9, 3, 200, 100, 100, 1.5}, {128, 4, 1, 70, 300, 4096, 0}, {16, 4, 4, 90, 0, 0, 2},
		{64, 2, 1, 130, 0, 65, 0},
		// Phi-3's heads of 96 and Gemma 3's of 256 (tiles of 32 keys).
		{96, 4, 2, 70, 10, 0, 0}, {96, 8, 2, 130, 30, 16, 0}, {256, 4, 1, 50, 20, 0, 0}, {256, 2, 2, 100, 0, 40, 1.5},
		{256, 8, 4, 33, 70, 0, 0},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("hd%d/h%d/kv%d/m%d/pos%d/win%d/cap%v", tc.hd, tc.nHead, tc.nKV, tc.m, tc.pos0, tc.window, tc.cap)
		ctx := tc.pos0 + tc.m + 70
		kc, vc := randFloats(r, tc.nKV*ctx*tc.hd, 1), randFloats(r, tc.nKV*ctx*tc.hd, 1)
		for i := range kc {
			if i/tc.hd%ctx >= tc.pos0+tc.m {
				kc[i], vc[i] = float32(math.NaN()), float32(math.NaN())
			}
		}
		qd := tc.nHead * tc.hd
		q16, q := randHalves(r, tc.m*qd, 1)
		out := g.halves((tc.m + 1) * qd)
		scale := float32(1 / math.Sqrt(float64(tc.hd)))
		g.settle()
		err := g.l.prefillAttention(prefillAttnArgs{q: g.bytes(q16), m: tc.m, pos0: tc.pos0, kCache: g.kv(kc),
			vCache: g.kv(vc), ctxMax: ctx, nHead: tc.nHead, nKV: tc.nKV, hd: tc.hd, scale: scale, window: tc.window,
			softcap: tc.cap, out: out})
		if err != nil {
			t.Fatal(err)
		}
		got := g.readHalves(out, (tc.m+1)*qd)
		want := refPrefillAttention(q, kc, vc, tc.m, tc.pos0, tc.nHead, tc.nKV, tc.hd, ctx, tc.window, scale, tc.cap)
		check(t, name, got[:tc.m*qd], want, prefillAttnTol)
		untouched(t, name, got[tc.m*qd:])
	}
}

// TestPagedAttentionKernel runs prefill_attention_paged as a batched step
// does: segments of several sequences whose cache rows lie in shuffled
// blocks of one pool, against the float64 twin over each sequence's keys
// gathered in order; decode passes (a token a sequence) and one with a
// prompt, short and long contexts, windows and soft-caps.
func TestPagedAttentionKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(18, 18))
	const bs, blocks = 16, 96
	cases := []struct {
		hd, nHead, nKV int
		lens           []int // each segment's context: positions 0…len-1, the last one's token the query
		prompt         int   // a segment of that many query tokens too (0: a decode pass)
		window         int
		cap            float32
		promptAt       int // the prompt segment's first position (0: 10)
	}{
		{64, 32, 8, []int{130, 1, 17, 128, 64, 200, 3, 90}, 0, 0, 0, 0}, // Llama-1B's group
		{64, 9, 3, []int{5, 300, 129}, 0, 0, 0, 0},                      // SmolLM's
		{128, 8, 2, []int{40, 513}, 0, 0, 0, 0},
		{256, 4, 2, []int{33, 70}, 0, 0, 1.5, 0},
		{96, 8, 2, []int{100, 7}, 0, 16, 0, 0},
		{32, 4, 4, []int{600, 20}, 0, 300, 2, 0},
		{16, 4, 1, []int{9, 50}, 0, 0, 0, 0},
		{128, 16, 1, []int{60, 30}, 0, 0, 0, 0},  // a group of 16
		{64, 32, 8, []int{50, 100}, 20, 0, 0, 0}, // a prompt in the pass
		// Segments of at most 16 rows split their keys over the warps:
		// a short prompt among decodes, with and without a window, and
		// a long context (many tiles a warp).
		{64, 8, 2, []int{50, 100}, 3, 0, 0, 0},
		{64, 8, 2, []int{200, 45}, 4, 5, 0, 0},
		{128, 8, 2, []int{700, 16, 17}, 0, 0, 0, 0},
		{96, 12, 4, []int{1, 2, 33, 250}, 0, 40, 3, 0},
		// A short prompt across a 16-key tile: warp 1 takes keys 16-17,
		// which the rows of positions 14 and 15 do not see.
		{64, 8, 2, []int{50}, 4, 0, 0, 14},
		{64, 4, 4, []int{30, 9}, 8, 0, 0, 44},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("hd%d/h%d/kv%d/lens%v/prompt%d/win%d/cap%v", tc.hd, tc.nHead, tc.nKV, tc.lens, tc.prompt, tc.window, tc.cap)
		rows := blocks * bs
		kp, vp := randFloats(r, tc.nKV*rows*tc.hd, 1), randFloats(r, tc.nKV*rows*tc.hd, 1)
		perm := r.Perm(blocks)
		qd, group := tc.nHead*tc.hd, tc.nHead/tc.nKV
		var seg, tables []int32
		type segment struct{ t0, m, pos0, ctx int }
		var segs []segment
		tokens, used, maxRows := 0, 0, 0
		lens := tc.lens
		if tc.prompt > 0 {
			lens = append(slices.Clone(lens), 0)
		}
		for i, n := range lens {
			m, pos0 := 1, n-1
			if tc.prompt > 0 && i == len(lens)-1 {
				at := cmp.Or(tc.promptAt, 10)
				m, pos0, n = tc.prompt, at, at+tc.prompt
			}
			need := (n + bs - 1) / bs
			seg = append(seg, int32(tokens), int32(m), int32(pos0), int32(len(tables)))
			for j := range need {
				tables = append(tables, int32(perm[used+j]))
			}
			segs = append(segs, segment{tokens, m, pos0, n})
			used += need
			tokens += m
			maxRows = max(maxRows, m*group)
		}
		q16, q := randHalves(r, tokens*qd, 1)
		out := g.halves((tokens + 1) * qd)
		scale := float32(1 / math.Sqrt(float64(tc.hd)))
		g.settle()
		err := g.l.prefillAttentionPaged(pagedAttnArgs{q: g.bytes(q16), seg: g.int32s(seg...), segs: len(segs), maxRows: maxRows,
			tables: g.int32s(tables...), bs: bs, kCache: g.kv(kp), vCache: g.kv(vp), rows: rows,
			nHead: tc.nHead, nKV: tc.nKV, hd: tc.hd, scale: scale, window: tc.window, softcap: tc.cap, out: out})
		if err != nil {
			t.Fatal(err)
		}
		got := g.readHalves(out, (tokens+1)*qd)
		for si, sg := range segs {
			// The sequence's keys in order, for the twin.
			kc, vc := make([]float32, tc.nKV*sg.ctx*tc.hd), make([]float32, tc.nKV*sg.ctx*tc.hd)
			tab := tables[seg[4*si+3]:]
			for h := range tc.nKV {
				for p := range sg.ctx {
					row := int(tab[p/bs])*bs + p%bs
					copy(kc[(h*sg.ctx+p)*tc.hd:][:tc.hd], kp[(h*rows+row)*tc.hd:][:tc.hd])
					copy(vc[(h*sg.ctx+p)*tc.hd:][:tc.hd], vp[(h*rows+row)*tc.hd:][:tc.hd])
				}
			}
			want := refPrefillAttention(q[sg.t0*qd:(sg.t0+sg.m)*qd], kc, vc, sg.m, sg.pos0, tc.nHead, tc.nKV, tc.hd, sg.ctx,
				tc.window, scale, tc.cap)
			check(t, fmt.Sprintf("%s segment %d", name, si), got[sg.t0*qd:(sg.t0+sg.m)*qd], want, prefillAttnTol)
		}
		untouched(t, name, got[tokens*qd:])
	}
}

// TestPrefillQKNormKernel checks the Q/K norms of the batched prefill,
// per head and over the whole projection, with and without biases,
// against the twin: V and the rows past m untouched.
func TestPrefillQKNormKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(16, 16))
	for _, tc := range []struct {
		nHead, nKV, hd, m int
		full, bias        bool
	}{{4, 2, 32, 7, false, false}, {16, 8, 128, 130, false, true}, {4, 2, 32, 9, true, false}, {32, 8, 64, 40, true, true}} {
		name := fmt.Sprintf("h%d/kv%d/hd%d/m%d/full=%v/bias=%v", tc.nHead, tc.nKV, tc.hd, tc.m, tc.full, tc.bias)
		qd, kvd := tc.nHead*tc.hd, tc.nKV*tc.hd
		w := qd + 2*kvd
		qkv := randFloats(r, (tc.m+1)*w, 2)
		var bias []float32
		var dbias cu.DevicePtr
		if tc.bias {
			bias = randFloats(r, w, 0.5)
			dbias = g.floats(bias, 0)
		}
		qw, kw := randFloats(r, tc.hd, 1), randFloats(r, tc.hd, 1)
		qn, kn := tc.hd, tc.hd
		if tc.full {
			qw, kw, qn, kn = randFloats(r, qd, 1), randFloats(r, kvd, 1), qd, kvd
		}
		dqkv := g.floats(qkv, 0)
		g.settle()
		if err := g.l.prefillQKNorm(dqkv, tc.m, dbias, tc.nHead, tc.nKV, tc.hd, tc.full, g.floats(qw, 0), g.floats(kw, 0), 1e-5); err != nil {
			t.Fatal(err)
		}
		want := f64s(qkv)
		for i := 0; i < tc.m; i++ {
			row := want[i*w : (i+1)*w]
			for j := range qd + kvd {
				if bias != nil {
					row[j] += float64(bias[j])
				}
			}
			refNormGroups(row[:qd], qw, qn, 1e-5)
			refNormGroups(row[qd:qd+kvd], kw, kn, 1e-5)
		}
		check(t, name, g.read(dqkv, len(qkv)), want, f32Tol)
	}
}

// TestPrefillBranchKernel checks a branch joining the prefill's residual
// stream through its post-norm and the residual multiplier, or the
// multiplier alone.
func TestPrefillBranchKernel(t *testing.T) {
	g := newGPU(t)
	r := rand.New(rand.NewPCG(17, 17))
	for _, tc := range []struct {
		m, k int
		norm bool
		rs   float32
	}{{1, 64, true, 1}, {130, 576, true, 0.5}, {7, 100, false, 0.25}, {33, 2048, true, 1}} {
		name := fmt.Sprintf("m%d/k%d/norm=%v/rs%v", tc.m, tc.k, tc.norm, tc.rs)
		branch, x, w := randFloats(r, tc.m*tc.k, 2), randFloats(r, (tc.m+1)*tc.k, 1), randFloats(r, tc.k, 1)
		dw := g.floats(w, 0)
		want := f64s(branch)
		for i := 0; i < tc.m; i++ {
			if tc.norm {
				refNormGroups(want[i*tc.k:(i+1)*tc.k], w, tc.k, 1e-5)
			}
		}
		if !tc.norm {
			dw = 0
		}
		for i := range want {
			want[i] = want[i]*float64(tc.rs) + float64(x[i])
		}
		dx := g.floats(x, 0)
		g.settle()
		if err := g.l.prefillBranch(g.floats(branch, 0), dw, 1e-5, tc.rs, tc.m, tc.k, dx); err != nil {
			t.Fatal(err)
		}
		got := g.read(dx, (tc.m+1)*tc.k)
		check(t, name, got[:tc.m*tc.k], want, f32Tol)
		for i, v := range got[tc.m*tc.k:] {
			if v != x[tc.m*tc.k+i] {
				t.Fatalf("%s: element %d past the rows changed", name, tc.m*tc.k+i)
			}
		}
	}
}

// TestPrefillUnsupported checks the path choice without a GPU: the batched
// prefill needs a gemm for every projection's family (not F32) and an
// attention kernel for the head dimension.
func TestPrefillUnsupported(t *testing.T) {
	f := &cu.Function{}
	k := &kernelSet{}
	k.pre.attention = map[int]*cu.Function{64: f}
	for typ := range numGPUTypes {
		k.pre.embed[typ] = f
	}
	for _, typ := range gemmTypes {
		k.pre.gemm[typ][gemmStore][gemmSmall] = f
	}
	b := &Backend{k: k, cfg: model.Config{HeadDim: 64}, embd: deviceMatrix{Type: wtQ8_0}, layers: make([]layerWeights, 2)}
	for i := range b.layers {
		ly := &b.layers[i]
		for _, w := range []*deviceMatrix{&ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.gate, &ly.up, &ly.down} {
			w.Type = wtQ4_0
		}
	}
	b.layers[0].wo.Type = wtQ8_0
	b.layers[1].wv.Type = wtMix
	if why := b.prefillUnsupported(); why != "" {
		t.Errorf("Q4_0/Q8_0/mixed model refused: %s", why)
	}
	b.layers[1].down.Type = wtF32
	if why := b.prefillUnsupported(); !strings.Contains(why, "layer 1") {
		t.Errorf("F32 down projection: reason %q does not name layer 1", why)
	}
	b.layers[1].down.Type = wtF16
	b.layers[1].down.Cols = 172 // an F16 row need not be whole blocks
	if why := b.prefillUnsupported(); !strings.Contains(why, "172") {
		t.Errorf("F16 rows of 172: reason %q", why)
	}
	b.layers[1].down.Cols = 0
	b.layers[1].down.Type = wtQ8_0
	b.cfg.HeadDim = 80
	if why := b.prefillUnsupported(); !strings.Contains(why, "head dimension 80") {
		t.Errorf("head dimension 80: reason %q", why)
	}
}

// TestGemmTileFor checks the tile choice without a GPU on the H200's 132
// SMs: gemm.cu's tiles where wgmma's is not loaded (the measured cases in
// gemmTileFor's comment, 512 rows; sm_80 keeps the small tile), wgmma's
// where it is, the GLU epilogue counting units (two weight rows each),
// products of one small row tile, and a fixed tile overriding the choice.
func TestGemmTileFor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		m, n     int
		epi      gemmEpilogue
		want, wg int // without and with wgmma's tile
	}{
		{"8B QKV", 512, 6144, gemmStore, gemmLarge, gemmWG},
		{"8B O", 512, 4096, gemmAdd, gemmLarge, gemmWG},                  // 128 tiles: 7 SMs in 8
		{"8B gate/up", 512, 14336, gemmGLU, gemmLarge, gemmWG},           // 224 × 4 tiles
		{"1B QKV", 512, 3072, gemmStore, gemmSmall, gemmWG},              // 96 large tiles
		{"1B O", 512, 2048, gemmAdd, gemmSmall, gemmWG},                  // 64
		{"1B gate/up", 512, 8192, gemmGLU, gemmLarge, gemmWG},            // 128 × 4
		{"8B gate/up, 128 rows", 128, 14336, gemmGLU, gemmLarge, gemmWG}, // 224 × 1
		{"a batched step", 64, 14336, gemmGLU, gemmSmall, gemmSmall},
		{"one token", 1, 2048, gemmStore, gemmSmall, gemmSmall},        // 16 × 1
		{"SmolLM gate/up", 512, 1536, gemmGLU, gemmSmall, gemmWG},      // 24 × 4
		{"SmolLM QKV", 512, 960, gemmStore, gemmSmall, gemmSmall},      // 8 × 4
		{"SmolLM, 128 rows", 128, 1536, gemmGLU, gemmSmall, gemmSmall}, // 24 × 1
	} {
		l := &launcher{sms: 132, largeGemm: true}
		if got := l.gemmTileFor(tc.m, tc.n, 576, tc.epi); got != tc.want {
			t.Errorf("%s (m %d, n %d, %v): tile %d, want %d", tc.name, tc.m, tc.n, tc.epi, got, tc.want)
		}
		l.wgGemm = true
		if got := l.gemmTileFor(tc.m, tc.n, 576, tc.epi); got != tc.wg {
			t.Errorf("%s (m %d, n %d, %v), wgmma loaded: tile %d, want %d", tc.name, tc.m, tc.n, tc.epi, got, tc.wg)
		}
	}
	l := &launcher{sms: 132}
	if got := l.gemmTileFor(512, 14336, 4096, gemmGLU); got != gemmSmall {
		t.Errorf("large tile not allowed (sm_80): got %d", got)
	}
	l = &launcher{sms: 132, largeGemm: true, wgGemm: true, gemmTile: gemmSmall + 1}
	if got := l.gemmTileFor(512, 14336, 4096, gemmGLU); got != gemmSmall {
		t.Errorf("fixed small tile: got %d", got)
	}
	if got, want := gemmTiles[gemmLarge].smem(wtMix), (3*128+2*128)*72*2; got != want {
		t.Errorf("large tile's shared memory %d, want %d (gemm_tile::smem in gemm.cu)", got, want)
	}
	// wg_cfg in gemm_wg.cu: buffers of 128×128 bytes.
	for _, tc := range []struct {
		want int
		typ  gpuType
	}{
		{(6+3)*128*128 + 1024, wtMix},
		{(6+3)*128*128 + 1024, wtQ4_0},
		{(6+6)*128*128 + 1024, wtF16},
		{(6+6)*128*128 + 1024, wtBF16},
	} {
		if got := gemmTiles[gemmWG].smem(tc.typ); got != tc.want {
			t.Errorf("wgmma tile's shared memory for %s: %d, want %d", tc.typ.suffix(), got, tc.want)
		}
	}
	for _, tile := range gemmTiles {
		if got := tile.smemMax(); got > 227<<10 {
			t.Errorf("tile %s takes %d bytes of shared memory, past the 227 KB a block may have", tile.suffix, got)
		}
	}
}
