package cuda

import (
	"context"
	"fmt"

	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/sample"
)

// prefillChunk is the most prompt tokens one batched pass takes. Longer
// prompts run in chunks, each attending to the cache the earlier ones
// filled. 512 rows are 8 gemm row tiles, enough blocks to fill the GPU,
// while a chunk's scratch stays small (5.6 MB for SmolLM-135M).
const prefillChunk = 512

// prefillPDLMax is the longest chunk launched with programmatic dependent
// launch. PDL lets a kernel's blocks start while the previous kernel drains,
// which saves the gaps between small kernels, but the early blocks hold SM
// resources while they wait: on the H200 a 512-token chunk of SmolLM-135M
// ran 21% slower with it (3.42 against 2.83 ms), a 128-token one 10% faster
// (2.19 against 2.43 ms).
const prefillPDLMax = 128

// prefillStepsMax is the longest prompt that goes through the decode graph
// instead: there a token costs ~0.7 ms on the H200 for SmolLM-135M, while a
// batched chunk costs ~1.9 ms however short (242 kernel launches).
const prefillStepsMax = 2

// prefill is the batched prefill: the prompt's tokens go through each layer
// together, the projections as tensor-core gemms over the quantized weights
// the decode step uses (nothing is uploaded twice), causal attention over
// the chunk writing K and V into the cache, and only the last position
// through the output head, sampled on the device.
type prefill struct {
	l      launcher
	chunk  int
	pdlMax int            // chunks of at most this many tokens use programmatic dependent launch
	tokens *cu.HostBuffer // the prompt, pinned, ctxLen int32
	dtok   cu.DevicePtr   // the prompt on the device
	x      cu.DevicePtr   // residual stream, f32 [chunk][dim]
	xn     cu.DevicePtr   // normalized input or attention output, f16 [chunk][max(dim, qdim)]
	qkv    cu.DevicePtr   // Q, K, V projections, f32 [chunk][qdim+2·kvdim]
	q      cu.DevicePtr   // roped queries, f16 [chunk][qdim]
	h      cu.DevicePtr   // act(gate)·up, f16 [chunk][ffn]
	// branch holds a branch's output before its post-norm or residual
	// multiplier, f32 [chunk][dim] (0: the model has neither; the
	// projections add into x).
	branch cu.DevicePtr
}

// prefillUnsupported says why the batched prefill cannot run this model
// ("" when it can): it needs projection and FFN weights of a family the
// gemm reads (gemmTypes: every one but F32) in whole 32-element blocks, an
// embedding prefill_embed reads and a head dimension prefill_attention is
// built for. Such models prefill through the decode graph, a token at a
// time.
func (b *Backend) prefillUnsupported() string {
	k := &b.k.pre
	if k.attention[b.cfg.HeadDim] == nil {
		return fmt.Sprintf("no prefill attention for head dimension %d", b.cfg.HeadDim)
	}
	if k.embed[b.embd.Type] == nil {
		return fmt.Sprintf("no prefill embedding for %s", b.embd.Type.suffix())
	}
	for i := range b.layers {
		ly := &b.layers[i]
		for _, w := range []*deviceMatrix{&ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.gate, &ly.up, &ly.down} {
			if k.gemm[w.Type][gemmStore][gemmSmall] == nil {
				return fmt.Sprintf("layer %d: no prefill gemm for %s weights", i, w.Type.suffix())
			}
			if w.Cols%32 != 0 {
				// The gemm takes whole 32-element blocks; F16/BF16 rows
				// need not be.
				return fmt.Sprintf("layer %d: rows of %d elements, not whole 32-element blocks", i, w.Cols)
			}
		}
	}
	return ""
}

// batchedPrefill says whether a prompt of n tokens takes the batched path.
func (b *Backend) batchedPrefill(n int) bool {
	return b.pre != nil && b.debug == nil && n > prefillStepsMax
}

// setupPrefill allocates the batched prefill's scratch when the model can
// use it (b.pre stays nil otherwise); l is the engine's launcher.
func (b *Backend) setupPrefill(l launcher) error {
	if b.prefillUnsupported() != "" {
		return nil
	}
	c := &b.cfg
	p := &prefill{l: l, chunk: min(prefillChunk, b.ctxLen), pdlMax: prefillPDLMax}
	var err error
	if p.tokens, err = b.c.AllocHost(4 * b.ctxLen); err != nil {
		return fmt.Errorf("cuda: prefill: %w", err)
	}
	b.pre = p // Close frees tokens from here on
	type buf struct {
		p     *cu.DevicePtr
		bytes int
	}
	bufs := []buf{
		{&p.dtok, 4 * b.ctxLen},
		{&p.x, 4 * p.chunk * c.Dim},
		{&p.xn, 2 * p.chunk * max(c.Dim, c.QDim())},
		{&p.qkv, 4 * p.chunk * (c.QDim() + 2*c.KVDim())},
		{&p.q, 2 * p.chunk * c.QDim()},
		{&p.h, 2 * p.chunk * c.FFNDim},
		{&p.branch, 4 * p.chunk * c.Dim},
	}
	if !c.Block.PostNorm && c.Block.ResidualScale == 1 {
		bufs = bufs[:len(bufs)-1] // no branch
	}
	// Two buffers of f16 copies (prefill_dequant.go): one a product
	// reads, one the side stream writes.
	var ahead cu.DevicePtr
	if n := b.dequantScratch(); n > 0 && p.l.wgGemm && p.chunk >= dequantMinRows {
		p.l.dequantBytes, p.l.dequantMin = n, dequantMinRows
		bufs = append(bufs, buf{&p.l.dequant, n}, buf{&ahead, n})
	}
	if n := b.bf16ActScratch(p.chunk); n > 0 && p.l.wgGemm {
		p.l.bf16ActBytes = n
		bufs = append(bufs, buf{&p.l.bf16Act, n})
	}
	// One allocation: each of its own is rounded up to the driver's
	// granularity (2 MiB), which took the 8B shape's workspace past 64 MiB.
	total := 0
	for _, a := range bufs {
		total += alignUp(a.bytes)
	}
	base, err := b.alloc(total)
	if err != nil {
		return fmt.Errorf("cuda: prefill scratch: %w", err)
	}
	off := 0
	for _, a := range bufs {
		*a.p = base.Offset(off)
		off += alignUp(a.bytes)
	}
	if ahead != 0 {
		if p.l.dq, err = newDequantAhead(b.c, p.l.dequant, ahead); err != nil {
			return fmt.Errorf("cuda: prefill side stream: %w", err)
		}
	}
	return nil
}

// closePrefill frees what Close's list of device allocations does not hold.
func (b *Backend) closePrefill() error {
	if b.pre == nil {
		return nil
	}
	b.pre.l.dq.close(b.c)
	return b.c.FreeHost(b.pre.tokens)
}

// prefillSteps runs the prompt one token at a time through the decode
// graph: the path for models without prefill kernels, and the reference
// the batched path is tested against.
func (b *Backend) prefillSteps(ctx context.Context, tokens []int32, pos int, s *sample.Sampler) (int32, error) {
	for i, t := range tokens[:len(tokens)-1] {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if _, err := b.step(t, pos+i); err != nil {
			return 0, err
		}
	}
	return b.Decode(ctx, tokens[len(tokens)-1], pos+len(tokens)-1, s)
}

// prefillBatched runs the prompt (already checked against the context) in
// chunks and returns the device's greedy choice for the next token; the
// last position's logits stay in b.logits for other samplers.
func (b *Backend) prefillBatched(ctx context.Context, tokens []int32, pos int) (int32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p := b.pre
	// The stream is idle here (every call ends synchronized), so the pinned
	// buffer is free to rewrite.
	w := p.tokens.Uint32s()
	for i, t := range tokens {
		w[i] = uint32(t)
	}
	fail := func(err error) (int32, error) {
		b.c.SyncStream(b.stream) // leave nothing running that reads the buffers
		return 0, err
	}
	if err := b.c.CopyHtoDAsync(p.dtok, p.tokens, 0, 4*len(tokens), b.stream); err != nil {
		return fail(err)
	}
	last := 0
	for c0 := 0; c0 < len(tokens); c0 += p.chunk {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		last = min(p.chunk, len(tokens)-c0)
		l := p.l
		l.pdl = p.l.pdl && last <= p.pdlMax
		keep := 0 // only the prompt's last token goes past the last layer's keys and values
		if c0+last == len(tokens) {
			keep = 1
		}
		if err := b.recordPrefill(&l, p.dtok.Offset(4*c0), last, pos+c0, keep, nil); err != nil {
			return fail(err)
		}
	}
	b.logitsPos = pos + len(tokens) - 1
	if err := b.recordPrefillHead(p.x.Offset(4 * (last - 1) * b.cfg.Dim)); err != nil {
		return fail(err)
	}
	if err := b.c.SyncStream(b.stream); err != nil {
		return 0, fmt.Errorf("cuda: prefill of %d tokens at position %d: %w", len(tokens), pos, err)
	}
	return int32(b.host.Uint32s()[ioResult]), nil
}

// recordPrefillHead enqueues the output head on the prompt's last row x
// (f32) into b.logits, and its greedy choice into the host word ioResult:
// as one row of the head's gemm where the model has it. logits_float_*,
// which reads the float row in the decode head's shape, took 870 µs for
// Llama-8B's Q6_K head (0.19 TB/s; the decode step's head on int8
// activations takes 143).
func (b *Backend) recordPrefillHead(x cu.DevicePtr) error {
	c, p := &b.cfg, b.pre
	if !b.headGemm() {
		return p.l.logits(logitsArgs{x: x, normW: b.outNorm, eps: c.RMSEps, w: &b.output,
			scale: c.Block.LogitScale, softcap: c.Block.FinalSoftcap,
			logits: b.logits, partV: b.partV, partI: b.partI, ticket: b.ticket, result: b.host.Device.Offset(4 * ioResult)})
	}
	return b.recordHeadGemm(&p.l, x, 1, b.logits, b.host.Device.Offset(4*ioResult), true)
}

// recordPrefill enqueues every layer for m prompt tokens (int32 at tok) at
// positions pos0.., leaving the residual stream in b.pre.x. The block's
// variations are the decode step's (recordStep), as arguments of the same
// kernels but for the Q/K norms (prefill_qk_norm, before prefill_rope) and
// the post-norms and residual multipliers (the projection stores its
// product, and prefill_branch adds it to x).
//
// Past the last layer's keys and values only the chunk's last keep rows
// go on (keep < m; their residual stream stays in its rows of x): the
// others' attention, W_o and FFN there change nothing anyone reads.
// Prefill keeps the prompt's last token (1/L of its work less: 3% at
// Llama-8B, 6% at Llama-1B), none of an earlier chunk.
//
// With ba, the tokens are a batched step's (batch.go): each at its own
// position, its K and V written to its row of the KV pool, attention over
// each segment's sequence; pos0 is unused, and every row is kept.
func (b *Backend) recordPrefill(l *launcher, tok cu.DevicePtr, m, pos0, keep int, ba *batchArgs) (err error) {
	c, p := &b.cfg, b.pre
	blk := &c.Block
	if ba == nil {
		// A chunk that fails (its plan too) leaves no plan behind: a
		// batched step's graph capture must not meet the side stream.
		defer func() {
			if err != nil {
				l.dq.end(l)
			}
		}()
		if err := l.dq.plan(l, b.dequantPlan(l, m, keep)); err != nil {
			return err
		}
	}
	if err := l.prefillEmbed(tok, m, &b.embd, blk.EmbedScale, p.x); err != nil {
		return err
	}
	for i := range b.layers {
		ly := &b.layers[i]
		if err := l.prefillNorm(p.x, ly.attnNorm, c.RMSEps, m, c.Dim, p.xn); err != nil {
			return err
		}
		if err := b.prefillQKV(l, ly, m); err != nil {
			return err
		}
		biasFrom := 0
		if ly.qNorm != 0 {
			err := l.prefillQKNorm(p.qkv, m, ly.bias, c.NumHeads, c.NumKVHeads, c.HeadDim, blk.QKNorm == model.QKNormFull,
				ly.qNorm, ly.kNorm, c.RMSEps)
			if err != nil {
				return err
			}
			biasFrom = c.NumHeads + c.NumKVHeads
		}
		ropeCS, ropeDim := b.layerRope(i)
		ra := ropeArgs{qkv: p.qkv, bias: ly.bias, biasFrom: biasFrom, m: m, pos0: pos0, nHead: c.NumHeads,
			nKV: c.NumKVHeads, hd: c.HeadDim, ropeCS: ropeCS, ropeDim: ropeDim, neox: c.Rope.Neox, temp: b.temp, q: p.q,
			kCache: ly.kCache, vCache: ly.vCache, ctxMax: b.ctxLen}
		if ba != nil {
			ra.kCache, ra.vCache, ra.ctxMax = b.bt.kCache[i], b.bt.vCache[i], b.bt.rows
			ra.posOf, ra.rowOf = ba.pos, ba.row
		}
		if err := l.prefillRope(ra); err != nil {
			return err
		}
		// The rows that go on: x from row m-mo, mo of them.
		x, mo := p.x, m
		if i == len(b.layers)-1 && ba == nil && keep < m {
			if keep <= 0 {
				break
			}
			x, mo = p.x.Offset(4*(m-keep)*c.Dim), keep
		}
		var err error
		if ba == nil {
			err = l.prefillAttention(prefillAttnArgs{q: p.q.Offset(2 * (m - mo) * c.QDim()), m: mo, pos0: pos0 + m - mo,
				kCache: ly.kCache, vCache: ly.vCache,
				ctxMax: b.ctxLen, nHead: c.NumHeads, nKV: c.NumKVHeads, hd: c.HeadDim, scale: blk.AttnScale,
				window: c.LayerAttn[i].Window, softcap: blk.AttnSoftcap, out: p.xn})
		} else {
			err = l.prefillAttentionPaged(pagedAttnArgs{q: p.q, seg: ba.seg, segs: ba.segs, maxRows: ba.maxRows,
				tables: ba.tables, bs: batchBlock, kCache: b.bt.kCache[i], vCache: b.bt.vCache[i], rows: b.bt.rows,
				nHead: c.NumHeads, nKV: c.NumKVHeads, hd: c.HeadDim, scale: blk.AttnScale,
				window: c.LayerAttn[i].Window, softcap: blk.AttnSoftcap, out: p.xn})
		}
		if err != nil {
			return err
		}
		if err := b.prefillProject(l, p.xn, mo, &ly.wo, ly.attnPost, x); err != nil {
			return err
		}
		if err := l.prefillNorm(x, ly.ffnNorm, c.RMSEps, mo, c.Dim, p.xn); err != nil {
			return err
		}
		if err := l.gemmGLU(p.xn, mo, &ly.gate, &ly.up, blk.Act, p.h); err != nil {
			return err
		}
		if err := b.prefillProject(l, p.h, mo, &ly.down, ly.ffnPost, x); err != nil {
			return err
		}
	}
	return l.dq.end(l)
}

// prefillProject adds a branch's last projection, w times the f16
// activations a of m tokens, to their residual stream x: in the gemm, or
// (post-norm postNorm set, or a residual multiplier) through p.branch and
// prefill_branch.
func (b *Backend) prefillProject(l *launcher, a cu.DevicePtr, m int, w *deviceMatrix, postNorm, x cu.DevicePtr) error {
	c, p := &b.cfg, b.pre
	if postNorm == 0 && c.Block.ResidualScale == 1 {
		return l.gemm(a, m, w, gemmAdd, x)
	}
	if err := l.gemm(a, m, w, gemmStore, p.branch); err != nil {
		return err
	}
	return l.prefillBranch(p.branch, postNorm, c.RMSEps, c.Block.ResidualScale, m, c.Dim, x)
}

// sampleLogits draws the next token from the logits of position pos on the
// host (samplers the device does not run).
// prefillQKV multiplies the chunk's normalized rows by Q, K and V into
// p.qkv: one product when they are stacked, else one each, side by side.
func (b *Backend) prefillQKV(l *launcher, ly *layerWeights, m int) error {
	p := b.pre
	epi := gemmStore
	if l.splitK && m <= gemmTiles[gemmSmall].m {
		// Split-K adds: into zeros.
		c := &b.cfg
		if err := b.c.MemsetD32Async(p.qkv, 0, m*(c.QDim()+2*c.KVDim()), l.stream); err != nil {
			return err
		}
		epi = gemmAdd
	}
	if ly.qkv.Rows > 0 {
		return l.gemm(p.xn, m, &ly.qkv, epi, p.qkv)
	}
	n := ly.wq.Rows + ly.wk.Rows + ly.wv.Rows
	col := 0
	for _, w := range []*deviceMatrix{&ly.wq, &ly.wk, &ly.wv} {
		if err := l.gemmInto(p.xn, m, w, nil, 0, epi, p.qkv.Offset(4*col), n); err != nil {
			return err
		}
		col += w.Rows
	}
	return nil
}

func (b *Backend) sampleLogits(s *sample.Sampler, pos int) (int32, error) {
	logits, err := b.readLogits(pos)
	if err != nil {
		return 0, err
	}
	// -1 when no logit is finite, as Decode and the CPU backend report it.
	return s.Sample(logits), nil
}
