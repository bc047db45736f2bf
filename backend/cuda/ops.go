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

// matvecWarps is the warps per block of the matrix kernels: each warp takes
// one pair of rows at a time.
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

// pairBlocks is the grid for n row pairs, at most limit blocks (0: no limit):
// grid-stride loops cover the rest, and fewer blocks normalize the input
// fewer times.
func pairBlocks(n, limit int) int {
	b := (n + matvecWarps - 1) / matvecWarps
	if limit > 0 && b > limit {
		b = limit
	}
	return max(b, 1)
}

func i32(v int) int32 { return int32(v) }

// embed writes row io[0] of m (dequantized) to x and copies the position
// io[1] to pos; io may be host-mapped memory.
func (l *launcher) embed(io, pos cu.DevicePtr, m *deviceMatrix, x cu.DevicePtr) error {
	return l.launch(l.k.embed[m.Type], cu.Dim((m.Cols+255)/256), 256, 0,
		cu.Args{io, pos, m.Q, m.D, i32(m.Cols), x})
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
	neox := int32(0)
	if a.neox {
		neox = 1
	}
	return l.launch(l.k.qkvRope[a.w.Type], cu.Dim(pairBlocks(pairs, 0)), 32*matvecWarps, xsBytes(a.w.Cols), cu.Args{
		a.x, a.normW, a.eps, i32(a.w.Cols), a.w.Q, a.w.D, a.bias, i32(a.nHead), i32(a.nKV), i32(a.headDim),
		a.ropeCS, i32(a.ropeDim), neox, a.pos, a.q, a.kCache, a.vCache, i32(a.ctxMax)})
}

// attnArgs are the attention step's operands.
type attnArgs struct {
	q, kCache, vCache cu.DevicePtr
	ctxMax, headDim   int
	nHead, nKV        int
	pos               cu.DevicePtr
	scale             float32
	chunk, splits     int
	partAcc, partML   cu.DevicePtr
	tickets           cu.DevicePtr // nHead zeroed uint32
	out               cu.DevicePtr // nHead*headDim floats
}

// maxAttnSplits bounds the splits: the merge keeps one weight per split in
// the 4*attnThreads floats of shared memory the kernel has for reductions.
const maxAttnSplits = 4 * attnThreads

const attnThreads = 128

func (l *launcher) attention(a attnArgs) error {
	if a.splits > maxAttnSplits {
		return fmt.Errorf("cuda: %d attention splits exceed %d", a.splits, maxAttnSplits)
	}
	shared := 4 * (a.headDim + a.chunk + max(4*attnThreads, a.headDim))
	return l.launch(l.k.attention, cu.Dim3{X: a.nHead, Y: a.splits, Z: 1}, attnThreads, shared, cu.Args{
		a.q, a.kCache, a.vCache, i32(a.ctxMax), i32(a.headDim), i32(a.nHead), i32(a.nKV), a.pos, a.scale,
		i32(a.chunk), a.partAcc, a.partML, a.tickets, a.out})
}

// gateUp writes SiLU(gate·n)*(up·n) to h, n = rmsnorm(x)·normW.
func (l *launcher) gateUp(x, normW cu.DevicePtr, eps float32, gate, up *deviceMatrix, h cu.DevicePtr) error {
	return l.launch(l.k.gateUp[gate.Type], cu.Dim(pairBlocks(gate.Rows, 0)), 32*matvecWarps, xsBytes(gate.Cols), cu.Args{
		x, normW, eps, i32(gate.Cols), gate.Q, gate.D, up.Q, up.D, i32(gate.Rows), h})
}

// matvec writes w·n to y, n = rmsnorm(in)·normW, or n = in when normW is 0.
func (l *launcher) matvec(in, normW cu.DevicePtr, eps float32, w *deviceMatrix, y cu.DevicePtr) error {
	return l.launch(l.k.matvec[w.Type], cu.Dim(pairBlocks((w.Rows+1)/2, 8*l.sms)), 32*matvecWarps, xsBytes(w.Cols), cu.Args{
		in, normW, eps, i32(w.Cols), w.Q, w.D, i32(w.Rows), y})
}

// matvecAdd adds w·in to y.
func (l *launcher) matvecAdd(in cu.DevicePtr, w *deviceMatrix, y cu.DevicePtr) error {
	return l.launch(l.k.matvecAdd[w.Type], cu.Dim(pairBlocks((w.Rows+1)/2, 8*l.sms)), 32*matvecWarps, xsBytes(w.Cols), cu.Args{
		in, i32(w.Cols), w.Q, w.D, i32(w.Rows), y})
}

// logitsBlocks is the logits kernel's grid: enough warps to keep many row
// loads in flight, few enough that blocks stay resident.
func (l *launcher) logitsBlocks(rows int) int { return pairBlocks((rows+1)/2, 16*l.sms) }

// logitsArgs are the output head's operands.
type logitsArgs struct {
	x, normW       cu.DevicePtr
	eps            float32
	w              *deviceMatrix
	logits         cu.DevicePtr
	partV, partI   cu.DevicePtr // logitsBlocks floats and ints
	ticket, result cu.DevicePtr // a zeroed uint32; the int32 token id
}

// logits computes w·rmsnorm(x)·normW into logits and writes their argmax.
func (l *launcher) logits(a logitsArgs) error {
	w := a.w
	return l.launch(l.k.logits[w.Type], cu.Dim(l.logitsBlocks(w.Rows)), 32*matvecWarps, xsBytes(w.Cols), cu.Args{
		a.x, a.normW, a.eps, i32(w.Cols), w.Q, w.D, i32(w.Rows), a.logits, a.partV, a.partI, a.ticket, a.result})
}

// argmax writes the index of the largest of n logits to out (int32).
func (l *launcher) argmax(logits cu.DevicePtr, n int, out cu.DevicePtr) error {
	return l.launch(l.k.argmax, cu.Dim(1), 1024, 0, cu.Args{logits, i32(n), out})
}
