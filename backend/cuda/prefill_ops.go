package cuda

import (
	"fmt"

	"gotok/backend/cuda/cu"
	"gotok/model"
)

// The batched prefill's launches, one kernel each. Activations are
// row-major [m][width]: the residual stream f32, everything a gemm
// multiplies f16.

// Tile shapes of kernels/prefill_attention.cu.
const (
	attnTileRow = 64
	prefillWarp = 32
)

// gemmTile is one of the prefill gemm's block tiles: m×n of the product
// on threads, kernels named with suffix; wg: gemm_wg.cu's (wgmma, sm_90a),
// else gemm.cu's (gemm_tile).
type gemmTile struct {
	m, n, threads int
	suffix        string
	wg            bool
}

// gemmTiles are the tiles: gemm.cu's 64×64 on 4 warps and 128×128 on 8,
// in its order, then gemm_wg.cu's 128×128 on two warpgroups.
var gemmTiles = [...]gemmTile{{64, 64, 128, "", false}, {128, 128, 256, "_l", false}, {128, 128, 256, "_w", true}}

const (
	gemmSmall = 0 // index in gemmTiles
	gemmLarge = 1
	gemmWG    = 2
)

// smem is the tile's dynamic shared memory for typ's weights. gemm.cu:
// three activation and two weight stages of 64 halves a row, rows 72
// halves apart (GEMM_LD). gemm_wg.cu (wg_cfg): buffers of 128 rows of
// 128 bytes, and 1 KB to align them to 1,024 bytes (its swizzle): six for
// the activations (copied four stages ahead), as many for F16 and BF16
// weights (copied alongside), three for the other types' (dequantized).
func (t gemmTile) smem(typ gpuType) int {
	if !t.wg {
		return (3*t.m + 2*t.n) * 72 * 2
	}
	if typ == wtF16 || typ == wtBF16 {
		return (6+6)*128*128 + 1024
	}
	return (6+3)*128*128 + 1024
}

// smemMax is the most shared memory the tile's kernels take, of any type.
func (t gemmTile) smemMax() int { return max(t.smem(wtF16), t.smem(wtMix)) }

// tiles is the grid of an m×n product (n: hidden units for the GLU
// epilogue, whose tiles hold n/2 of them).
func (t gemmTile) tiles(m, n int, epi gemmEpilogue) (tm, tn int) {
	cols := t.n
	if epi == gemmGLU {
		cols /= 2
	}
	return (m + t.m - 1) / t.m, (n + cols - 1) / cols
}

// gemmTileFor picks the tile of an m×n product over rows of k: products
// of one small row tile (a batched decode step's, tuned with split-K) keep
// the small tile, where a large one would multiply rows of zeros. Past it,
// on 9.0 devices, wgmma's tile wherever its grid gives at least a block to
// 4 SMs or its k loop is long (k ≥ 2,048): at Llama-8B's shape it runs a
// product 1.1-2.4× faster than gemm.cu's large tile for every type
// measured, at Llama-1B's O (64 blocks for 132 SMs) 1.6× faster than the
// small tile's 256 (F16, 55.8 against 89.9 µs), and a 128-row Llama-8B
// prompt with O and down on 32 blocks of it ran at 73-77k tok/s against
// 46k with them on small tiles. At SmolLM-135M's width (k 576, nine
// stages) its QKV and O (32 and 20 blocks) are faster on the small tile:
// pp512 181k by this rule, 149k with every product on wgmma's
// (BENCHMARKS.md, 2026-11-27). Elsewhere gemm.cu's large tile where its
// grid gives at least 7 SMs in 8 a block, the small one otherwise: on the
// H200 at 512 rows, Llama-8B's O and down projections (128 large tiles
// for 132 SMs) ran 15-28% faster on large tiles, Llama-1B's QKV (96) 40%
// slower.
func (l *launcher) gemmTileFor(m, n, k int, epi gemmEpilogue) int {
	if l.gemmTile > 0 {
		return l.gemmTile - 1
	}
	if !l.largeGemm || m <= gemmTiles[gemmSmall].m {
		return gemmSmall
	}
	tm, tn := gemmTiles[gemmLarge].tiles(m, n, epi)
	switch {
	case l.wgGemm && (4*tm*tn >= l.sms || k >= 2048):
		return gemmWG
	case 8*tm*tn >= 7*l.sms:
		return gemmLarge
	}
	return gemmSmall
}

// prefillEmbed writes the embedding rows of m tokens (int32, device memory)
// times scale to x, f32 [m][cols].
func (l *launcher) prefillEmbed(tokens cu.DevicePtr, m int, w *deviceMatrix, scale float32, x cu.DevicePtr) error {
	return l.launch(l.k.pre.embed[w.Type], cu.Dim3{X: (w.Cols + 255) / 256, Y: m, Z: 1}, 256, 0,
		cu.Args{tokens, i32(m), w.Q, w.D, i32(w.Cols), scale, x})
}

// prefillNorm writes rmsnorm(x)·w rounded to f16 for m rows of k (w 0: x
// rounded).
func (l *launcher) prefillNorm(x, w cu.DevicePtr, eps float32, m, k int, out cu.DevicePtr) error {
	const rowsPerBlock = 4
	return l.launch(l.k.pre.norm, cu.Dim((m+rowsPerBlock-1)/rowsPerBlock), rowsPerBlock*prefillWarp, 0,
		cu.Args{x, w, eps, i32(m), i32(k), out})
}

// gemm multiplies the f16 activations a ([m][w.Cols]) by w's rows into out
// ([m][w.Rows]) as epi says.
func (l *launcher) gemm(a cu.DevicePtr, m int, w *deviceMatrix, epi gemmEpilogue, out cu.DevicePtr) error {
	return l.gemmInto(a, m, w, nil, 0, epi, out, w.Rows)
}

// gemmGLU writes act(a·gateᵀ)∘(a·upᵀ), f16 [m][gate.Rows], to out.
func (l *launcher) gemmGLU(a cu.DevicePtr, m int, gate, up *deviceMatrix, act model.Activation, out cu.DevicePtr) error {
	return l.gemmInto(a, m, gate, up, act, gemmGLU, out, gate.Rows)
}

// gemmInto is gemm writing rows ldo elements apart: out may be a column
// range of a wider matrix (Q, K and V multiplied apart into one output).
// For gemmGLU, w is the gate and w2 the up projection, act the gate's
// activation.
func (l *launcher) gemmInto(a cu.DevicePtr, m int, w, w2 *deviceMatrix, act model.Activation, epi gemmEpilogue, out cu.DevicePtr, ldo int) error {
	if w.Cols%32 != 0 {
		return fmt.Errorf("cuda: prefill gemm needs whole 32-element blocks, not rows of %d", w.Cols)
	}
	if epi == gemmGLU && (w2 == nil || w2.Type != w.Type || w2.Rows != w.Rows || w2.Cols != w.Cols) {
		return fmt.Errorf("cuda: prefill gate/up gemm needs two matrices of one type and shape")
	}
	ti := gemmSmall
	if !(l.splitK && epi == gemmAdd && m <= gemmTiles[gemmSmall].m) {
		ti = l.gemmTileFor(m, w.Rows, w.Cols, epi)
	}
	if gemmTiles[ti].wg && w.Type == wtBF16 {
		var err error
		if a, ti, err = l.bf16Activations(a, m, w.Cols); err != nil {
			return err
		}
	}
	tile := gemmTiles[ti]
	if l.dequantizes(m, w, epi) {
		if done, err := l.gemmDequantized(a, m, w, w2, act, epi, out, ldo); done || err != nil {
			return err
		}
	}
	f := l.k.pre.gemm[w.Type][epi][ti]
	if f == nil {
		return fmt.Errorf("cuda: no prefill gemm for %s weights", w.Type.suffix())
	}
	ms := []*deviceMatrix{w}
	q2, d2 := cu.DevicePtr(0), cu.DevicePtr(0)
	if w2 != nil {
		ms = append(ms, w2)
		q2, d2 = w2.Q, w2.D
	}
	f = l.typed(f, func(k *typedKernels) *cu.Function { return k.gemm[epi][ti] }, ms...)
	tilesM, tilesN := tile.tiles(m, w.Rows, epi)
	splits := 1
	if l.splitK && epi == gemmAdd && tilesM == 1 {
		// Enough blocks for two waves, each at least two k stages.
		stages := (w.Cols/32 + 1) / 2
		splits = max(1, min((2*l.sms+tilesN-1)/tilesN, stages/2))
	}
	if tilesN > 65535 {
		return fmt.Errorf("cuda: prefill gemm of %d rows: more than 65,535 tiles of %d", w.Rows, tile.n)
	}
	// Row tiles in x (gemm.cuh says why).
	return l.launch(f, cu.Dim3{X: tilesM, Y: tilesN, Z: splits}, tile.threads, tile.smem(w.Type),
		cu.Args{a, i32(m), i32(w.Cols), w.Q, w.D, q2, d2, i32(w.Rows), out, i32(ldo), i32(int(act))})
}

// ropeArgs are prefill_rope's operands: qkv is the store gemm's output.
type ropeArgs struct {
	qkv, bias cu.DevicePtr
	// biasFrom is the first head bias applies to (prefillQKNorm has added
	// Q's and K's when the model normalizes them).
	biasFrom       int
	m, pos0        int
	nHead, nKV, hd int
	ropeCS         cu.DevicePtr
	ropeDim        int // 0: no rotation
	neox           bool
	temp           cu.DevicePtr // tempTable (0: none)
	q              cu.DevicePtr // f16 [m][nHead*hd]
	kCache, vCache cu.DevicePtr
	ctxMax         int
	// posOf and rowOf, in a batched step, give each token's position and
	// cache row (int32 [m]); 0: token t is at position and row pos0+t.
	posOf, rowOf cu.DevicePtr
}

func (l *launcher) prefillRope(a ropeArgs) error {
	n := a.m * (a.nHead + 2*a.nKV) * a.hd / 2
	return l.launch(l.k.pre.rope, cu.Dim((n+255)/256), 256, 0, cu.Args{a.qkv, i32(a.m), a.bias, i32(a.biasFrom),
		i32(a.nHead), i32(a.nKV), i32(a.hd), a.ropeCS, i32(a.ropeDim), b32(a.neox), a.temp, i32(a.pos0),
		a.q, a.kCache, a.vCache, i32(a.ctxMax), a.posOf, a.rowOf})
}

// prefillQKNorm adds Q's and K's biases (bias set) to the stacked
// projection qkv of m tokens and RMS-normalizes them in place, per head or
// (full) over each whole projection.
func (l *launcher) prefillQKNorm(qkv cu.DevicePtr, m int, bias cu.DevicePtr, nHead, nKV, hd int, full bool, qw, kw cu.DevicePtr, eps float32) error {
	groups := nHead + nKV
	if full {
		groups = 2
	}
	const warps = 4
	return l.launch(l.k.pre.qkNorm, cu.Dim((m*groups+warps-1)/warps), 32*warps, 0,
		cu.Args{qkv, i32(m), bias, i32(nHead), i32(nKV), i32(hd), b32(full), qw, kw, eps})
}

// prefillBranch adds rs·rmsnorm(branch)·w (w 0: rs·branch) to x, m rows of
// k f32.
func (l *launcher) prefillBranch(branch, w cu.DevicePtr, eps, rs float32, m, k int, x cu.DevicePtr) error {
	const warps = 4
	return l.launch(l.k.pre.branch, cu.Dim((m+warps-1)/warps), 32*warps, 0, cu.Args{branch, w, eps, rs, i32(m), i32(k), x})
}

// prefillAttnArgs are prefill_attention's operands.
type prefillAttnArgs struct {
	q              cu.DevicePtr // f16 [m][nHead*hd]
	m, pos0        int
	kCache, vCache cu.DevicePtr
	ctxMax         int
	nHead, nKV, hd int
	scale          float32
	window         int          // sliding window (0: none)
	softcap        float32      // 0: none
	out            cu.DevicePtr // f16 [m][nHead*hd]
}

func (l *launcher) prefillAttention(a prefillAttnArgs) error {
	f := l.k.pre.attention[a.hd]
	if a.window > 0 || a.softcap != 0 {
		f = l.k.pre.attentionExt[a.hd]
	}
	if f == nil {
		return fmt.Errorf("cuda: no prefill attention for head dimension %d", a.hd)
	}
	rows := a.m * (a.nHead / a.nKV)
	return l.launch(f, cu.Dim3{X: (rows + attnTileRow - 1) / attnTileRow, Y: a.nKV, Z: 1}, 128, 0,
		cu.Args{a.q, i32(a.m), i32(a.pos0), a.kCache, a.vCache, i32(a.ctxMax), i32(a.nHead), i32(a.nKV), a.scale,
			i32(a.window), a.softcap, a.out})
}

// pagedAttnArgs are the paged prefill_attention's operands: a batched
// step's segments, each a run of one sequence's tokens (batch.go).
type pagedAttnArgs struct {
	q              cu.DevicePtr // f16 [m][nHead*hd]
	seg            cu.DevicePtr // int32 [segs][4]
	segs, maxRows  int          // maxRows: the most query rows (tokens × group) of a segment
	tables         cu.DevicePtr // int32 block tables
	bs             int
	kCache, vCache cu.DevicePtr
	rows           int // the caches' rows
	nHead, nKV, hd int
	scale          float32
	window         int
	softcap        float32
	out            cu.DevicePtr
}

// prefillAttentionPaged launches the paged attention on a batched step's
// segments. A pass with a segment of several tokens takes the EXT kernel
// even without a window or a soft-cap: a segment of 2 to 16/group tokens
// runs split_keys, where a row can see none of a warp's tiles (tokens at
// 14 and 15 against keys 16-17), and only the EXT kernels' softmax keeps
// such a row at -inf instead of NaN (exp2(-inf - -inf)). Decode-only
// passes (one token a segment: every tile a warp takes starts at or
// before the row's position) keep the plain kernel. To go at the next
// PTX rebuild, with the guard compiled into the split path itself.
func (l *launcher) prefillAttentionPaged(a pagedAttnArgs) error {
	f := l.k.pre.attentionPaged[a.hd]
	if a.window > 0 || a.softcap != 0 || a.hd <= 128 && a.maxRows > a.nHead/a.nKV { // heads past 128: no split path
		f = l.k.pre.attentionPagedExt[a.hd]
	}
	if f == nil {
		return fmt.Errorf("cuda: no paged attention for head dimension %d", a.hd)
	}
	return l.launch(f, cu.Dim3{X: (a.maxRows + attnTileRow - 1) / attnTileRow, Y: a.nKV, Z: a.segs}, 128, 0,
		cu.Args{a.q, a.seg, a.tables, i32(a.bs), a.kCache, a.vCache, i32(a.rows), i32(a.nHead), i32(a.nKV), a.scale,
			i32(a.window), a.softcap, a.out})
}
