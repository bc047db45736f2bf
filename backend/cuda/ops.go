package cuda

import (
	"fmt"

	"gotok/backend/cuda/cu"
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
	// warpsPerBlock of the matrix kernels (0: matvecWarps), the output
	// head's blocks per SM (0: logitsBlocksPerSM), the rows per warp of the
	// layer's matrix kernels (0: layerRows; see kernelRows) and of the
	// output head (0: rowsPerWarp): tests sweep them.
	warpsPerBlock, logitsPerSM int
	rows, logitsRows           int
	// after, when set, runs after each launch (the profiler records an
	// event there).
	after func(f *cu.Function) error
	// keep, when set, drops the launches it returns false for (the
	// profiler times one kind of kernel at a time).
	keep func(f *cu.Function) bool
}

// matvecWarps is the warps per block of the matrix kernels.
const matvecWarps = 4

func (l *launcher) warps() int {
	if l.warpsPerBlock > 0 {
		return l.warpsPerBlock
	}
	return matvecWarps
}

func (l *launcher) launch(f *cu.Function, grid cu.Dim3, block, shared int, args cu.Args) error {
	if l.keep != nil && !l.keep(f) {
		return nil
	}
	l.count++
	err := l.c.Launch(f, cu.Launch{Grid: grid, Block: cu.Dim(block), Shared: shared, Stream: l.stream, PDL: l.pdl}, args)
	if err == nil && l.after != nil {
		err = l.after(f)
	}
	return err
}

// rowsPerWarp mirrors mv_shape<T>::R in kernels/decode.cuh: the rows one
// warp of a matrix kernel takes at a time.
func rowsPerWarp(t gpuType) int {
	if t == wtQ4_0 || t == wtQ8_0 {
		return 4
	}
	return 2
}

// layerRows is the rows per warp of the layer's matrix kernels: two, the
// _r2 kernels. They run about one warp per scheduler, where time goes with
// the instructions per warp, so fewer rows per warp and more warps beat
// the four rows whose loads a warp would otherwise share (H200: -38 µs a
// token).
const layerRows = 2

// kernelRows picks the kernel of a layer matrix op for layout t from its
// variants (rows per warp: rowsPerWarp(t), 2, 1; nil where there is none)
// and returns it with its rows per warp.
func (l *launcher) kernelRows(t gpuType, fs [3]*[4]*cu.Function) (int, *cu.Function) {
	r := l.rows
	if r == 0 {
		r = layerRows
	}
	switch {
	case r == 1 && fs[2] != nil:
		return 1, fs[2][t]
	case r <= 2:
		return 2, fs[1][t]
	}
	return rowsPerWarp(t), fs[0][t]
}

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

// embed writes row io[0] of m (dequantized) to x, copies the position io[1]
// to pos and the nParams sampler words at io[ioParams] to params; io may be
// host-mapped memory.
func (l *launcher) embed(io, pos, params cu.DevicePtr, nParams int, m *deviceMatrix, x cu.DevicePtr) error {
	return l.launch(l.k.embed[m.Type], cu.Dim((max(m.Cols, nParams)+255)/256), 256, 0,
		cu.Args{io, pos, params, i32(nParams), m.Q, m.D, i32(m.Cols), x})
}

// qkvArgs are the attention-input step's operands.
type qkvArgs struct {
	x, normW   cu.DevicePtr
	eps        float32
	w          *deviceMatrix // Q, K, V stacked
	bias       cu.DevicePtr  // Q, K, V biases stacked, or 0
	nHead, nKV int
	headDim    int
	ropeCS     cu.DevicePtr // [ctx][ropeDim/2] (cos, sin)
	ropeDim    int
	neox       bool
	pos        cu.DevicePtr // int32
	q          cu.DevicePtr
	kCache     cu.DevicePtr
	vCache     cu.DevicePtr
	ctxMax     int
}

func (l *launcher) qkvRope(a qkvArgs) error {
	pairs := (a.nHead + 2*a.nKV) * a.headDim / 2
	r, f := l.kernelRows(a.w.Type, [3]*[4]*cu.Function{&l.k.qkvRope, &l.k.qkvRope2, nil}) // pairs of rows
	perWarp := r / 2
	neox := int32(0)
	if a.neox {
		neox = 1
	}
	return l.launch(f, cu.Dim(l.warpBlocks((pairs+perWarp-1)/perWarp, 0)), 32*l.warps(), 0, cu.Args{
		a.x, a.normW, a.eps, i32(a.w.Cols), a.w.Q, a.w.D, a.bias, i32(a.nHead), i32(a.nKV), i32(a.headDim),
		a.ropeCS, i32(a.ropeDim), neox, a.pos, a.q, a.kCache, a.vCache, i32(a.ctxMax)})
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
)

// attnArgs are the attention step's operands.
type attnArgs struct {
	q, kCache, vCache cu.DevicePtr
	ctxMax, headDim   int
	nHead, nKV        int
	pos               cu.DevicePtr
	scale             float32
	single            int          // contexts up to this long take one split (attSingle)
	minChunk          int          // attMinChunk; tests vary it
	partAcc, partML   cu.DevicePtr // attnPartials floats each
	tickets           cu.DevicePtr // nHead zeroed uint32
	out               cu.DevicePtr // nHead*headDim floats
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

// attnWarps is the warps per query head in an attention block of g heads.
func attnWarps(g int) int { return min(4, attMaxWarps/g) }

// attnPartials is the floats of partAcc and partML the kernel needs.
func attnPartials(nHead, headDim int) (acc, ml int) {
	return nHead * attSplits * headDim, 2 * nHead * attSplits
}

func (l *launcher) attention(a attnArgs) error {
	lanes, nq, ok := attnLanes(a.headDim)
	if !ok {
		return fmt.Errorf("cuda: no attention kernel for head dimension %d", a.headDim)
	}
	g := attnGroup(a.nHead, a.nKV)
	w := attnWarps(g)
	threads := 32 * g * w
	cols := g * a.headDim / 4
	// The warps' states to combine, or the merge's weights and sums.
	shared := 4 * max(g*w*(a.headDim+4), g*attSplits+4*max(threads, cols))
	if shared > 48<<10 {
		return fmt.Errorf("cuda: attention of %d heads of %d needs %d bytes of shared memory, more than 48 KiB", g, a.headDim, shared)
	}
	return l.launch(l.k.attention[nq], cu.Dim3{X: a.nHead / g, Y: attSplits, Z: 1}, threads, shared, cu.Args{
		a.q, a.kCache, a.vCache, i32(a.ctxMax), i32(a.headDim), i32(a.nHead), i32(a.nKV), i32(g), i32(w), i32(lanes),
		a.pos, a.scale, i32(a.single), i32(a.minChunk), a.partAcc, a.partML, a.tickets, a.out})
}

// gateUp writes SiLU(gate·n)*(up·n) to h, n = rmsnorm(x)·normW.
func (l *launcher) gateUp(x, normW cu.DevicePtr, eps float32, gate, up *deviceMatrix, h cu.DevicePtr) error {
	perWarp, f := l.kernelRows(gate.Type, [3]*[4]*cu.Function{&l.k.gateUp, &l.k.gateUp2, &l.k.gateUp1}) // units: gate and up rows each
	return l.launch(f, cu.Dim(l.warpBlocks((gate.Rows+perWarp-1)/perWarp, 0)), 32*l.warps(), 0, cu.Args{
		x, normW, eps, i32(gate.Cols), gate.Q, gate.D, up.Q, up.D, i32(gate.Rows), h})
}

// matvec writes w·n to y, n = rmsnorm(in)·normW, or n = in when normW is 0.
func (l *launcher) matvec(in, normW cu.DevicePtr, eps float32, w *deviceMatrix, y cu.DevicePtr) error {
	r := rowsPerWarp(w.Type)
	return l.launch(l.k.matvec[w.Type], cu.Dim(l.warpBlocks((w.Rows+r-1)/r, 0)), 32*l.warps(), 0, cu.Args{
		in, normW, eps, i32(w.Cols), w.Q, w.D, i32(w.Rows), y})
}

// matvecAdd adds w·in to y.
func (l *launcher) matvecAdd(in cu.DevicePtr, w *deviceMatrix, y cu.DevicePtr) error {
	r, f := l.kernelRows(w.Type, [3]*[4]*cu.Function{&l.k.matvecAdd, &l.k.matvecAdd2, &l.k.matvecAdd1})
	return l.launch(f, cu.Dim(l.warpBlocks((w.Rows+r-1)/r, 0)), 32*l.warps(), 0, cu.Args{
		in, i32(w.Cols), w.Q, w.D, i32(w.Rows), y})
}

// The output head's grid: logitsWarps per block, at most logitsBlocksPerSM
// blocks per SM: enough warps to keep many weight loads in flight, few
// enough that every block is resident at once.
const (
	logitsWarps       = 4
	logitsBlocksPerSM = 3
)

// logitsKernel is the output head's kernel for w and its rows per warp.
func (l *launcher) logitsKernel(w *deviceMatrix) (int, *cu.Function) {
	if l.logitsRows == 2 {
		return 2, l.k.logits2[w.Type]
	}
	return rowsPerWarp(w.Type), l.k.logits[w.Type]
}

// logitsBlocks is the logits kernel's grid.
func (l *launcher) logitsBlocks(w *deviceMatrix) int {
	r, _ := l.logitsKernel(w)
	perSM := l.logitsPerSM
	if perSM <= 0 {
		perSM = logitsBlocksPerSM
	}
	warps := (w.Rows + r - 1) / r
	return max(1, min((warps+logitsWarps-1)/logitsWarps, perSM*l.sms))
}

// logitsArgs are the output head's operands.
type logitsArgs struct {
	x, normW     cu.DevicePtr
	eps          float32
	w            *deviceMatrix
	logits       cu.DevicePtr
	counts       cu.DevicePtr // penalty history counts per token, or 0: no penalties
	params       cu.DevicePtr // samp_params (read when counts is set)
	partV, partI cu.DevicePtr // logitsBlocks floats and ints
	ticket       cu.DevicePtr // a zeroed uint32
	best         cu.DevicePtr // the argmax (int32, -1: all NaN)
	result       cu.DevicePtr // the argmax again, or 0: not written
}

// logits computes w·rmsnorm(x)·normW into logits, penalized when counts is
// set, and writes their argmax.
func (l *launcher) logits(a logitsArgs) error {
	w := a.w
	_, f := l.logitsKernel(w)
	return l.launch(f, cu.Dim(l.logitsBlocks(w)), 32*logitsWarps, 0, cu.Args{
		a.x, a.normW, a.eps, i32(w.Cols), w.Q, w.D, i32(w.Rows), a.logits, a.counts, a.params, a.partV, a.partI,
		a.ticket, a.best, a.result})
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
}

func (l *launcher) sample(a sampleArgs) error {
	return l.launch(l.k.sampleChain, cu.Dim(1), sampThreads, sampShared, cu.Args{
		a.logits, i32(a.n), a.params, a.best, a.hist, a.counts, a.result})
}
