package cuda

import (
	"fmt"
	"math"

	"gotok/model"
	"gotok/quant"
)

// debugEnv turns on the per-layer check: every step runs kernel by kernel,
// and after each layer the residual stream is compared with a float64 twin
// of the forward pass built from the kernels' CPU references.
const debugEnv = "GOTOK_CUDA_DEBUG"

// debugTol is the residual-stream relative error that counts as diverged.
const debugTol = 1e-3

// debugRef is the float64 twin forward pass with its own KV cache.
type debugRef struct {
	cfg    model.Config
	ctxLen int
	embd   [][]float64
	layers []debugLayer
	rope   []float32
	kc, vc [][]float32 // per layer: [kvHead][ctx][headDim]
	x      []float64
	// diverged holds the first divergence seen, for the report and tests.
	diverged string
}

type debugLayer struct {
	attnNorm, ffnNorm []float32
	// int8Attn and int8FFN say that the layer's QKV and FFN kernels
	// multiply int8 activations (kernelSet.int8), which the twin rounds
	// as they do.
	int8Attn, int8FFN bool
	// int8Down: the split FFN's down projection reads the hidden units as
	// int8 (ffnArgs.h8); int8Heads: W_o reads the heads' outputs as int8
	// (attnArgs.heads8).
	int8Down, int8Heads bool
	wq, wk, wv, wo      [][]float64
	bias                []float32
	gate, up, down      [][]float64
}

func newDebugRef(m *model.Model, ctxLen int) (*debugRef, error) {
	deq := func(t *model.Tensor) ([][]float64, error) {
		w, err := refDequant(t.Type, t.Data, t.Rows, t.Cols)
		if err != nil {
			return nil, fmt.Errorf("cuda debug: %s: %w", t.Name, err)
		}
		return w, nil
	}
	c := m.Config
	r := &debugRef{cfg: c, ctxLen: ctxLen, rope: refRopeTable(ctxLen, c.Rope)}
	var err error
	if r.embd, err = deq(&m.TokenEmbd); err != nil {
		return nil, err
	}
	for i := range m.Layers {
		src := &m.Layers[i]
		var l debugLayer
		l.attnNorm, l.ffnNorm = bytesF32(src.AttnNorm.Data), bytesF32(src.FFNNorm.Data)
		ms := []*[][]float64{&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}
		ts := []*model.Tensor{&src.Wq, &src.Wk, &src.Wv, &src.Wo, &src.Gate, &src.Up, &src.Down}
		for j := range ms {
			if *ms[j], err = deq(ts[j]); err != nil {
				return nil, err
			}
		}
		if src.Bq != nil {
			l.bias = append(append(bytesF32(src.Bq.Data), bytesF32(src.Bk.Data)...), bytesF32(src.Bv.Data)...)
		}
		r.layers = append(r.layers, l)
		r.kc = append(r.kc, make([]float32, c.KVDim()*ctxLen))
		r.vc = append(r.vc, make([]float32, c.KVDim()*ctxLen))
	}
	return r, nil
}

func f32s(x []float64) []float32 {
	f := make([]float32, len(x))
	for i, v := range x {
		f[i] = float32(v)
	}
	return f
}

// embed starts a step.
func (r *debugRef) embed(tok int32) {
	r.x = append(r.x[:0], r.embd[tok]...)
}

// layer runs layer i of the twin at pos on r.x.
func (r *debugRef) layer(i, pos int) {
	c, l := &r.cfg, &r.layers[i]
	hd, qd, kvd := c.HeadDim, c.QDim(), c.KVDim()
	n := refNorm(f32s(r.x), l.attnNorm, c.RMSEps, l.int8Attn)
	q, k, v := refMatvec(l.wq, n), refMatvec(l.wk, n), refMatvec(l.wv, n)
	if l.bias != nil {
		for j := range q {
			q[j] += float64(l.bias[j])
		}
		for j := range k {
			k[j] += float64(l.bias[qd+j])
			v[j] += float64(l.bias[qd+kvd+j])
		}
	}
	refRope(q, c.NumHeads, hd, c.Rope.Dim, c.Rope.Neox, r.rope, pos)
	refRope(k, c.NumKVHeads, hd, c.Rope.Dim, c.Rope.Neox, r.rope, pos)
	// The cache holds f16 (kernels/kv.cuh).
	for h := 0; h < c.NumKVHeads; h++ {
		for d := 0; d < hd; d++ {
			r.kc[i][(h*r.ctxLen+pos)*hd+d] = quant.F16ToF32(quant.F32ToF16(float32(k[h*hd+d])))
			r.vc[i][(h*r.ctxLen+pos)*hd+d] = quant.F16ToF32(quant.F32ToF16(float32(v[h*hd+d])))
		}
	}
	att := refAttention(f32s(q), r.kc[i], r.vc[i], c.NumHeads, c.NumKVHeads, hd, r.ctxLen, pos+1, 0, float32(1/math.Sqrt(float64(hd))), 0)
	if l.int8Heads {
		att = refQ8Groups(f32s(att), 32)
	}
	for j, v := range refMatvec(l.wo, att) {
		r.x[j] += v
	}
	n = refNorm(f32s(r.x), l.ffnNorm, c.RMSEps, l.int8FFN)
	h := refGLU(refMatvec(l.gate, n), refMatvec(l.up, n), model.SiLU)
	if l.int8Down {
		h = refQ8Groups(f32s(h), 16)
	}
	for j, v := range refMatvec(l.down, h) {
		r.x[j] += v
	}
}

// compare checks the device's residual stream after layer i at pos and
// remembers the first divergence.
func (r *debugRef) compare(got []float32, i, pos int) error {
	e := relErr(got, r.x)
	if e > debugTol && r.diverged == "" {
		r.diverged = fmt.Sprintf("position %d, layer %d: residual stream relative error %.3g > %.0g", pos, i, e, debugTol)
		return fmt.Errorf("cuda debug: first divergence from the reference at %s", r.diverged)
	}
	return nil
}
