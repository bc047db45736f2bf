package cuda

import (
	"fmt"

	"gotok/backend/cuda/cu"
)

// The batched prefill's launches, one kernel each. Activations are
// row-major [m][width]: the residual stream f32, everything a gemm
// multiplies f16.

// Tile shapes of kernels/gemm.cu and kernels/prefill_attention.cu.
const (
	gemmTileM   = 64
	gemmTileN   = 64
	attnTileRow = 64
	prefillWarp = 32
)

// prefillEmbed writes the embedding rows of m tokens (int32, device memory)
// to x, f32 [m][cols].
func (l *launcher) prefillEmbed(tokens cu.DevicePtr, m int, w *deviceMatrix, x cu.DevicePtr) error {
	return l.launch(l.k.pre.embed[w.Type], cu.Dim3{X: (w.Cols + 255) / 256, Y: m, Z: 1}, 256, 0,
		cu.Args{tokens, i32(m), w.Q, w.D, i32(w.Cols), x})
}

// prefillNorm writes rmsnorm(x)·w rounded to f16 for m rows of k.
func (l *launcher) prefillNorm(x, w cu.DevicePtr, eps float32, m, k int, out cu.DevicePtr) error {
	const rowsPerBlock = 4
	return l.launch(l.k.pre.norm, cu.Dim((m+rowsPerBlock-1)/rowsPerBlock), rowsPerBlock*prefillWarp, 0,
		cu.Args{x, w, eps, i32(m), i32(k), out})
}

// gemm multiplies the f16 activations a ([m][w.Cols]) by w's rows into out
// ([m][w.Rows]) as epi says. For gemmGLU, w is the gate and w2 the up
// projection.
func (l *launcher) gemm(a cu.DevicePtr, m int, w, w2 *deviceMatrix, epi gemmEpilogue, out cu.DevicePtr) error {
	return l.gemmInto(a, m, w, w2, epi, out, w.Rows)
}

// gemmInto is gemm writing rows ldo elements apart: out may be a column
// range of a wider matrix (Q, K and V multiplied apart into one output).
func (l *launcher) gemmInto(a cu.DevicePtr, m int, w, w2 *deviceMatrix, epi gemmEpilogue, out cu.DevicePtr, ldo int) error {
	f := l.k.pre.gemm[w.Type][epi]
	if f == nil {
		return fmt.Errorf("cuda: no prefill gemm for %s weights", w.Type.suffix())
	}
	if w.Cols%32 != 0 {
		return fmt.Errorf("cuda: prefill gemm needs whole 32-element blocks, not rows of %d", w.Cols)
	}
	q2, d2 := cu.DevicePtr(0), cu.DevicePtr(0)
	tilesN := (w.Rows + gemmTileN - 1) / gemmTileN
	if epi == gemmGLU {
		if w2 == nil || w2.Type != w.Type || w2.Rows != w.Rows || w2.Cols != w.Cols {
			return fmt.Errorf("cuda: prefill gate/up gemm needs two matrices of one type and shape")
		}
		q2, d2 = w2.Q, w2.D
		tilesN = (w.Rows + gemmTileN/2 - 1) / (gemmTileN / 2)
	}
	return l.launch(f, cu.Dim3{X: tilesN, Y: (m + gemmTileM - 1) / gemmTileM, Z: 1}, 128, 0,
		cu.Args{a, i32(m), i32(w.Cols), w.Q, w.D, q2, d2, i32(w.Rows), out, i32(ldo)})
}

// ropeArgs are prefill_rope's operands: qkv is the store gemm's output.
type ropeArgs struct {
	qkv, bias      cu.DevicePtr
	m, pos0        int
	nHead, nKV, hd int
	ropeCS         cu.DevicePtr
	ropeDim        int
	neox           bool
	q              cu.DevicePtr // f16 [m][nHead*hd]
	kCache, vCache cu.DevicePtr
	ctxMax         int
}

func (l *launcher) prefillRope(a ropeArgs) error {
	neox := int32(0)
	if a.neox {
		neox = 1
	}
	n := a.m * (a.nHead + 2*a.nKV) * a.hd / 2
	return l.launch(l.k.pre.rope, cu.Dim((n+255)/256), 256, 0, cu.Args{a.qkv, i32(a.m), a.bias, i32(a.nHead),
		i32(a.nKV), i32(a.hd), a.ropeCS, i32(a.ropeDim), neox, i32(a.pos0), a.q, a.kCache, a.vCache, i32(a.ctxMax)})
}

// prefillAttnArgs are prefill_attention's operands.
type prefillAttnArgs struct {
	q              cu.DevicePtr // f16 [m][nHead*hd]
	m, pos0        int
	kCache, vCache cu.DevicePtr
	ctxMax         int
	nHead, nKV, hd int
	scale          float32
	out            cu.DevicePtr // f16 [m][nHead*hd]
}

func (l *launcher) prefillAttention(a prefillAttnArgs) error {
	f := l.k.pre.attention[a.hd]
	if f == nil {
		return fmt.Errorf("cuda: no prefill attention for head dimension %d", a.hd)
	}
	rows := a.m * (a.nHead / a.nKV)
	return l.launch(f, cu.Dim3{X: (rows + attnTileRow - 1) / attnTileRow, Y: a.nKV, Z: 1}, 128, 0,
		cu.Args{a.q, i32(a.m), i32(a.pos0), a.kCache, a.vCache, i32(a.ctxMax), i32(a.nHead), i32(a.nKV), a.scale, a.out})
}
