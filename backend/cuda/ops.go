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
	// after, when set, runs after each launch (the profiler records an
	// event there).
	after func(f *cu.Function) error
	// keep, when set, drops the launches it returns false for (the
	// profiler times one kind of kernel at a time).
	keep func(f *cu.Function) bool
}

// matvecWarps is the warps per block of the matrix kernels.
const matvecWarps = 4

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

// warpBlocks is the grid for n warps' worth of work, at most limit blocks
// (0: no limit); grid-stride loops cover the rest.
func warpBlocks(n, limit int) int {
	b := (n + matvecWarps - 1) / matvecWarps
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
	perWarp := rowsPerWarp(a.w.Type) / 2
	neox := int32(0)
	if a.neox {
		neox = 1
	}
	return l.launch(l.k.qkvRope[a.w.Type], cu.Dim(warpBlocks((pairs+perWarp-1)/perWarp, 0)), 32*matvecWarps, 0, cu.Args{
		a.x, a.normW, a.eps, i32(a.w.Cols), a.w.Q, a.w.D, a.bias, i32(a.nHead), i32(a.nKV), i32(a.headDim),
		a.ropeCS, i32(a.ropeDim), neox, a.pos, a.q, a.kCache, a.vCache, i32(a.ctxMax)})
}

// The attention kernel's shape: mirrors ATT_SPLITS, ATT_MAXG and
// ATT_THREADS in kernels/attention.cu.
const (
	attSplits   = 32
	attMaxGroup = 8
	attThreads  = 128
	// attMinChunk is the fewest positions a split takes: short contexts
	// use few splits, and one split needs no merge.
	attMinChunk = 32
)

// attnArgs are the attention step's operands.
type attnArgs struct {
	q, kCache, vCache cu.DevicePtr
	ctxMax, headDim   int
	nHead, nKV        int
	pos               cu.DevicePtr
	scale             float32
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

// attnPartials is the floats of partAcc and partML the kernel needs.
func attnPartials(nHead, headDim int) (acc, ml int) {
	return nHead * attSplits * headDim, 2 * nHead * attSplits
}

func (l *launcher) attention(a attnArgs) error {
	g := attnGroup(a.nHead, a.nKV)
	maxChunk := max(a.minChunk, (a.ctxMax+attSplits-1)/attSplits)
	maxChunk = (maxChunk + 3) &^ 3 // keeps the float4 scratch after it aligned
	d4 := a.headDim / 4
	groups := max(1, attThreads/d4)
	cols := g * d4
	groups2 := max(1, attThreads/cols)
	red := max(groups*g*a.headDim, g*attSplits+4*groups2*cols)
	shared := 4 * (g*a.headDim + g*maxChunk + red)
	if shared > max(48<<10, l.c.Info.MaxSharedOptin-1024) {
		return fmt.Errorf("cuda: attention over %d positions needs %d bytes of shared memory, more than the device has", a.ctxMax, shared)
	}
	return l.launch(l.k.attention, cu.Dim3{X: a.nHead / g, Y: attSplits, Z: 1}, attThreads, shared, cu.Args{
		a.q, a.kCache, a.vCache, i32(a.ctxMax), i32(a.headDim), i32(a.nHead), i32(a.nKV), i32(g), a.pos, a.scale,
		i32(a.minChunk), i32(maxChunk), a.partAcc, a.partML, a.tickets, a.out})
}

// gateUp writes SiLU(gate·n)*(up·n) to h, n = rmsnorm(x)·normW.
func (l *launcher) gateUp(x, normW cu.DevicePtr, eps float32, gate, up *deviceMatrix, h cu.DevicePtr) error {
	perWarp := rowsPerWarp(gate.Type) / 2
	return l.launch(l.k.gateUp[gate.Type], cu.Dim(warpBlocks((gate.Rows+perWarp-1)/perWarp, 0)), 32*matvecWarps, 0, cu.Args{
		x, normW, eps, i32(gate.Cols), gate.Q, gate.D, up.Q, up.D, i32(gate.Rows), h})
}

// matvec writes w·n to y, n = rmsnorm(in)·normW, or n = in when normW is 0.
func (l *launcher) matvec(in, normW cu.DevicePtr, eps float32, w *deviceMatrix, y cu.DevicePtr) error {
	r := rowsPerWarp(w.Type)
	return l.launch(l.k.matvec[w.Type], cu.Dim(warpBlocks((w.Rows+r-1)/r, 0)), 32*matvecWarps, 0, cu.Args{
		in, normW, eps, i32(w.Cols), w.Q, w.D, i32(w.Rows), y})
}

// matvecAdd adds w·in to y.
func (l *launcher) matvecAdd(in cu.DevicePtr, w *deviceMatrix, y cu.DevicePtr) error {
	r := rowsPerWarp(w.Type)
	return l.launch(l.k.matvecAdd[w.Type], cu.Dim(warpBlocks((w.Rows+r-1)/r, 0)), 32*matvecWarps, 0, cu.Args{
		in, i32(w.Cols), w.Q, w.D, i32(w.Rows), y})
}

// logitsBlocksPerSM bounds the output head's grid: enough warps to keep many
// weight loads in flight, few enough that every block is resident at once.
const logitsBlocksPerSM = 3

// logitsBlocks is the logits kernel's grid.
func (l *launcher) logitsBlocks(w *deviceMatrix) int {
	r := rowsPerWarp(w.Type)
	return warpBlocks((w.Rows+r-1)/r, logitsBlocksPerSM*l.sms)
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
	return l.launch(l.k.logits[w.Type], cu.Dim(l.logitsBlocks(w)), 32*matvecWarps, 0, cu.Args{
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
