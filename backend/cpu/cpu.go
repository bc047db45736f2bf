// Package cpu runs llama-family models on the CPU in pure Go (with assembly
// dot products from package quant): the engine that works everywhere and
// the reference the GPU kernels are checked against.
package cpu

import (
	"context"
	"fmt"
	"runtime"

	"gotok/backend"
	"gotok/model"
	"gotok/quant"
	"gotok/sample"
)

// MaxBatch is the most prompt tokens that go through a layer together; longer
// prompts run in chunks of this size.
const MaxBatch = 64

// Options configures a CPU backend.
type Options struct {
	// ContextLen is the KV cache length in tokens (0: the model's, capped at
	// backend.DefaultMaxContext).
	ContextLen int
	// Threads is the number of worker goroutines (0: all cores).
	Threads int
}

// Backend is the CPU forward pass of one model with its KV cache. It is not
// safe for concurrent use.
type Backend struct {
	m       *model.Model
	c       model.Config
	ctxLen  int
	threads int
	pool    *pool
	closed  bool
	rope    *rope
	// localRope rotates the layers with model.LayerAttention.LocalRope;
	// nil when there are none.
	localRope *rope

	// KV cache, per layer. Values: ctxLen × KVDim floats. Keys transposed
	// for attention: KVDim rows (head by head) of kstride floats, one per
	// position.
	kcache, vcache [][]float32
	kstride        int

	// Scratch for a batch of up to MaxBatch tokens.
	x      []float32 // residual stream, T × Dim
	xn     activations
	q      []float32 // T × QDim
	kv     []float32 // T × 2·KVDim (K then V per token)
	att    activations
	att2   []float32 // T × Dim
	gateUp []float32 // T × 2·FFN
	hidden activations
	attn   []attnScratch // per worker
	logits []float32
	outAct activations
}

// New prepares a backend for m.
func New(m *model.Model, o Options) (*Backend, error) {
	c := m.Config
	ctxLen, err := backend.ContextLen(o.ContextLen, &c)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if len(c.LayerAttn) != c.NumLayers || len(m.Layers) != c.NumLayers {
		return nil, fmt.Errorf("cpu: %d layers, %d bound, %d described (model.ConfigFromMetadata fills in LayerAttn)", c.NumLayers, len(m.Layers), len(c.LayerAttn))
	}
	for _, t := range []*model.Tensor{&m.TokenEmbd, &m.Output} {
		if t.Cols%32 != 0 && t.Type != quant.F32 {
			return nil, fmt.Errorf("cpu: tensor %s row length %d", t.Name, t.Cols)
		}
	}
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0) // respects CPU quotas, unlike NumCPU
	}
	if threads > 4*runtime.NumCPU() {
		return nil, fmt.Errorf("cpu: %d threads on %d cores", threads, runtime.NumCPU())
	}
	b := &Backend{m: m, c: c, ctxLen: ctxLen, threads: threads, pool: newPool(threads)}
	b.rope = newRope(c.Rope.ForContext(ctxLen), MaxBatch)
	for _, la := range c.LayerAttn {
		if la.LocalRope {
			b.localRope = newRope(c.LocalRope, MaxBatch)
			break
		}
	}
	kvd := c.KVDim()
	b.kstride = keyStride(ctxLen)
	b.kcache = make([][]float32, c.NumLayers)
	b.vcache = make([][]float32, c.NumLayers)
	for l := range b.kcache {
		b.kcache[l] = make([]float32, kvd*b.kstride)
		b.vcache[l] = make([]float32, ctxLen*kvd)
	}
	T := MaxBatch
	b.x = make([]float32, T*c.Dim)
	b.xn = newActivations(T, c.Dim)
	b.q = make([]float32, T*c.QDim())
	b.kv = make([]float32, T*2*kvd)
	b.att = newActivations(T, c.QDim())
	b.att2 = make([]float32, T*c.Dim)
	b.gateUp = make([]float32, T*2*c.FFNDim)
	b.hidden = newActivations(T, c.FFNDim)
	b.attn = make([]attnScratch, threads)
	for i := range b.attn {
		b.attn[i] = newAttnScratch(c.NumHeads/c.NumKVHeads, c.HeadDim)
	}
	b.logits = make([]float32, c.VocabSize)
	b.outAct = newActivations(1, c.Dim)
	return b, nil
}

func newActivations(t, n int) activations {
	a := activations{t: t, n: n, f32: make([]float32, t*n)}
	if n%32 == 0 {
		a.q8 = make([]byte, t*n/32*quant.Q8_0.BlockBytes())
	}
	return a
}

// Name describes the backend.
func (b *Backend) Name() string {
	return fmt.Sprintf("cpu (%d threads)", b.threads)
}

// ContextLen is the KV cache length.
func (b *Backend) ContextLen() int { return b.ctxLen }

// Close stops the workers.
func (b *Backend) Close() error {
	b.closed = true
	b.pool.close()
	return nil
}

func (b *Backend) check(tokens []int32, pos int) error {
	if b.closed {
		return fmt.Errorf("cpu: %w", backend.ErrClosed)
	}
	if err := backend.CheckInput(tokens, pos, b.ctxLen, b.c.VocabSize); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	return nil
}

// Forward runs tokens at positions pos, pos+1, … and returns the logits of
// the last one. The returned slice is reused by the next call.
func (b *Backend) Forward(ctx context.Context, tokens []int32, pos int) ([]float32, error) {
	if err := b.check(tokens, pos); err != nil {
		return nil, err
	}
	for len(tokens) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(len(tokens), MaxBatch)
		if err := b.forwardBatch(tokens[:n], pos); err != nil {
			return nil, err
		}
		tokens, pos = tokens[n:], pos+n
	}
	return b.logits, nil
}

// Prefill implements backend.Backend.
func (b *Backend) Prefill(ctx context.Context, tokens []int32, pos int, s *sample.Sampler) (int32, error) {
	logits, err := b.Forward(ctx, tokens, pos)
	if err != nil {
		return 0, err
	}
	if s == nil {
		return sample.Argmax(logits), nil
	}
	return s.Sample(logits), nil
}

// Decode implements backend.Backend.
func (b *Backend) Decode(ctx context.Context, token int32, pos int, s *sample.Sampler) (int32, error) {
	return b.Prefill(ctx, []int32{token}, pos, s)
}

// Logits implements backend.Backend.
func (b *Backend) Logits(ctx context.Context, token int32, pos int) ([]float32, error) {
	l, err := b.Forward(ctx, []int32{token}, pos)
	if err != nil {
		return nil, err
	}
	return append([]float32(nil), l...), nil
}

// forwardBatch runs len(tokens) ≤ MaxBatch tokens through every layer and
// leaves the last token's logits in b.logits. The block is llama's with the
// variations model.Block describes; each is a branch per layer, not per
// element, so the llama path costs what it did.
func (b *Backend) forwardBatch(tokens []int32, pos int) error {
	c := &b.c
	blk := &c.Block
	T := len(tokens)
	dim, qd, kvd, ffn := c.Dim, c.QDim(), c.KVDim(), c.FFNDim
	x := b.x[:T*dim]
	for t, tok := range tokens {
		if err := quant.Dequantize(b.m.TokenEmbd.Type, b.m.TokenEmbd.Row(int(tok)), x[t*dim:(t+1)*dim]); err != nil {
			return fmt.Errorf("cpu: embedding: %w", err)
		}
	}
	if blk.EmbedScale != 1 {
		scale(x, blk.EmbedScale)
	}
	b.rope.set(pos, T)
	if b.localRope != nil {
		b.localRope.set(pos, T)
	}
	xn, att, hidden := &b.xn, &b.att, &b.hidden
	xn.t, att.t, hidden.t = T, T, T

	for l := range b.m.Layers {
		ly := &b.m.Layers[l]
		rope := b.rope
		if c.LayerAttn[l].LocalRope {
			rope = b.localRope
		}
		// Attention block.
		b.branchInput(x, T, ly.AttnNorm)
		b.matmul(xn,
			product{w: &ly.Wq, out: b.q, outStride: qd},
			product{w: &ly.Wk, out: b.kv, outStride: 2 * kvd},
			product{w: &ly.Wv, out: b.kv, outStride: 2 * kvd, outOff: kvd},
		)
		kc, vc := b.kcache[l], b.vcache[l]
		for t := 0; t < T; t++ {
			q := b.q[t*qd : (t+1)*qd]
			k := b.kv[t*2*kvd : t*2*kvd+kvd]
			v := b.kv[t*2*kvd+kvd : (t+1)*2*kvd]
			if ly.Bq != nil {
				addTo(q, f32s(ly.Bq.Data))
				addTo(k, f32s(ly.Bk.Data))
				addTo(v, f32s(ly.Bv.Data))
			}
			switch blk.QKNorm {
			case model.QKNormHead:
				for h := 0; h < c.NumHeads; h++ {
					qh := q[h*c.HeadDim : (h+1)*c.HeadDim]
					rmsNorm(qh, qh, f32s(ly.QNorm.Data), c.RMSEps)
				}
				for h := 0; h < c.NumKVHeads; h++ {
					kh := k[h*c.HeadDim : (h+1)*c.HeadDim]
					rmsNorm(kh, kh, f32s(ly.KNorm.Data), c.RMSEps)
				}
			case model.QKNormFull:
				rmsNorm(q, q, f32s(ly.QNorm.Data), c.RMSEps)
				rmsNorm(k, k, f32s(ly.KNorm.Data), c.RMSEps)
			}
			if !c.LayerAttn[l].NoRope {
				rope.apply(q, c.NumHeads, c.HeadDim, t)
				rope.apply(k, c.NumKVHeads, c.HeadDim, t)
			}
			p := pos + t
			if blk.AttnTempScale != 0 {
				scale(q, blk.AttnTemp(p))
			}
			b.storeKey(kc, k, p)
			copy(vc[p*kvd:(p+1)*kvd], v)
		}
		b.attention(l, T, pos)
		att.q8ok = false
		b.matmul(att, product{w: &ly.Wo, out: b.att2, outStride: dim})
		b.addBranch(x, T, ly.AttnPostNorm)

		// Feed-forward block.
		b.branchInput(x, T, ly.FFNNorm)
		b.matmul(xn,
			product{w: &ly.Gate, out: b.gateUp, outStride: 2 * ffn},
			product{w: &ly.Up, out: b.gateUp, outStride: 2 * ffn, outOff: ffn},
		)
		for t := 0; t < T; t++ {
			g := b.gateUp[t*2*ffn : t*2*ffn+ffn]
			u := b.gateUp[t*2*ffn+ffn : (t+1)*2*ffn]
			if blk.Act == model.GELUTanh {
				geluTanhGLU(hidden.row(t), g, u)
			} else {
				quant.SwiGLU(hidden.row(t), g, u)
			}
		}
		hidden.q8ok = false
		b.matmul(hidden, product{w: &ly.Down, out: b.att2, outStride: dim})
		b.addBranch(x, T, ly.FFNPostNorm)
	}

	// Output head, last token only.
	out := &b.outAct
	out.q8ok = false
	rmsNorm(out.row(0), x[(T-1)*dim:T*dim], f32s(b.m.OutputNorm.Data), c.RMSEps)
	b.matmul(out, product{w: &b.m.Output, out: b.logits, outStride: c.VocabSize})
	if blk.LogitScale != 1 {
		scale(b.logits, blk.LogitScale)
	}
	if blk.FinalSoftcap != 0 {
		softcap(b.logits, blk.FinalSoftcap)
	}
	return nil
}

// branchInput writes the input of an attention or FFN branch into b.xn:
// the residual stream x of T tokens under the RMS norm with gains norm, or
// x itself when the block has no pre-norm (norm empty).
func (b *Backend) branchInput(x []float32, T int, norm model.Tensor) {
	dim := b.c.Dim
	b.xn.q8ok = false
	if norm.Data == nil {
		copy(b.xn.f32[:T*dim], x[:T*dim])
		return
	}
	for t := 0; t < T; t++ {
		rmsNorm(b.xn.row(t), x[t*dim:(t+1)*dim], f32s(norm.Data), b.c.RMSEps)
	}
}

// addBranch adds a branch's output (b.att2) to the residual stream x, after
// its post-norm (when postNorm is not nil) and the residual multiplier.
func (b *Backend) addBranch(x []float32, T int, postNorm *model.Tensor) {
	dim := b.c.Dim
	out := b.att2[:T*dim]
	if postNorm != nil {
		for t := 0; t < T; t++ {
			o := out[t*dim : (t+1)*dim]
			rmsNorm(o, o, f32s(postNorm.Data), b.c.RMSEps)
		}
	}
	if s := b.c.Block.ResidualScale; s != 1 {
		scale(out, s)
	}
	addTo(x, out)
}

func addTo(dst, src []float32) {
	for i := range dst {
		dst[i] += src[i]
	}
}
