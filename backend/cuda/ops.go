package cuda

import (
	"fmt"

	"gotok/backend/cuda/cu"
	"gotok/model"
)

// launcher enqueues the kernels on one stream. Each method is one kernel
// launch; the shapes (grids, shared memory) are decided here, in one place.
type launcher struct {
	c      *cu.Context
	k      *kernelSet
	stream cu.Stream
	pdl    bool // programmatic dependent launch (sm_90 PTX)
	sms    int
	count  int // launches enqueued, for the launches-per-token figure
	// warpsPerBlock of the QKV kernel (0: qkvWarps), the output head's
	// blocks per SM (0: logitsBlocksPerSM), the rows per warp of the QKV
	// kernel (0: layerRows) and of the output head (0: rowsPerWarp), the
	// FFN kernel's shape for quantized weights (zero: defaultFFNShape) and
	// the attention kernel's warps per head (0: attnWarps): tests sweep
	// them.
	warpsPerBlock, logitsPerSM int
	rows, logitsRows           int
	ffnShape, ffnMixShape      ffnShape
	attnWarpsPerHead           int
	// splitK lets a gemm with the add epilogue and one row tile split its
	// k loop over blocks (gemm.cu): the batched decode step's O and down
	// projections.
	splitK bool
	// gemmTile, when set, fixes the prefill gemm's tile to gemmTiles[gemmTile-1]
	// (0: gemmTileFor chooses by shape); tests and benchmarks sweep it.
	gemmTile int
	// largeGemm lets gemmTileFor choose the 128×128 tile: on sm_90, where
	// it was measured. (On sm_80's 164 KB of shared memory two of its
	// blocks do not fit an SM.)
	largeGemm bool
	// wgGemm lets gemmTileFor choose gemm_wg.cu's tile (wgmma), loaded on
	// 9.0 devices.
	wgGemm bool
	// dequant is scratch of dequantBytes for a product's weights as f16
	// rows (0: none): products of at least dequantMin rows on wgmma's tile
	// dequantize a quantized matrix there first and multiply it as F16
	// (prefill_dequant.go); dq, when set, writes a prefill chunk's copies
	// ahead on a side stream.
	dequant      cu.DevicePtr
	dequantBytes int
	dequantMin   int
	dq           *dequantAhead
	// bf16Act is scratch of bf16ActBytes for a product's activations as
	// bf16: gemm_wg multiplies BF16 weights by bf16 (prefill_bf16.go); a
	// product whose activations do not fit takes gemm.cu's large tile.
	bf16Act      cu.DevicePtr
	bf16ActBytes int
	// attnCluster is the blocks per cluster of the attention kernel for
	// contexts run whole (attention_cl; 0: the split kernel), set by
	// Backend.capture for the graph of short contexts.
	attnCluster int
	// logitsWide takes the head's wide kernels (logits_wide_*: each
	// lane's blocks of two rows loaded at once) for rows past 1,024
	// elements where its layout has one.
	logitsWide bool
	// headWindow, when set, keeps the output head's weights in L2 across
	// steps (an access policy window on its launches).
	headWindow *cu.L2Window
	// after, when set, runs after each launch (the profiler records an
	// event there).
	after func(f *cu.Function) error
	// keep, when set, drops the launches it returns false for (the
	// profiler times one kind of kernel at a time).
	keep func(f *cu.Function) bool
	// untyped runs matrices of one K-quant type with the wtMix kernels
	// instead of their typed family's (tests and benchmarks compare).
	untyped bool
}

// typed returns the kernel that pick chooses from the typed mixed family
// of ms (kernelSet.typed) when every matrix in ms is wtMix of one type
// that has one, and f otherwise.
func (l *launcher) typed(f *cu.Function, pick func(*typedKernels) *cu.Function, ms ...*deviceMatrix) *cu.Function {
	if l.untyped {
		return f
	}
	q := ms[0].Quant
	for _, m := range ms {
		if m.Type != wtMix || m.Quant != q {
			return f
		}
	}
	if tk := l.k.typed[q]; tk != nil && pick(tk) != nil {
		return pick(tk)
	}
	return f
}

// stagedBytes is the shared memory of a kernel that stages a k-element
// residual stream as float32: XS_AT in kernels/decode.cuh, a float4 of
// padding after every 32 floats.
func stagedBytes(k int) int { return 4 * (k + 4*((k+31)/32)) }

// stagedNormBytes is the shared memory of a kernel that stages the
// residual stream and, after it, the norm weights (norm_stage in
// kernels/decode.cuh; norm_offset rounds the first up to 16 bytes).
func stagedNormBytes(k int) int { return (stagedBytes(k)+15)&^15 + stagedBytes(k) }

// qkvWarps is the warps per block of the QKV kernel.
const qkvWarps = 4

func (l *launcher) warps() int {
	if l.warpsPerBlock > 0 {
		return l.warpsPerBlock
	}
	return qkvWarps
}

func (l *launcher) launch(f *cu.Function, grid cu.Dim3, block, shared int, args cu.Args) error {
	return l.launchClusters(f, grid, cu.Dim3{}, block, shared, args)
}

// launchClusters launches f with its blocks in clusters of shape cluster
// (zero: none).
func (l *launcher) launchClusters(f *cu.Function, grid, cluster cu.Dim3, block, shared int, args cu.Args) error {
	return l.launchWith(f, cu.Launch{Grid: grid, Block: cu.Dim(block), Shared: shared, Cluster: cluster}, args)
}

// launchWith launches f as lc says, on the launcher's stream and with its
// PDL setting.
func (l *launcher) launchWith(f *cu.Function, lc cu.Launch, args cu.Args) error {
	if l.keep != nil && !l.keep(f) {
		return nil
	}
	l.count++
	lc.Stream, lc.PDL = l.stream, l.pdl
	err := l.c.Launch(f, lc, args)
	if err == nil && l.after != nil {
		err = l.after(f)
	}
	return err
}

// rowsPerWarp mirrors mv_shape<T>::R in kernels/decode.cuh: the rows one
// warp of a matrix kernel takes at a time.
func rowsPerWarp(t gpuType) int {
	if t.quantized() {
		return 4
	}
	return 2
}

// layerRows is the rows per warp of the QKV kernel: two, the _r2 kernels.
// They run about one warp per scheduler, where time goes with the
// instructions per warp, so fewer rows per warp and more warps beat the
// four rows whose loads a warp would otherwise share (H200: -38 µs a token
// when every layer kernel had them).
const layerRows = 2

// warpBlocks is the grid for n warps' worth of work, at most limit blocks
// (0: no limit); grid-stride loops cover the rest.
func (l *launcher) warpBlocks(n, limit int) int {
	b := (n + l.warps() - 1) / l.warps()
	if limit > 0 && b > limit {
		b = limit
	}
	return max(b, 1)
}

func i32(v int) int32 { return int32(v) }

// embed writes row io[0] of m (dequantized, times scale) to the residual
// stream res (fixed point; poison is the step's poison word, set when io[0]
// is not a row), copies the position io[1] to pos and the nParams sampler
// words at io[ioParams] to params; io may be host-mapped memory.
func (l *launcher) embed(io, pos, params cu.DevicePtr, nParams int, m *deviceMatrix, scale float32, res, poison cu.DevicePtr) error {
	if nParams > embedMaxParams {
		return fmt.Errorf("cuda: %d sampler words, the embedding kernel copies at most %d", nParams, embedMaxParams)
	}
	return l.launch(l.k.embed[m.Type], cu.Dim(1), min(1024, max(64, (m.Cols+31)&^31)), 0,
		cu.Args{io, pos, params, i32(nParams), m.Q, m.D, i32(m.Rows), i32(m.Cols), scale, res, poison})
}

// embedMaxParams is EMBED_MAX_PARAMS in kernels/embed.cu.
const embedMaxParams = 32

// qkvArgs are the attention-input step's operands.
type qkvArgs struct {
	res        cu.DevicePtr // the residual stream, fixed point
	resNext    cu.DevicePtr // zeroed for the FFN's sum
	poison     cu.DevicePtr
	normW      cu.DevicePtr // 0: no pre-norm
	eps        float32
	wq, wk, wv *deviceMatrix // Q, K and V: one kernel family, rows of one length
	bias       cu.DevicePtr  // Q, K, V biases stacked, or 0
	nHead, nKV int
	headDim    int
	ropeCS     cu.DevicePtr // [ctx][ropeDim/2] (cos, sin)
	ropeDim    int          // 0: no rotation
	neox       bool
	temp       cu.DevicePtr // the queries' temperature by position (tempTable; 0: none)
	pos        cu.DevicePtr // int32
	q          cu.DevicePtr
	// kCache 0 stages the keys in f32 in q after the queries ([nHead+nKV]
	// rows of headDim), for qkNorm to normalize and write to the cache.
	kCache cu.DevicePtr
	vCache cu.DevicePtr
	ctxMax int
	// x8, when set (actF32Words(cols) words), takes the activations as
	// act_q8's int8 blocks where the kernel multiplies int8 ones: act_q8
	// runs first, and the kernel stages nothing. With xf set, F16 and
	// BF16 weights take act_f32's float row there instead.
	x8 cu.DevicePtr
	// post, when set, is the previous branch's post-norm, which joins the
	// stream res before the kernel reads it (launcher.actQ8).
	post *postArgs
	// xf, with x8 set, has F16 and BF16 weights take act_f32's row in x8
	// (qkv_rope_xf_*) instead of staging their input.
	xf bool
}

// postArgs is a post-normed branch waiting to join the residual stream:
// the stream becomes base + rs·rmsnorm(branch)·w (w 0: rs·branch), and
// clear, when set, is zeroed (the other branch buffer: recordStep). base
// must have been written two or more launches before: act_q8_post reads
// it before its PDL wait.
type postArgs struct {
	branch, base, w cu.DevicePtr
	eps, rs         float32
	clear, poison   cu.DevicePtr
}

func (l *launcher) qkvRope(a qkvArgs) error {
	t := a.wq.Type
	if a.wk.Type != t || a.wv.Type != t || a.wk.Cols != a.wq.Cols || a.wv.Cols != a.wq.Cols {
		return fmt.Errorf("cuda: the QKV kernel needs Q, K and V of one kernel family and row length (%s, %s, %s)",
			a.wq.Type.suffix(), a.wk.Type.suffix(), a.wv.Type.suffix())
	}
	pairs := (a.nHead + 2*a.nKV) * a.headDim / 2
	if f := l.k.qkvXF[t]; f != nil && a.xf && a.x8 != 0 {
		if err := l.actF32(a.x8, a.res, a.normW, a.wq.Cols, a.post); err != nil {
			return err
		}
		return l.launch(f, cu.Dim(pairs), 32*qkvXFWarps, 0, cu.Args{
			a.x8, a.resNext, a.poison, b32(a.normW != 0), a.eps, i32(a.wq.Cols), a.wq.Q, a.wk.Q, a.wv.Q, a.bias,
			i32(a.nHead), i32(a.nKV), i32(a.headDim), a.ropeCS, i32(a.ropeDim), b32(a.neox), a.temp, a.pos, a.q,
			a.kCache, a.vCache, i32(a.ctxMax)})
	}
	f, r := l.qkvKernel(a)
	perWarp := r / 2 // pairs of rows
	x8, shared, err := l.actQ8(f, a.x8, a.res, a.normW, a.wq.Cols, stagedNormBytes(a.wq.Cols), a.post)
	if err != nil {
		return err
	}
	return l.launch(f, cu.Dim(l.warpBlocks((pairs+perWarp-1)/perWarp, 0)), 32*l.warps(), shared, cu.Args{
		a.res, a.resNext, a.poison, a.normW, a.eps, i32(a.wq.Cols), a.wq.Q, a.wq.D, a.wk.Q, a.wk.D, a.wv.Q, a.wv.D, a.bias,
		i32(a.nHead), i32(a.nKV), i32(a.headDim), a.ropeCS, i32(a.ropeDim), b32(a.neox), a.temp, a.pos, a.q,
		a.kCache, a.vCache, i32(a.ctxMax), x8})
}

// act8Words is the 4-byte words of act_q8's output for k activations:
// 12 a 32-element block (xblk8) and its Σ x² (kernels/act_q8.cu).
func act8Words(k int) int { return 13 * ((k + 31) / 32) }

// qkvXFWarps is the warps a block of qkv_rope_xf, a rotation pair
// (kernels/qkv_rope.cu's QKV_XF_WARPS).
const qkvXFWarps = 4

// actF32Words is the 4-byte words of act_f32's output for k activations:
// the normed row padded to whole 32-element blocks and each block's Σ x²
// (kernels/act_f32.cu). It is more than act8Words: the engine's one
// buffer takes either.
func actF32Words(k int) int { return 33 * ((k + 31) / 32) }

// actF32 launches act_f32 on the residual stream res with the norm's
// weights normW (0: none) into xf, after a waiting post-norm (post, when
// set) has joined res (postnorm's kernel).
func (l *launcher) actF32(xf, res, normW cu.DevicePtr, k int, post *postArgs) error {
	if post != nil {
		if err := l.join(post, res, k); err != nil {
			return err
		}
	}
	const warps = 8 // a warp a block of 32 (__launch_bounds__(256))
	nb := (k + 31) / 32
	return l.launch(l.k.actF32, cu.Dim((nb+warps-1)/warps), 32*warps, 0, cu.Args{res, normW, i32(k), xf})
}

// actQ8 launches act_q8 on the residual stream res with the norm's
// weights normW (0: none) into x8 when x8 is set and kernel f multiplies
// int8 activations, and returns what f then takes: x8 and no shared
// memory. Otherwise f stages its input itself: 0 and staged bytes. A
// waiting post-norm (post, when set) joins res first: in act_q8_post,
// one kernel with act_q8, or else in postnorm's.
func (l *launcher) actQ8(f *cu.Function, x8, res, normW cu.DevicePtr, k, staged int, post *postArgs) (cu.DevicePtr, int, error) {
	if x8 == 0 || !l.k.readsX8(f) {
		if post != nil {
			if err := l.join(post, res, k); err != nil {
				return 0, 0, err
			}
		}
		return 0, staged, nil
	}
	if k%32 != 0 {
		return 0, 0, fmt.Errorf("cuda: int8 activations of %d elements, not whole 32-element blocks", k)
	}
	if post != nil {
		// Blocks of 1024 threads, as postnorm's one (the same sum).
		err := l.launch(l.k.actQ8Post, cu.Dim((k/32+31)/32), 1024, 0, cu.Args{
			post.branch, post.base, res, post.w, post.eps, post.rs, post.clear, normW, i32(k), x8, post.poison})
		return x8, 0, err
	}
	const warps = 8 // a warp a block of 32 (__launch_bounds__(256))
	err := l.launch(l.k.actQ8, cu.Dim((k/32+warps-1)/warps), 32*warps, 0, cu.Args{res, normW, i32(k), x8})
	return x8, 0, err
}

// qkvKernel is the qkv_rope kernel for a's matrices (one kernel family)
// and its rows a warp.
func (l *launcher) qkvKernel(a qkvArgs) (*cu.Function, int) {
	t := a.wq.Type
	r, f := 2, l.k.qkvRope2[t] // l.rows 0 (layerRows), 1 or 2
	if l.rows > 2 {
		r, f = rowsPerWarp(t), l.k.qkvRope[t]
	}
	ext := a.normW == 0 || a.temp != 0
	if ext {
		// The block's variations: the ext kernels (the plain ones have
		// none of their code).
		f = l.k.qkvRopeExt2[t]
		if r > 2 {
			f = l.k.qkvRopeExt[t]
		}
	}
	if r == 2 {
		f = l.typed(f, func(k *typedKernels) *cu.Function {
			if ext {
				return k.qkvRopeExt2
			}
			return k.qkvRope2
		}, a.wq, a.wk, a.wv)
		if fv := l.qkvV(a, ext); fv != nil {
			f = fv
		}
	}
	return f, r
}

// qkvV is the typed family's QKV kernel for V of another type
// (typedKernels.qkvV) when a's Q and K are of one typed family, V of a
// type the family pairs with, and a takes act_q8's activations; nil
// otherwise. The kernel needs a warp for every pair of rows (qkvRope's
// grid: no limit on the blocks).
func (l *launcher) qkvV(a qkvArgs, ext bool) *cu.Function {
	q := a.wq.Quant
	if l.untyped || a.x8 == 0 || a.wq.Type != wtMix || a.wk.Type != wtMix || a.wk.Quant != q || a.wv.Type != wtMix {
		return nil
	}
	tk := l.k.typed[q]
	if tk == nil {
		return nil
	}
	fs, ok := tk.qkvV[a.wv.Quant]
	if !ok {
		return nil
	}
	if ext {
		return fs[1]
	}
	return fs[0]
}

// tempTable is model.Block's attention temperature of every position
// below ctx, as the kernels read it (nil: the block has none).
func tempTable(b *model.Block, ctx int) []float32 {
	if b.AttnTempScale == 0 {
		return nil
	}
	t := make([]float32, ctx)
	for p := range t {
		t[p] = b.AttnTemp(p)
	}
	return t
}

// qkNormArgs are qk_norm's operands: the queries in q and the keys in the
// cache rows at the step's position, written by qkv_rope unrotated.
type qkNormArgs struct {
	q, kCache  cu.DevicePtr
	pos        cu.DevicePtr
	ctxMax     int
	nHead, nKV int
	headDim    int
	full       bool         // one norm over the whole projection (else one a head)
	qw, kw     cu.DevicePtr // the gains
	eps        float32
	ropeCS     cu.DevicePtr
	ropeDim    int
	neox       bool
	temp       cu.DevicePtr
}

// qkNorm launches a block a norm group: per head, a thread a rotation pair
// (at least a warp); over the whole projection, 1024.
func (l *launcher) qkNorm(a qkNormArgs) error {
	groups, threads := a.nHead+a.nKV, min(1024, max(32, (a.headDim/2+31)&^31))
	if a.full {
		groups, threads = 2, 1024
	}
	return l.launch(l.k.qkNorm, cu.Dim(groups), threads, 0, cu.Args{
		a.q, a.kCache, a.pos, i32(a.ctxMax), i32(a.nHead), i32(a.nKV), i32(a.headDim), b32(a.full), a.qw, a.kw, a.eps,
		a.ropeCS, i32(a.ropeDim), b32(a.neox), a.temp})
}

// join has postnorm's kernel add p's branch, normed, to p.base into out
// (k elements), zeroing the branch and p.clear.
func (l *launcher) join(p *postArgs, out cu.DevicePtr, k int) error {
	return l.postnorm(p.branch, p.base, out, p.w, p.eps, p.rs, k, p.poison, p.clear)
}

// b32 is a kernel's int flag.
func b32(v bool) int32 {
	if v {
		return 1
	}
	return 0
}

// postnorm sets out = base + rs·rmsnorm(branch)·w (w 0: rs·branch), all
// fixed point, and zeroes branch (and clear, when set): a post-normed branch joining the
// residual stream (kernels/postnorm.cu).
func (l *launcher) postnorm(branch, base, out, w cu.DevicePtr, eps, rs float32, k int, poison, clear cu.DevicePtr) error {
	return l.launch(l.k.postnorm, cu.Dim(1), 1024, 0, cu.Args{branch, base, out, w, eps, rs, i32(k), poison, clear})
}

// The attention kernel's shape: ATT_SPLITS in kernels/attention.cu, the
// query heads per block and the warps per head.
const (
	attSplits   = 32
	attMaxGroup = 8
	attMaxWarps = 16 // per block: __launch_bounds__(512)
	attMaxNQ    = 4  // attention_1 … attention_4
	// attSingle is the longest context attention takes in one split per
	// head group, with no merge; past it attMinChunk is the fewest
	// positions a split takes.
	attSingle   = 128
	attMinChunk = 32
	// attOBlocks is the blocks of a head group that compute a one-split
	// context whole, each then taking its share of the output
	// projection's rows.
	attOBlocks = 16
	// attWarpsLong is the warps per head for contexts past attSingle
	// (Backend.capture).
	attWarpsLong = 2
	// attCluster is the blocks per thread-block cluster that split a
	// context of up to attSingle positions (attention_cl, sm_90+); at
	// most attMaxCluster, the portable cluster size. H200, µs a token
	// @100 with 16 blocks a head group: clusters of 2 472, 4 426, 8 438
	// (2: a chunk of 51 positions takes a second load round after the
	// wait); the split kernel 466.
	attCluster    = 4
	attMaxCluster = 8
	// attMidSingle is the longest context run on clusters of
	// attMidCluster blocks, past attSingle (Backend.capture). H200, µs a
	// token at positions 200 / 400 / 600 / 800 (sweepSingle): the split
	// kernel 483 / 497 / 506 / 499; clusters of 8 up to 1024 379 / 421 /
	// 453 / 498; clusters of 4 up to 512 407 / 481 / (split) 506. Up to
	// 1024 would be faster at 513-800, but there attention_cl gave wrong
	// logits for a model of 4 heads on 1 KV head at 600 positions
	// (TestPrefillMatchesSteps, relative error 1.28): not understood yet,
	// see NOTES.md.
	attMidSingle  = 512
	attMidCluster = 8
)

// attnArgs are the attention step's operands.
type attnArgs struct {
	q, kCache, vCache cu.DevicePtr
	ctxMax, headDim   int
	nHead, nKV        int
	pos               cu.DevicePtr
	scale             float32
	window            int          // a sliding window of this many positions (0: all)
	softcap           float32      // the scores' soft-cap (0: none)
	rs                float32      // the residual multiplier of the projection
	single            int          // contexts up to this long take one split (attSingle)
	minChunk          int          // attMinChunk; tests vary it
	splits            int          // a context past single takes this many splits, at most attSplits (0: attSplits)
	oBlocks           int          // attOBlocks
	noSpin            bool         // merge split contexts in the last block, as when the grid does not fit the GPU
	cluster           int          // >1: attention_cl, oBlocks (rounded up) in clusters of this many; 0: the split kernel
	partAcc, partML   cu.DevicePtr // attnPartials floats each
	tickets           cu.DevicePtr // 2·nHead zeroed uint32
	wo                *deviceMatrix
	res, poison       cu.DevicePtr // W_o·attention is added to the residual stream res
	// heads, when set (nHead·headDim floats), takes the heads' outputs,
	// and matvec_add projects them: on wide models the few blocks a head
	// group has would each project thousands of W_o's rows.
	heads cu.DevicePtr
	// heads8, when set with heads (h8Words(nHead·headDim) words), takes
	// them as int8 blocks for matvec_add8, where W_o's layout has one.
	heads8 cu.DevicePtr
}

// attnGroup is the query heads one attention block takes: the largest
// divisor of the heads per KV head that is at most attMaxGroup.
func attnGroup(nHead, nKV int) int {
	per := nHead / nKV
	for g := min(per, attMaxGroup); g > 1; g-- {
		if per%g == 0 {
			return g
		}
	}
	return 1
}

// attnLanes is how the attention kernel spreads a head over a warp: lanes
// (a power of two up to 32) share a position, each with nq float4s of it;
// two float4s a lane when the dimension allows (a row of 64 is 8 lanes, 4
// positions a warp), else one, three or four.
func attnLanes(headDim int) (lanes, nq int, ok bool) {
	if headDim <= 0 || headDim%4 != 0 {
		return 0, 0, false
	}
	d4 := headDim / 4
	for _, nq := range []int{2, 1, 3, 4} {
		if l := d4 / nq; d4%nq == 0 && l <= 32 && l&(l-1) == 0 {
			return l, nq, true
		}
	}
	return 0, 0, false
}

// attnSplitsFor is the splits of a long context for a model of nHead
// query heads on nKV KV heads on sms SMs: as many as put one block of
// every head group's splits on the SMs at once (the attention kernel takes
// a whole SM's registers a block), at most attSplits. A second wave of
// blocks would take as long again as the first. H200, Llama-8B shape
// (8 head groups, 4 layers, Q4_0), µs a token at 2148 / 4000 positions:
// 32 splits 450.5 / 459.8, 24 456.2 / 485.3, 16 (this rule) 431.5 /
// 450.9, 12 431.6 / 470.6; the attention kernel alone at 4000, 21.5 µs a
// layer, where 32 splits of 4 positions a round took 24.0.
func attnSplitsFor(nHead, nKV, sms int) int {
	return max(1, min(attSplits, sms/(nHead/attnGroup(nHead, nKV))))
}

// attnWarps is the warps per query head in an attention block of g heads.
func attnWarps(g int) int { return min(4, attMaxWarps/g) }

// attnPartials is the floats of partAcc and partML the kernel needs.
func attnPartials(nHead, headDim int) (acc, ml int) {
	return nHead * attSplits * headDim, 2 * nHead * attSplits
}

// attnShared is the attention kernel's shared memory for blocks of g heads
// of headDim in threads: the warps' states to combine, or the merge's
// weights and sums, then the heads' outputs (padded as stagedBytes).
func attnShared(g, w, headDim, threads int) int {
	return 4*max(g*w*(headDim+4), g*attSplits+4*max(threads, g*headDim/4)) + stagedBytes(g*headDim)
}

// attnClusterShared is attention_cl's shared memory: the warps' states,
// the cluster's blocks' states, the heads' outputs (padded).
func attnClusterShared(g, w, headDim, cluster int) int {
	return 4*(g*w+g*cluster)*(headDim+4) + stagedBytes(g*headDim)
}

func (l *launcher) attention(a attnArgs) error {
	lanes, nq, ok := attnLanes(a.headDim)
	if !ok {
		return fmt.Errorf("cuda: no attention kernel for head dimension %d", a.headDim)
	}
	if a.wo.Cols != a.nHead*a.headDim {
		return fmt.Errorf("cuda: output projection of %d columns for %d heads of %d", a.wo.Cols, a.nHead, a.headDim)
	}
	g := attnGroup(a.nHead, a.nKV)
	w := attnWarps(g)
	if l.attnWarpsPerHead > 0 {
		w = min(l.attnWarpsPerHead, attMaxWarps/g)
	}
	threads := 32 * g * w
	shared := attnShared(g, w, a.headDim, threads)
	if shared > 48<<10 {
		return fmt.Errorf("cuda: attention of %d heads of %d needs %d bytes of shared memory, more than 48 KiB", g, a.headDim, shared)
	}
	oBlocks := a.oBlocks
	if oBlocks <= 0 {
		oBlocks = attOBlocks
	}
	if c := a.cluster; c > 1 && c <= attMaxCluster && l.c.Info.Major >= 9 && attnClusterShared(g, w, a.headDim, c) <= 48<<10 {
		// Whole contexts on clusters: oBlocks blocks a group, rounded up
		// to whole clusters.
		blocks := (oBlocks + c - 1) / c * c
		if a.heads != 0 {
			blocks = c
		}
		f := l.k.attentionCluster[a.wo.Type][nq]
		if a.softcap != 0 {
			f = l.k.attentionClusterCap[a.wo.Type][nq]
		}
		err := l.launchClusters(f, cu.Dim3{X: a.nHead / g, Y: blocks, Z: 1},
			cu.Dim3{X: 1, Y: c, Z: 1}, threads, attnClusterShared(g, w, a.headDim, c), cu.Args{
				a.q, a.kCache, a.vCache, i32(a.ctxMax), i32(a.headDim), i32(a.nHead), i32(a.nKV), i32(g), i32(w), i32(lanes),
				a.pos, a.scale, i32(a.window), a.softcap, a.wo.Q, a.wo.D, i32(a.wo.Rows), a.rs, a.res, a.poison, a.heads})
		return l.projectHeads(a, err)
	}
	oBlocks = min(oBlocks, attSplits)
	splits := attSplits
	if a.splits > 0 {
		splits = min(a.splits, attSplits)
	}
	// The splits of a long context wait for each other only when every
	// block of the grid, those past the splits too, can be resident at
	// once (one a SM).
	spin := int32(0)
	if !a.noSpin && a.heads == 0 && a.nHead/g*attSplits <= l.sms {
		spin = 1
	}
	if a.heads != 0 {
		oBlocks = 1
	}
	f := l.k.attention[a.wo.Type][nq]
	if a.softcap != 0 {
		f = l.k.attentionCap[a.wo.Type][nq]
	}
	err := l.launch(f, cu.Dim3{X: a.nHead / g, Y: attSplits, Z: 1}, threads, shared, cu.Args{
		a.q, a.kCache, a.vCache, i32(a.ctxMax), i32(a.headDim), i32(a.nHead), i32(a.nKV), i32(g), i32(w), i32(lanes),
		a.pos, a.scale, i32(a.window), a.softcap, i32(a.single), i32(a.minChunk), i32(splits), i32(oBlocks), spin, a.partAcc, a.partML,
		a.tickets, a.wo.Q, a.wo.D, i32(a.wo.Rows), a.rs, a.res, a.poison, a.heads})
	return l.projectHeads(a, err)
}

// projectHeads adds W_o times the heads' outputs to the residual stream
// when the attention kernel left them in a.heads (err: the attention's
// launch).
func (l *launcher) projectHeads(a attnArgs, err error) error {
	if err != nil || a.heads == 0 {
		return err
	}
	if f := l.headsInt8(a); f != nil {
		const warps = 8 // q8_row: a warp a block of 32, blocks of 256 threads
		nb := a.wo.Cols / 32
		if err := l.launch(l.k.q8Row, cu.Dim((nb+warps-1)/warps), 32*warps, 0, cu.Args{a.heads, i32(a.wo.Cols), a.heads8}); err != nil {
			return err
		}
		return l.matvecAddWith(f, a.heads8, a.wo, a.rs, 0, a.res, a.poison)
	}
	return l.matvecAdd(a.heads, a.wo, a.rs, 0, a.res, a.poison)
}

// headsInt8 is W_o's matvec_add8 when a asks for int8 heads (heads8),
// their row is whole 32-element blocks and W_o's family has one; nil
// otherwise.
func (l *launcher) headsInt8(a attnArgs) *cu.Function {
	if a.heads8 == 0 || a.wo.Cols%32 != 0 {
		return nil
	}
	return l.typed(l.k.matvecAdd8[a.wo.Type], func(k *typedKernels) *cu.Function { return k.matvecAdd8 }, a.wo)
}

// ffnShape is the FFN kernel's split: units hidden units a block, perWarp
// a warp (kernels/ffn.cu's U and UW).
type ffnShape struct{ units, perWarp int }

// ffnShapes are the compiled shapes for quantized weights, in the order of
// kernelSet.ffn; F16/F32 weights have only the first.
var ffnShapes = [...]ffnShape{{16, 1}, {16, 2}, {32, 2}, {32, 4}}

// defaultFFNShape: 16 units a block (96 blocks for SmolLM's 1536), one a
// warp (16 warps). Each block adds a whole row of the model width to the
// residual stream with atomics, so fewer blocks add fewer, but more blocks
// spread the gate/up work over more SMs (H200, µs a token @100 / @2148:
// u16w1 492 / 618, u32w2 501 / 635, u16w2 507 / 644, u32w4 524 / 686).
var defaultFFNShape = ffnShape{16, 1}

// ffnMinUnits is the fewest units a block of any shape takes: the engine's
// bound on the FFN's addends per residual element.
const ffnMinUnits = 16

// ffnKernel picks the FFN kernel for weights of type t.
func (l *launcher) ffnKernel(t gpuType) (ffnShape, *cu.Function, error) {
	want := l.ffnShape
	if t == wtMix {
		want = l.ffnMixShape // zero: defaultFFNShape, below
	}
	switch {
	case !t.quantized():
		want = ffnShapes[0]
	case want == (ffnShape{}):
		want = defaultFFNShape
	}
	for i, s := range ffnShapes {
		if s == want && l.k.ffn[t][i] != nil {
			return s, l.k.ffn[t][i], nil
		}
	}
	return want, nil, fmt.Errorf("cuda: no FFN kernel for %s weights with %d units a block, %d a warp", t.suffix(), want.units, want.perWarp)
}

// ffnPick is the FFN kernel for a's matrices and its shape: the tuned
// shape's, or the typed family's when what it reads shares a type.
func (l *launcher) ffnPick(a ffnArgs) (ffnShape, *cu.Function, error) {
	s, f, err := l.ffnKernel(a.gate.Type)
	if err == nil && s == ffnShapes[0] {
		// Gate and up, and down unless matvec_add projects it (split).
		ms := []*deviceMatrix{a.gate, a.up, a.down}
		if a.h != 0 {
			ms = ms[:2]
		}
		f = l.typed(f, func(k *typedKernels) *cu.Function { return k.ffn }, ms...)
	}
	return s, f, err
}

// ffnArgs are the feed-forward step's operands.
type ffnArgs struct {
	res, out, poison cu.DevicePtr // out = res + FFN(res), fixed point; out must be zero
	// noCarry leaves res out of out: a post-normed branch's own buffer.
	noCarry bool
	// h, when set, splits the FFN in two kernels: gate/up write the hidden
	// units there (float32, gate.Rows), matvec_add adds down·h.
	h cu.DevicePtr
	// h8, when set with h, takes the hidden units as int8 blocks
	// (h8Words(gate.Rows), zeroed once) where the gate/up kernel
	// multiplies int8 activations and down has an int8 matvec_add
	// (ffnInt8Down), which then reads them instead of h.
	h8 cu.DevicePtr
	// x8 as in qkvArgs: act_q8's int8 activations for the gate/up kernel,
	// when split (h set), or act_f32's float row for F16 and BF16 (glu).
	// The fused kernel stages its input still: with act_q8 it was slower
	// (Llama-8B shape, Q8_0: 98 → 119 µs a layer).
	x8 cu.DevicePtr
	// post as in qkvArgs: the attention's post-norm, joining res first.
	post           *postArgs
	normW          cu.DevicePtr // 0: no pre-norm
	eps            float32
	gate, up, down *deviceMatrix
	act            model.Activation
	rs             float32 // the residual multiplier of the product
}

// ffn adds res (unless noCarry) and rs·W_down·(act(gate·n)·(up·n)),
// n = rmsnorm(res)·normW, to out.
func (l *launcher) ffn(a ffnArgs) error {
	g, u, d := a.gate, a.up, a.down
	if g.Type != u.Type || g.Type != d.Type || g.Rows != u.Rows || g.Cols != u.Cols || d.Rows != g.Cols || d.Cols != g.Rows {
		return fmt.Errorf("cuda: FFN of gate %s %d×%d, up %s %d×%d, down %s %d×%d: the fused kernel needs one type and matching shapes",
			g.Type.suffix(), g.Rows, g.Cols, u.Type.suffix(), u.Rows, u.Cols, d.Type.suffix(), d.Rows, d.Cols)
	}
	if glu := l.k.glu[g.Type]; glu != nil && a.h != 0 && a.x8 != 0 {
		return l.ffnGLU(a, glu)
	}
	s, f, err := l.ffnPick(a)
	if err != nil {
		return err
	}
	down8 := l.ffnInt8Down(a, f)
	h8 := cu.DevicePtr(0)
	if down8 != nil {
		h8 = a.h8
	}
	x8 := a.x8
	if a.h == 0 {
		x8 = 0 // the fused kernel stages (ffnArgs.x8)
	}
	x8, shared, err := l.actQ8(f, x8, a.res, a.normW, g.Cols, stagedNormBytes(g.Cols), a.post)
	if err != nil {
		return err
	}
	err = l.launch(f, cu.Dim((g.Rows+s.units-1)/s.units), 32*s.units/s.perWarp, shared, cu.Args{
		a.res, a.out, a.poison, a.normW, a.eps, i32(g.Cols), g.Q, g.D, u.Q, u.D, i32(g.Rows), d.Q, d.D, i32(int(a.act)), a.rs,
		b32(!a.noCarry), a.h, h8, x8})
	if err != nil || a.h == 0 {
		return err
	}
	carry := a.res
	if a.noCarry {
		carry = 0
	}
	if down8 != nil {
		return l.matvecAddWith(down8, h8, d, a.rs, carry, a.out, a.poison)
	}
	return l.matvecAdd(a.h, d, a.rs, carry, a.out, a.poison)
}

// gluWarps is the warps a block of glu, a hidden unit (kernels/glu.cu's
// GLU_WARPS).
const gluWarps = 4

// ffnGLU is the split FFN for F16 and BF16 rows (glu, the gate/up kernel):
// act_f32 into a.x8, the hidden units into a.h, then matvec_add.
func (l *launcher) ffnGLU(a ffnArgs, glu *cu.Function) error {
	g := a.gate
	if err := l.actF32(a.x8, a.res, a.normW, g.Cols, a.post); err != nil {
		return err
	}
	err := l.launch(glu, cu.Dim(g.Rows), 32*gluWarps, 0, cu.Args{
		a.x8, i32(g.Cols), g.Q, a.up.Q, i32(g.Rows), i32(int(a.act)), b32(a.normW != 0), a.eps, a.poison, a.h})
	if err != nil {
		return err
	}
	carry := a.res
	if a.noCarry {
		carry = 0
	}
	return l.matvecAdd(a.h, a.down, a.rs, carry, a.out, a.poison)
}

// ffnInt8Down is the split FFN's int8 down projection (matvec_add8) when
// a asks for one (h and h8 set), its gate/up kernel f writes int8 hidden
// units (those of the int8 layouts do, staged or not) and down's family
// has one; nil otherwise.
func (l *launcher) ffnInt8Down(a ffnArgs, f *cu.Function) *cu.Function {
	if a.h == 0 || a.h8 == 0 || !l.k.readsX8(f) {
		return nil
	}
	return l.typed(l.k.matvecAdd8[a.down.Type], func(k *typedKernels) *cu.Function { return k.matvecAdd8 }, a.down)
}

// h8Words is the 4-byte words of n values as int8 blocks (12 a block of
// 32: kernels/decode.cuh's xblk8).
func h8Words(n int) int { return 12 * ((n + 31) / 32) }

// matvecAddWarps is the warps a block of matvec_add.
const matvecAddWarps = 4

// matvecAddShape mirrors mva_shape<T> in kernels/matvec_add.cu: the rows a
// warp takes and the blocks a lane loads.
func matvecAddShape(t gpuType) (rows, ahead int) {
	switch t {
	case wtF32, wtF16, wtBF16:
		return 1, 2
	case wtQ4_0:
		return 2, 4
	}
	return 2, 2
}

// matvecAdd adds res (when set) + rs·w·x (x float32, w.Cols of them) to
// out, the fixed-point residual stream: a warp for each group of rows and
// chunk of their blocks.
func (l *launcher) matvecAdd(x cu.DevicePtr, w *deviceMatrix, rs float32, res, out, poison cu.DevicePtr) error {
	f := l.typed(l.k.matvecAdd[w.Type], func(k *typedKernels) *cu.Function { return k.matvecAdd }, w)
	return l.matvecAddWith(f, x, w, rs, res, out, poison)
}

// matvecAddWith launches matvec_add kernel f (matvec_add8 for int8 x).
func (l *launcher) matvecAddWith(f *cu.Function, x cu.DevicePtr, w *deviceMatrix, rs float32, res, out, poison cu.DevicePtr) error {
	r, c := matvecAddShape(w.Type)
	chunks := (w.blocks() + 32*c - 1) / (32 * c)
	warps := chunks * ((w.Rows + r - 1) / r)
	return l.launch(f, cu.Dim((warps+matvecAddWarps-1)/matvecAddWarps), 32*matvecAddWarps, 0,
		cu.Args{x, i32(w.Cols), w.Q, w.D, i32(w.Rows), rs, res, out, poison})
}

// The output head's grid: logitsWarps per block, at most logitsBlocksPerSM
// blocks per SM (the default, measured on SmolLM-135M: H200, 2 a SM 548
// µs a token, 3 a SM 559; wide models take 3, tuning.logitsPerSM): enough
// warps to keep many weight loads in flight, few enough that every block
// is resident at once, and each block converts the fixed-point residual
// stream once.
const (
	logitsWarps       = 4
	logitsBlocksPerSM = 2
)

// logitsKernel is the output head's kernel for w and its rows per warp.
func (l *launcher) logitsKernel(w *deviceMatrix) (int, *cu.Function) {
	if l.logitsRows == 2 {
		return 2, l.k.logits2[w.Type]
	}
	if l.logitsWide && w.Cols > 32*32 {
		if f := l.typed(l.k.logitsWide[w.Type], func(k *typedKernels) *cu.Function { return k.logitsWide }, w); f != nil {
			return 2, f
		}
	}
	return rowsPerWarp(w.Type), l.typed(l.k.logits[w.Type], func(k *typedKernels) *cu.Function { return k.logits }, w)
}

// logitsX8Kernel is the head on act_q8's int8 activations for w and its
// rows a warp (kernels/logits.cu's LOGITS_X8), or nil where w's layout has
// none.
func (l *launcher) logitsX8Kernel(w *deviceMatrix) (*cu.Function, int) {
	// Each lane loads four blocks of a row, or (_c2) two of twice the
	// rows where the rows are 2,048 elements or fewer.
	c2, r := 0, 1
	if w.Type == wtQ4_0 {
		r = 2
	}
	if w.Cols <= 2048 {
		c2, r = 1, 2*r
	}
	f := l.typed(l.k.logitsX8[w.Type][c2], func(k *typedKernels) *cu.Function { return k.logitsX8[c2] }, w)
	return f, r
}

// headKeyWords is the 4-byte words of the logits_x8 kernels' keys:
// HEAD_SLOTS 64-bit keys 128 bytes apart (kernels/logits.cu).
const headKeyWords = 64 * 32

// logitsX8Warps is the warps a block of the logits_x8 kernels.
const logitsX8Warps = 4

// logitsPick is the head kernel for a: logitsX8Kernel's when a takes
// act_q8's activations (or act_f32's row, in the same buffer) and w has
// one, logitsKernel's, or the float row's for a prefill (res unset).
func (l *launcher) logitsPick(a logitsArgs) *cu.Function {
	if a.res == 0 {
		return l.k.logitsFloat[a.w.Type]
	}
	if a.x8 != 0 && a.w.Cols%32 == 0 {
		if f, _ := l.logitsX8Kernel(a.w); f != nil {
			return f
		}
	}
	_, f := l.logitsKernel(a.w)
	return f
}

// logitsBlocks is the decode step's head kernel's grid (logitsKernel), the
// most blocks any head launch on w takes.
func (l *launcher) logitsBlocks(w *deviceMatrix) int {
	r, _ := l.logitsKernel(w)
	return l.logitsGrid(w, r)
}

// logitsGrid is the head's grid for a kernel of r rows a warp.
func (l *launcher) logitsGrid(w *deviceMatrix, r int) int {
	perSM := l.logitsPerSM
	if perSM <= 0 {
		perSM = logitsBlocksPerSM
	}
	warps := (w.Rows + r - 1) / r
	return max(1, min((warps+logitsWarps-1)/logitsWarps, perSM*l.sms))
}

// logitsArgs are the output head's operands.
type logitsArgs struct {
	res          cu.DevicePtr // the residual stream, fixed point (decode)
	poison       cu.DevicePtr // read and cleared with res
	x            cu.DevicePtr // or a float32 row (prefill), when res is 0
	normW        cu.DevicePtr
	eps          float32
	w            *deviceMatrix
	scale        float32 // the logits' multiplier
	softcap      float32 // their soft-cap (0: none)
	logits       cu.DevicePtr
	counts       cu.DevicePtr // penalty history counts per token, or 0: no penalties
	params       cu.DevicePtr // samp_params (read when counts is set)
	partV, partI cu.DevicePtr // logitsBlocks floats and ints
	// x8, when set with res (actF32Words(w.Cols) words), has the head take
	// act_q8's int8 activations where w's layout has a logits_x8 kernel,
	// or act_f32's float row where it has a logits_xf one (F16, BF16);
	// key (headKeyWords zeroed words) then takes the best candidate
	// instead of partV and partI.
	x8, key cu.DevicePtr
	ticket  cu.DevicePtr // a zeroed uint32
	best    cu.DevicePtr // the argmax (int32, -1: all NaN)
	result  cu.DevicePtr // the argmax again, or 0: not written
	// pos, when set, is the step's position: result is then two slots and
	// the argmax goes to slot pos&1.
	pos cu.DevicePtr
	// next, when set, gets the argmax and pos+1: the input of a chained step.
	next cu.DevicePtr
}

// logits computes w·rmsnorm(x)·normW into logits, penalized when counts is
// set, and writes their argmax.
func (l *launcher) logits(a logitsArgs) error {
	w := a.w
	f, in := l.logitsPick(a), a.res
	if f != nil && (l.k.int8X8[f] || l.k.floatX[f]) {
		x8, err := a.x8, error(nil)
		if l.k.floatX[f] {
			err = l.actF32(x8, a.res, a.normW, w.Cols, nil)
		} else {
			x8, _, err = l.actQ8(f, a.x8, a.res, a.normW, w.Cols, 0, nil)
		}
		if err != nil {
			return err
		}
		_, r := l.logitsX8Kernel(w)
		warps := (w.Rows + r - 1) / r
		err = l.launchWith(f, cu.Launch{Grid: cu.Dim((warps + logitsX8Warps - 1) / logitsX8Warps), Block: cu.Dim(32 * logitsX8Warps),
			L2Window: l.headWindow}, cu.Args{
			x8, a.poison, a.eps, i32(w.Cols), w.Q, w.D, i32(w.Rows), a.scale, a.softcap, a.logits, a.counts, a.params, a.key})
		if err != nil {
			return err
		}
		return l.launch(l.k.logitsPick, cu.Dim(1), 32, 0, cu.Args{a.key, a.poison, a.best, a.result, a.pos, a.next})
	}
	grid := l.logitsBlocks(w)
	if in == 0 {
		in = a.x
		grid = l.logitsGrid(w, rowsPerWarp(w.Type)) // logits_float_*: mv_shape's rows
	}
	return l.launchWith(f, cu.Launch{Grid: cu.Dim(grid), Block: cu.Dim(32 * logitsWarps),
		Shared: stagedBytes(w.Cols), L2Window: l.headWindow}, cu.Args{
		in, a.poison, a.normW, a.eps, i32(w.Cols), w.Q, w.D, i32(w.Rows), a.scale, a.softcap, a.logits, a.counts, a.params,
		a.partV, a.partI,
		a.ticket, a.best, a.result, a.pos, a.next})
}

// The sampler kernel's shape: mirrors SAMP_THREADS, SAMP_CAP and
// SAMP_OVERFLOW in kernels/sampler.cu.
const (
	sampThreads  = 1024
	sampCap      = 4096
	sampOverflow = -2
	sampShared   = sampCap*8*2 + 2*sampThreads*4 // keys, weights, bins
)

// sampleArgs are the sampler chain's operands.
type sampleArgs struct {
	logits cu.DevicePtr // penalized by the logits kernel
	n      int
	params cu.DevicePtr
	best   cu.DevicePtr // the argmax of logits
	hist   cu.DevicePtr // {length, oldest, ring[lastN]}
	counts cu.DevicePtr // per token id
	result cu.DevicePtr // the token, -1 (all NaN) or sampOverflow
	// pos and next as in logitsArgs; with next set the parameters' step
	// is advanced for the chained step.
	pos, next cu.DevicePtr
}

func (l *launcher) sample(a sampleArgs) error {
	return l.launch(l.k.sampleChain, cu.Dim(1), sampThreads, sampShared, cu.Args{
		a.logits, i32(a.n), a.params, a.best, a.hist, a.counts, a.result, a.pos, a.next})
}
