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
// prompts run in chunks of this size. Each chunk re-packs the weights for
// the tiled products and synchronizes the workers a few times a layer
// (2 cores, gotok bench, alternating: 64 → 128, SmolLM-shape Q4_0 pp512
// +3-11%, Llama-1B Q4_K pp256 +5-16%; 128 → 256 on 2026-11-27, an AVX2
// Zen 3, five rounds: Llama-1B F16 pp512 +8%, where each chunk widens
// every F16 weight to float32 again; Llama-1B Q4_K_M, SmolLM-135M Q4_0
// and F16 level).
const MaxBatch = 256

// maxHeadRows is the most tokens of a batch whose logits the head
// computes: a batch ends at that many (a token a sequence of a server's
// step, every token of a scored prompt). Its rows at the vocabulary's
// width are the largest scratch: 33 MB for Llama 3's, where MaxBatch rows
// would be 66.
const maxHeadRows = 64

// Options configures a CPU backend.
type Options struct {
	// ContextLen is the most positions one sequence holds (0: the model's
	// context, capped at backend.DefaultMaxContext).
	ContextLen int
	// KVTokens is the size of the KV cache pool in positions, shared by
	// every sequence (0: ContextLen, room for one full sequence).
	KVTokens int
	// Threads is the number of worker goroutines (0: all cores).
	Threads int
	// KVType is the KV cache's element type: quant.F32 (the zero value) or
	// quant.F16, half the memory.
	KVType quant.Type
}

// kvBlock is the positions of a KV cache block: a multiple of 16 (the
// attention products' tiles) and at most attnTile.
const kvBlock = 16

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

	// KV cache, per layer, in blocks of kvBlock rows handed out by kv.
	kv    *backend.KVPool
	cache *kvCache
	// single is the sequence of the single-sequence methods (Prefill,
	// Decode, Logits), made on first use.
	single *backend.Seq

	// The batch of a forward pass: its tokens' positions and sequences,
	// the runs of consecutive tokens of one sequence, and the tokens whose
	// logits the head computes (into logits, a row each).
	pos    []int
	seqs   []*backend.Seq
	rows   []int // the tokens' cache rows
	chunks []attnChunk
	outs   []int
	// attnItems are a layer's attention work items for a KV head, and
	// attnParts the split decode tokens' part states (attention).
	attnItems []attnItem
	attnParts []float32

	// Scratch for a batch of up to MaxBatch tokens.
	x      []float32 // residual stream, T × Dim
	xn     activations
	q      []float32 // T × QDim
	kv2    []float32 // T × 2·KVDim (K then V per token)
	att    activations
	att2   []float32 // T × Dim
	gateUp []float32 // T × 2·FFN
	hidden activations
	attn   []attnScratch // per worker
	tiles  []tileScratch // per worker
	logits []float32     // maxHeadRows × VocabSize
	outAct activations
}

// New prepares a backend for m.
func New(m *model.Model, o Options) (*Backend, error) {
	c := m.Config
	elem := 4
	if o.KVType == quant.F16 {
		elem = 2
	}
	ctxLen, err := backend.ContextLenKV(o.ContextLen, &c, elem)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	kvTokens := o.KVTokens
	if kvTokens <= 0 {
		kvTokens = ctxLen
	}
	if _, err := backend.ContextLenKV(kvTokens, &c, elem); err != nil {
		return nil, fmt.Errorf("cpu: KV cache pool: %w", err)
	}
	if kvTokens < ctxLen {
		return nil, fmt.Errorf("cpu: a KV cache pool of %d tokens cannot hold one context of %d", kvTokens, ctxLen)
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
	if b.kv, err = backend.NewKVPool(kvTokens, kvBlock); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if b.cache, err = newKVCache(o.KVType, c.NumLayers, c.KVDim(), c.HeadDim, b.kv.Tokens()); err != nil {
		return nil, err
	}
	T := MaxBatch
	b.pos = make([]int, 0, T)
	b.seqs = make([]*backend.Seq, 0, T)
	b.rows = make([]int, T)
	b.x = make([]float32, T*c.Dim)
	b.xn = newActivations(T, c.Dim)
	b.q = make([]float32, T*c.QDim())
	b.kv2 = make([]float32, T*2*c.KVDim())
	b.att = newActivations(T, c.QDim())
	b.att2 = make([]float32, T*c.Dim)
	b.gateUp = make([]float32, T*2*c.FFNDim)
	b.hidden = newActivations(T, c.FFNDim)
	b.attn = make([]attnScratch, threads)
	for i := range b.attn {
		b.attn[i] = newAttnScratch(c.NumHeads/c.NumKVHeads, c.HeadDim)
	}
	b.logits = make([]float32, maxHeadRows*c.VocabSize)
	b.outAct = newActivations(maxHeadRows, c.Dim)
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

// Memory implements backend.MemoryReporter: the weights as the model
// holds them (mapped from the file with Options.MMap), the KV cache, and
// the batch's scratch as allocated so far (some grows on first use).
func (b *Backend) Memory() backend.Memory {
	m := backend.Memory{Weights: b.m.WeightBytes(), KV: b.cache.bytes()}
	for _, f := range [][]float32{b.x, b.q, b.kv2, b.att2, b.gateUp, b.logits, b.attnParts} {
		m.Other += 4 * int64(cap(f))
	}
	for _, a := range []*activations{&b.xn, &b.att, &b.hidden, &b.outAct} {
		m.Other += a.bytes()
	}
	for i := range b.attn {
		m.Other += b.attn[i].bytes()
	}
	for i := range b.tiles {
		m.Other += 4*int64(cap(b.tiles[i].f)) + int64(cap(b.tiles[i].b))
	}
	return m
}

// Close stops the workers.
func (b *Backend) Close() error {
	b.closed = true
	b.pool.close()
	return nil
}

// KV is the KV cache pool (backend.Batcher).
func (b *Backend) KV() *backend.KVPool { return b.kv }

// Forward runs tokens at positions pos, pos+1, … of the backend's own
// sequence (forgetting any positions from pos on) and returns the logits
// of the last one. The returned slice is reused by the next call.
func (b *Backend) Forward(ctx context.Context, tokens []int32, pos int) ([]float32, error) {
	if err := b.reserveSingle(tokens, pos); err != nil {
		return nil, err
	}
	st := []backend.SeqStep{{Seq: b.single, Tokens: tokens, Logits: b.logits[:b.c.VocabSize]}}
	if err := b.Step(ctx, st); err != nil {
		return nil, err
	}
	return b.logits[:b.c.VocabSize], nil
}

// reserveSingle checks tokens at pos for the backend's own sequence,
// forgets its positions from pos on and reserves room for tokens.
func (b *Backend) reserveSingle(tokens []int32, pos int) error {
	if b.closed {
		return fmt.Errorf("cpu: %w", backend.ErrClosed)
	}
	if err := backend.CheckInput(tokens, pos, b.ctxLen, b.c.VocabSize); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if b.single == nil {
		b.single = b.kv.NewPrivateSeq()
	}
	if pos > b.single.Len() {
		return fmt.Errorf("cpu: position %d after %d cached positions", pos, b.single.Len())
	}
	b.single.Truncate(pos)
	if err := b.single.Reserve(len(tokens)); err != nil {
		return fmt.Errorf("cpu: %d tokens at position %d: %w", len(tokens), pos, err)
	}
	return nil
}

// ForwardAll implements backend.AllLogits: tokens at positions pos, pos+1,
// … of the backend's own sequence, as Forward runs them, each token's
// logits to out (a step whose entry wants them all).
func (b *Backend) ForwardAll(ctx context.Context, tokens []int32, pos int, out []float32) error {
	if len(out) < len(tokens)*b.c.VocabSize {
		return fmt.Errorf("cpu: the logits of %d tokens need %d floats, not %d", len(tokens), len(tokens)*b.c.VocabSize, len(out))
	}
	if err := b.reserveSingle(tokens, pos); err != nil {
		return err
	}
	return b.Step(ctx, []backend.SeqStep{{Seq: b.single, Tokens: tokens, AllLogits: out}})
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

// StepTokens implements backend.Batcher: 512 tokens, eight batches of 64
// when that was MaxBatch. 128 tokens (0.1 s of SmolLM-135M on two cores)
// measured no better time to first token under loadgen's 8 and 32
// streams, and ~10% less throughput.
func (b *Backend) StepTokens() int { return 512 }

// Step implements backend.Batcher. The tokens of all entries run through
// the layers together, MaxBatch at a time, in the entries' order.
func (b *Backend) Step(ctx context.Context, steps []backend.SeqStep) error {
	if b.closed {
		return fmt.Errorf("cpu: %w", backend.ErrClosed)
	}
	vocab := b.c.VocabSize
	if err := backend.CheckSteps(steps, b.kv, b.ctxLen, vocab, true); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	// Fill batches of up to MaxBatch tokens; the head runs on the last
	// token of each entry that wants its logits, and on every token of an
	// entry that wants them all.
	var toks [MaxBatch]int32
	var outOf, outTok [maxHeadRows]int // entry and token of each head row
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.forwardBatch(toks[:n]); err != nil {
			return err
		}
		for k := range b.outs {
			st, j := &steps[outOf[k]], outTok[k]
			row := b.logits[k*vocab : (k+1)*vocab]
			if st.AllLogits != nil {
				copy(st.AllLogits[j*vocab:(j+1)*vocab], row)
			}
			if j == len(st.Tokens)-1 {
				st.Take(row)
			}
		}
		n, b.pos, b.seqs, b.outs = 0, b.pos[:0], b.seqs[:0], b.outs[:0]
		return nil
	}
	b.pos, b.seqs, b.outs = b.pos[:0], b.seqs[:0], b.outs[:0]
	for i := range steps {
		st := &steps[i]
		p0 := st.Seq.Len()
		for j, tok := range st.Tokens {
			toks[n] = tok
			b.pos = append(b.pos, p0+j)
			b.seqs = append(b.seqs, st.Seq)
			if st.AllLogits != nil || j == len(st.Tokens)-1 && (st.Logits != nil || st.Sample) {
				outOf[len(b.outs)], outTok[len(b.outs)] = i, j
				b.outs = append(b.outs, n)
			}
			if n++; n == MaxBatch || len(b.outs) == maxHeadRows {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for i := range steps {
		steps[i].Seq.Commit(steps[i].Tokens)
	}
	return nil
}

// forwardBatch runs len(tokens) ≤ MaxBatch tokens, at positions b.pos of
// sequences b.seqs, through every layer, and leaves the logits of the
// tokens b.outs in b.logits, a row each. The block is llama's with the
// variations model.Block describes; each is a branch per layer, not per
// element, so the llama path costs what it did.
// tokensGrain is the fewest tokens a worker's share of per-token work
// takes (Backend.tokens): below it the batch runs on the caller alone.
const tokensGrain = 8

// tokens calls fn for each of the batch's T tokens, the tokens split over
// the workers. The callers run batches under tokensGrain in place: fn
// escapes to the workers, so building it costs an allocation, which a
// decode step would pay twice a layer for nothing.
func (b *Backend) tokens(T int, fn func(t int)) {
	b.pool.parallelFor(T, tokensGrain, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			fn(t)
		}
	})
}

// qkvToken finishes token t's query, key and value of layer l (ly)
// after their products: biases, Q/K norms, the rotation (r) and the
// attention temperature.
func (b *Backend) qkvToken(l int, ly *model.Layer, r *rope, t int) {
	c := &b.c
	blk := &c.Block
	qd, kvd := c.QDim(), c.KVDim()
	q := b.q[t*qd : (t+1)*qd]
	k := b.kv2[t*2*kvd : t*2*kvd+kvd]
	v := b.kv2[t*2*kvd+kvd : (t+1)*2*kvd]
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
		r.apply(q, c.NumHeads, c.HeadDim, t)
		r.apply(k, c.NumKVHeads, c.HeadDim, t)
	}
	if blk.AttnTempScale != 0 {
		scale(q, blk.AttnTemp(b.pos[t]))
	}
}

// gluToken writes token t's hidden units from its gate and up products.
func (b *Backend) gluToken(t int) {
	ffn := b.c.FFNDim
	g := b.gateUp[t*2*ffn : t*2*ffn+ffn]
	u := b.gateUp[t*2*ffn+ffn : (t+1)*2*ffn]
	if b.c.Block.Act == model.GELUTanh {
		geluTanhGLU(b.hidden.row(t), g, u)
	} else {
		quant.SwiGLU(b.hidden.row(t), g, u)
	}
}

// storeKV writes layer l's keys and values of the batch (b.kv2) into the
// tokens' cache rows (b.rows). The keys are stored transposed within each
// block of kvBlock positions (kvCache): a worker takes a range of
// dimensions for every token, so that each dimension's positions of a
// block are written in a run and two workers share a cache line only
// where their ranges meet; the values, a row a token, are split by
// tokens. Written a token at a time, each key touched KVDim cache lines
// (5% of a SmolLM-shape prefill, on the caller alone).
func (b *Backend) storeKV(l, T int) {
	kvd := b.c.KVDim()
	rows, kv := b.rows[:T], b.kv2
	if T < tokensGrain {
		b.cache.storeKeys(l, rows, kv, 2*kvd, 0, kvd)
		for t, row := range rows {
			b.cache.storeValue(l, row, kv[t*2*kvd+kvd:(t+1)*2*kvd])
		}
		return
	}
	// Items [0, kvd) are the keys' dimensions, [kvd, kvd+T) the values' tokens.
	b.pool.parallelFor(kvd+T, tokensGrain, func(_, lo, hi int) {
		if lo < kvd {
			b.cache.storeKeys(l, rows, kv, 2*kvd, lo, min(hi, kvd))
		}
		for t := max(lo, kvd) - kvd; t < hi-kvd; t++ {
			b.cache.storeValue(l, rows[t], kv[t*2*kvd+kvd:(t+1)*2*kvd])
		}
	})
}

func (b *Backend) forwardBatch(tokens []int32) error {
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
	b.rope.set(b.pos)
	if b.localRope != nil {
		b.localRope.set(b.pos)
	}
	b.setChunks()
	for t := range T {
		b.rows[t] = b.seqs[t].Row(b.pos[t])
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
			product{w: &ly.Wk, out: b.kv2, outStride: 2 * kvd},
			product{w: &ly.Wv, out: b.kv2, outStride: 2 * kvd, outOff: kvd},
		)
		// Each token's biases, Q/K norms and rotation, tokens split over
		// the workers (serial, they and the stores below were 8% of a
		// SmolLM-shape prefill).
		if T < tokensGrain {
			for t := range T {
				b.qkvToken(l, ly, rope, t)
			}
		} else {
			b.tokens(T, func(t int) { b.qkvToken(l, ly, rope, t) })
		}
		b.storeKV(l, T)
		if l == len(b.m.Layers)-1 && len(b.outs) < T {
			// Past the last layer's keys and values, only the tokens
			// whose logits are wanted matter (llama.cpp skips the last
			// FFN for the others; attention and W_o are skipped too).
			if T = b.keepOutputs(T); T == 0 {
				break
			}
			x = x[:T*dim]
			xn.t, att.t, hidden.t = T, T, T
		}
		b.attention(l)
		att.q8ok = false
		b.matmul(att, product{w: &ly.Wo, out: b.att2, outStride: dim})
		b.addBranch(x, T, ly.AttnPostNorm)

		// Feed-forward block.
		b.branchInput(x, T, ly.FFNNorm)
		b.matmul(xn,
			product{w: &ly.Gate, out: b.gateUp, outStride: 2 * ffn},
			product{w: &ly.Up, out: b.gateUp, outStride: 2 * ffn, outOff: ffn},
		)
		if T < tokensGrain {
			for t := range T {
				b.gluToken(t)
			}
		} else {
			b.tokens(T, b.gluToken)
		}
		hidden.q8ok = false
		b.matmul(hidden, product{w: &ly.Down, out: b.att2, outStride: dim})
		b.addBranch(x, T, ly.FFNPostNorm)
	}

	// Output head, on the tokens whose logits are wanted.
	if len(b.outs) == 0 {
		return nil
	}
	out := &b.outAct
	out.t, out.q8ok = len(b.outs), false
	for k, t := range b.outs {
		rmsNorm(out.row(k), x[t*dim:(t+1)*dim], f32s(b.m.OutputNorm.Data), c.RMSEps)
	}
	logits := b.logits[:len(b.outs)*c.VocabSize]
	b.matmul(out, product{w: &b.m.Output, out: logits, outStride: c.VocabSize})
	if blk.LogitScale != 1 {
		scale(logits, blk.LogitScale)
	}
	if blk.FinalSoftcap != 0 {
		softcap(logits, blk.FinalSoftcap)
	}
	return nil
}

// keepOutputs moves the residual stream and the queries of the batch's T
// tokens whose logits are wanted (b.outs) to its first rows, in order,
// with their positions and sequences, and returns how many there are
// (outs must be in token order). Of a prompt only the last token goes on
// through the last layer's attention, W_o and FFN: for an L-layer model
// the prefill does 1/L less of that work.
func (b *Backend) keepOutputs(T int) int {
	dim, qd := b.c.Dim, b.c.QDim()
	for k, t := range b.outs { // t ≥ k: rows move down
		copy(b.x[k*dim:(k+1)*dim], b.x[t*dim:(t+1)*dim])
		copy(b.q[k*qd:(k+1)*qd], b.q[t*qd:(t+1)*qd])
		b.pos[k], b.seqs[k], b.outs[k] = b.pos[t], b.seqs[t], k
	}
	n := len(b.outs)
	b.pos, b.seqs = b.pos[:n], b.seqs[:n]
	b.setChunks()
	return n
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
