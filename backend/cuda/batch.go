package cuda

import (
	"context"
	"errors"
	"fmt"

	"gotok/backend"
	"gotok/backend/cuda/cu"
	"gotok/sample"
)

// batchBlock is the positions of a KV pool block on the GPU.
const batchBlock = 16

// Batched is a Backend that also runs steps of many sequences
// (backend.Batcher): their keys and values live in a KV pool of their
// own, apart from the single-sequence cache the decode graphs read, and a
// step runs as the batched prefill does: every projection a tensor-core
// gemm over the step's tokens (each weight read once for all of them),
// RoPE at each token's own position, attention over each sequence's
// blocks (prefill_attention's paged kernels), and the output head as one
// gemm over the rows to sample, with the greedy choice of each made on the
// device (rows_argmax). Entries that want every token's logits
// (SeqStep.AllLogits) take the head on all their rows, up to headRowsMax
// of them a pass (planPasses).
//
// A step of one sequence runs on the single-sequence path instead (the
// decode graphs, the batched prefill): that sequence becomes resident, its
// keys and values copied from its pool rows into the single-sequence cache
// (kv_copy), and its new rows are written back to the pool when another
// sequence's step comes or it is freed. So one generation alone runs as
// fast as it does without batching, and pool rows are current whenever a
// batched step (or a sequence reusing their blocks) reads them.
//
// Not yet: CUDA graphs for the batched step (its kernels are launched one
// by one).
type Batched struct {
	*Backend
}

// batch is the batched step's state.
type batch struct {
	kv             *backend.KVPool
	kCache, vCache []cu.DevicePtr // per layer, f16 [n_kv][rows][head_dim]
	rows           int
	maxOut         int // head rows a pass: the most sequences a step takes
	tableMax       int // block table entries a pass holds
	// in is the pass's input, pinned: int32 tokens, positions and cache
	// rows [chunk], segments [chunk][4], head rows [maxOut], block tables
	// [tableMax]; then the head's choices [maxOut]. din mirrors it.
	in     *cu.HostBuffer
	din    cu.DevicePtr
	xo     cu.DevicePtr // the head's input rows, f32 [maxOut][dim]
	logits cu.DevicePtr // f32 [maxOut][vocab]
	// host logits of rows sampled on the host, [maxOut][vocab]
	hostLogits *cu.HostBuffer
	// res is the resident sequence, whose rows are in the single-sequence
	// cache; those from resSynced on are not in the pool yet. failed is a
	// write-back that failed in Seq.Free, where it could not be returned:
	// the pool may be stale, so every later step fails.
	res       *backend.Seq
	resSynced int
	failed    error
	// graphs of decode passes by sequence count (recordPass)
	graphs map[int]*cu.Graph
	// noSplitK turns split-K off (TestBatchedSpeed's comparison).
	noSplitK bool
}

// input offsets (int32 words) in batch.in.
func (bt *batch) offsets(chunk int) (pos, row, seg, out, table, ids int) {
	pos = chunk
	row = 2 * chunk
	seg = 3 * chunk
	out = 7 * chunk
	table = out + bt.maxOut
	ids = table + bt.tableMax
	return
}

// EnableBatching sets up batched steps with a KV pool of kvTokens
// positions for up to maxSeqs sequences a step. It fails for models the
// batched prefill cannot run (then generations take turns on the decode
// graphs).
func (b *Backend) EnableBatching(kvTokens, maxSeqs int) (*Batched, error) {
	if b.bt != nil {
		return &Batched{b}, nil
	}
	if b.pre == nil {
		return nil, fmt.Errorf("cuda: no batched steps: %s", b.prefillUnsupported())
	}
	if !b.headGemm() {
		return nil, fmt.Errorf("cuda: no batched steps: no gemm for the %s output head", b.output.Type.suffix())
	}
	c := &b.cfg
	if _, err := backend.ContextLenKV(kvTokens, c, KVElemBytes); err != nil {
		return nil, fmt.Errorf("cuda: KV cache pool: %w", err)
	}
	if kvTokens < b.ctxLen {
		return nil, fmt.Errorf("cuda: a KV cache pool of %d tokens cannot hold one context of %d", kvTokens, b.ctxLen)
	}
	kv, err := backend.NewKVPool(kvTokens, batchBlock)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	chunk := b.pre.chunk
	bt := &batch{kv: kv, rows: kv.Tokens(), maxOut: min(max(maxSeqs, 1), chunk), graphs: map[int]*cu.Graph{}}
	bt.tableMax = chunk + bt.maxOut*((b.ctxLen+batchBlock-1)/batchBlock)
	_, _, _, _, _, ids := bt.offsets(chunk)
	words := ids + bt.maxOut
	if bt.in, err = b.c.AllocHost(4 * words); err != nil {
		return nil, fmt.Errorf("cuda: batch: %w", err)
	}
	b.bt = bt // Close frees the host buffers from here on
	if bt.hostLogits, err = b.c.AllocHost(4 * bt.maxOut * c.VocabSize); err != nil {
		return nil, fmt.Errorf("cuda: batch: %w", err)
	}
	for _, a := range []struct {
		p     *cu.DevicePtr
		bytes int
	}{
		{&bt.din, 4 * words},
		{&bt.xo, 4 * bt.maxOut * c.Dim},
		{&bt.logits, 4 * bt.maxOut * c.VocabSize},
	} {
		if *a.p, err = b.alloc(a.bytes); err != nil {
			return nil, fmt.Errorf("cuda: batch scratch: %w", err)
		}
	}
	kv.SetOnFree(func(s *backend.Seq) {
		if s == bt.res {
			(&Batched{b}).flushResident() // a failure sets bt.failed
		}
	})
	cache := KVElemBytes * bt.rows * c.KVDim()
	bt.kCache = make([]cu.DevicePtr, c.NumLayers)
	bt.vCache = make([]cu.DevicePtr, c.NumLayers)
	for i := range bt.kCache {
		if bt.kCache[i], err = b.alloc(cache); err != nil {
			return nil, fmt.Errorf("cuda: KV cache pool: %w", err)
		}
		if bt.vCache[i], err = b.alloc(cache); err != nil {
			return nil, fmt.Errorf("cuda: KV cache pool: %w", err)
		}
	}
	return &Batched{b}, nil
}

// Prefill implements backend.Backend on the single-sequence cache, which
// the resident sequence of the batched steps gives up first.
func (b *Batched) Prefill(ctx context.Context, tokens []int32, pos int, s *sample.Sampler) (int32, error) {
	if err := b.flushResident(); err != nil {
		return 0, err
	}
	return b.Backend.Prefill(ctx, tokens, pos, s)
}

// Decode implements backend.Backend as Prefill does.
func (b *Batched) Decode(ctx context.Context, token int32, pos int, s *sample.Sampler) (int32, error) {
	if err := b.flushResident(); err != nil {
		return 0, err
	}
	return b.Backend.Decode(ctx, token, pos, s)
}

// Logits implements backend.Backend as Prefill does.
func (b *Batched) Logits(ctx context.Context, token int32, pos int) ([]float32, error) {
	if err := b.flushResident(); err != nil {
		return nil, err
	}
	return b.Backend.Logits(ctx, token, pos)
}

// closeBatch frees what Close's list of device allocations does not hold.
func (b *Backend) closeBatch() error {
	if b.bt == nil {
		return nil
	}
	err := b.c.FreeHost(b.bt.in)
	for _, g := range b.bt.graphs {
		err = errors.Join(err, g.Destroy())
	}
	if b.bt.hostLogits != nil {
		err = errors.Join(err, b.c.FreeHost(b.bt.hostLogits))
	}
	return err
}

// StepTokens implements backend.Batcher: one prefill chunk.
func (b *Batched) StepTokens() int { return b.pre.chunk }

// KV implements backend.Batcher.
func (b *Batched) KV() *backend.KVPool { return b.bt.kv }

// Step implements backend.Batcher. The entries' tokens go through in
// passes (planPasses) of up to a prefill chunk, each holding whole entries
// where they fit; an entry longer than the chunk spans passes.
func (b *Batched) Step(ctx context.Context, steps []backend.SeqStep) error {
	if b.c == nil {
		return fmt.Errorf("cuda: %w", backend.ErrClosed)
	}
	bt, vocab := b.bt, b.cfg.VocabSize
	if err := backend.CheckSteps(steps, bt.kv, b.ctxLen, vocab, true); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if bt.failed != nil {
		return bt.failed
	}
	if len(steps) == 1 {
		return b.stepAlone(ctx, &steps[0])
	}
	if err := b.flushResident(); err != nil {
		return err
	}
	for _, pass := range planPasses(steps, b.pre.chunk, bt.maxOut, headRowsMax) {
		if err := b.runPass(ctx, steps, pass); err != nil {
			return err
		}
	}
	for i := range steps {
		steps[i].Seq.Commit(steps[i].Tokens)
	}
	return nil
}

// planPasses cuts a step into passes, in the entries' order: a pass takes
// entries (or parts of one) while their tokens fit the chunk, the head
// rows of their last tokens maxOut, and the rows of entries that want
// every token's logits (SeqStep.AllLogits, whose last token's logits are
// among them) allRows, the head buffer's rows.
func planPasses(steps []backend.SeqStep, chunk, maxOut, allRows int) [][]passEntry {
	var passes [][]passEntry
	var pass []passEntry
	n, outs, alls := 0, 0, 0
	for i := range steps {
		st := &steps[i]
		all := st.AllLogits != nil
		for done := 0; done < len(st.Tokens); {
			k := min(len(st.Tokens)-done, chunk-n)
			if all {
				k = min(k, allRows-alls)
			}
			last := done+k == len(st.Tokens)
			wantsOut := !all && last && (st.Sample || st.Logits != nil)
			if k == 0 || (wantsOut && outs == maxOut) {
				passes = append(passes, pass)
				pass, n, outs, alls = nil, 0, 0, 0
				continue
			}
			pass = append(pass, passEntry{entry: i, from: done, n: k, out: wantsOut, all: all})
			n += k
			if wantsOut {
				outs++
			}
			if all {
				alls += k
			}
			done += k
		}
	}
	if len(pass) > 0 {
		passes = append(passes, pass)
	}
	return passes
}

// stepAlone runs a step of one sequence on the single-sequence path,
// making it resident first.
func (b *Batched) stepAlone(ctx context.Context, st *backend.SeqStep) error {
	bt, seq := b.bt, st.Seq
	pos := seq.Len()
	if bt.res != seq {
		if err := b.flushResident(); err != nil {
			return err
		}
		if pos > 0 {
			if err := b.copyKV(seq, 0, pos, false); err != nil {
				return err
			}
		}
		bt.res, bt.resSynced = seq, pos
	}
	toks, n := st.Tokens, len(st.Tokens)
	var err error
	switch {
	case st.AllLogits != nil:
		if err = b.Backend.ForwardAll(ctx, toks, pos, st.AllLogits); err != nil {
			return err
		}
		vocab := b.cfg.VocabSize
		st.Take(st.AllLogits[(n-1)*vocab : n*vocab])
	case st.Logits != nil:
		if n > 1 {
			if _, err = b.Backend.Prefill(ctx, toks[:n-1], pos, nil); err != nil {
				return err
			}
		}
		l, err := b.Backend.Logits(ctx, toks[n-1], pos+n-1)
		if err != nil {
			return err
		}
		st.Take(l)
	case st.Sample && n == 1:
		st.Next, err = b.Backend.Decode(ctx, toks[0], pos, st.Sampler)
	case st.Sample:
		st.Next, err = b.Backend.Prefill(ctx, toks, pos, st.Sampler)
	default:
		_, err = b.Backend.Prefill(ctx, toks, pos, nil)
	}
	if err != nil {
		return err
	}
	seq.Commit(toks)
	return nil
}

// flushResident writes the resident sequence's new rows back to the pool
// and ends its residency.
func (b *Batched) flushResident() error {
	bt := b.bt
	res := bt.res
	if res == nil {
		return nil
	}
	bt.res = nil
	if from, to := bt.resSynced, res.Len(); to > from {
		if err := b.copyKV(res, from, to, true); err != nil {
			// The pool's copy of the sequence (and any block of it in the
			// prefix cache) is stale: nothing may read the pool again.
			bt.failed = fmt.Errorf("cuda: writing a sequence back to the KV pool: %w", err)
			return bt.failed
		}
	}
	return nil
}

// copyKV copies positions [from, to) of seq between its pool rows and the
// single-sequence cache (into the pool with toPool).
func (b *Batched) copyKV(seq *backend.Seq, from, to int, toPool bool) error {
	if err := b.settle(); err != nil { // the decode graphs' run-ahead
		return err
	}
	bt, c := b.bt, &b.cfg
	chunk := b.pre.chunk
	_, _, _, _, oTable, _ := bt.offsets(chunk)
	table := seq.Table()
	need := (to + batchBlock - 1) / batchBlock
	if need > bt.tableMax {
		return fmt.Errorf("cuda: a block table of %d entries passes %d", need, bt.tableMax)
	}
	w := bt.in.Uint32s()
	for j := range need {
		w[oTable+j] = uint32(table[j])
	}
	fail := func(err error) error {
		b.c.SyncStream(b.stream)
		return err
	}
	if err := b.c.CopyHtoDAsync(bt.din.Offset(4*oTable), bt.in, 4*oTable, 4*need, b.stream); err != nil {
		return fail(err)
	}
	l := b.pre.l
	l.pdl = false
	n := (to - from) * c.NumKVHeads * c.HeadDim / 4
	for i, ly := range b.layers {
		err := l.launch(b.k.kvCopy, cu.Dim(min((n+255)/256, 4096)), 256, 0, cu.Args{ly.kCache, ly.vCache, i32(b.ctxLen),
			bt.kCache[i], bt.vCache[i], i32(bt.rows), bt.din.Offset(4 * oTable), i32(batchBlock), i32(c.NumKVHeads),
			i32(c.HeadDim), i32(from), i32(to), b32(toPool)})
		if err != nil {
			return fail(err)
		}
	}
	if err := b.c.SyncStream(b.stream); err != nil {
		return fmt.Errorf("cuda: copying %d positions of a sequence's KV cache: %w", to-from, err)
	}
	return nil
}

// passEntry is tokens [from, from+n) of steps[entry] in a pass; out: the
// last of them goes through the head; all: every one of them does, into
// the head rows of every token's logits (headRows).
type passEntry struct {
	entry, from, n int
	out, all       bool
}

// runPass runs one pass: its inputs up in one copy, the layers, the head
// on its out rows, the choices (and host-sampled rows' logits) back.
func (b *Batched) runPass(ctx context.Context, steps []backend.SeqStep, pass []passEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bt, c, p := b.bt, &b.cfg, b.pre
	chunk := p.chunk
	oPos, oRow, oSeg, oOut, oTable, oIDs := bt.offsets(chunk)
	w := bt.in.Uint32s()
	// allFrom is the first token in the pass of each entry part that
	// wants every token's logits, nall their tokens.
	var allFrom []int
	nall := 0
	t, nt, nout, maxRows := 0, 0, 0, 0
	for si, pe := range pass {
		st := &steps[pe.entry]
		seq := st.Seq
		pos0 := seq.Len() + pe.from
		// The table covers the positions this pass writes: reserved.
		table := seq.Table()
		need := (pos0 + pe.n + batchBlock - 1) / batchBlock
		if nt+need > bt.tableMax {
			return fmt.Errorf("cuda: batch: block tables of %d entries pass %d", nt+need, bt.tableMax)
		}
		for j := range need {
			w[oTable+nt+j] = uint32(table[j])
		}
		w[oSeg+4*si], w[oSeg+4*si+1], w[oSeg+4*si+2], w[oSeg+4*si+3] = uint32(t), uint32(pe.n), uint32(pos0), uint32(nt)
		nt += need
		for j := range pe.n {
			pos := pos0 + j
			w[t+j] = uint32(st.Tokens[pe.from+j])
			w[oPos+t+j] = uint32(pos)
			w[oRow+t+j] = uint32(int(table[pos/batchBlock])*batchBlock + pos%batchBlock)
		}
		if pe.all {
			allFrom = append(allFrom, t)
			nall += pe.n
		}
		t += pe.n
		maxRows = max(maxRows, pe.n*(c.NumHeads/c.NumKVHeads))
		if pe.out {
			w[oOut+nout] = uint32(t - 1)
			nout++
		}
	}
	fail := func(err error) error {
		b.c.SyncStream(b.stream) // leave nothing running that reads the buffers
		return err
	}
	if err := b.c.CopyHtoDAsync(bt.din, bt.in, 0, 4*oIDs, b.stream); err != nil {
		return fail(err)
	}
	in := func(off int) cu.DevicePtr { return bt.din.Offset(4 * off) }
	// A pass of decode tokens alone (one a sequence, each sampled) has
	// the same launches for the same number of sequences whatever they
	// are: it replays a graph captured for that number, its inputs read
	// from din. Others launch kernel by kernel.
	decodeOnly := nout == len(pass) && t == len(pass) && nall == 0
	record := func() error { return b.recordPass(t, len(pass), maxRows, nout, oOut) }
	if !decodeOnly || b.debug != nil {
		if err := record(); err != nil {
			return fail(err)
		}
	} else {
		g := bt.graphs[t]
		if g == nil {
			var err error
			if g, err = b.c.Capture(b.stream, record); err != nil {
				return fail(fmt.Errorf("cuda: capturing the batched step of %d sequences: %w", t, err))
			}
			bt.graphs[t] = g
		}
		if err := g.Launch(b.stream); err != nil {
			return fail(err)
		}
	}
	var hr *headRows
	if nall > 0 {
		// The rows of entries that want every token's logits, each part
		// a run of the residual stream's rows, through the head into
		// hr's rows in the pass's order.
		var err error
		if hr, err = b.headRowBuffers(); err != nil {
			return fail(err)
		}
		l := p.l
		l.pdl = p.l.pdl && t <= p.pdlMax
		at, k := 0, 0
		for _, pe := range pass {
			if !pe.all {
				continue
			}
			if err := b.recordHeadRows(&l, hr, p.x.Offset(4*allFrom[k]*c.Dim), pe.n, at); err != nil {
				return fail(err)
			}
			at += pe.n
			k++
		}
		if err := b.c.CopyDtoHAsync(hr.host, 0, hr.logits, 4*nall*c.VocabSize, b.stream); err != nil {
			return fail(err)
		}
	}
	if nout > 0 {
		if err := b.c.CopyDtoHAsync(bt.in, 4*oIDs, in(oIDs), 4*nout, b.stream); err != nil {
			return fail(err)
		}
		k := 0
		for _, pe := range pass {
			st := &steps[pe.entry]
			if pe.out && (st.Logits != nil || (st.Sample && !greedySampler(st.Sampler))) {
				if err := b.c.CopyDtoHAsync(bt.hostLogits, 4*k*c.VocabSize, bt.logits.Offset(4*k*c.VocabSize), 4*c.VocabSize, b.stream); err != nil {
					return fail(err)
				}
			}
			if pe.out {
				k++
			}
		}
	}
	if err := b.c.SyncStream(b.stream); err != nil {
		return fmt.Errorf("cuda: batched step of %d tokens: %w", t, err)
	}
	k := 0
	hl := bt.hostLogits.Float32s()
	for _, pe := range pass {
		if !pe.out {
			continue
		}
		st := &steps[pe.entry]
		logits := hl[k*c.VocabSize : (k+1)*c.VocabSize]
		if st.Logits != nil {
			copy(st.Logits, logits)
		}
		if st.Sample {
			if greedySampler(st.Sampler) {
				st.Next = int32(w[oIDs+k])
				if st.Sampler != nil {
					st.Sampler.Advance()
				}
			} else {
				st.Next = st.Sampler.Sample(logits)
			}
		}
		k++
	}
	if nall > 0 {
		vocab := c.VocabSize
		rows := hr.host.Float32s()
		at := 0
		for _, pe := range pass {
			if !pe.all {
				continue
			}
			st := &steps[pe.entry]
			part := rows[at*vocab : (at+pe.n)*vocab]
			copy(st.AllLogits[pe.from*vocab:(pe.from+pe.n)*vocab], part)
			if pe.from+pe.n == len(st.Tokens) {
				st.Take(part[(pe.n-1)*vocab:])
			}
			at += pe.n
		}
	}
	return nil
}

// recordPass enqueues a pass of m tokens in segs segments (its inputs in
// din): the layers, then the head on its nout out rows (din's out list,
// at word oOut) and their greedy choices into din's ids. Everything it
// enqueues depends on the counts alone, so a graph of it replays for any
// pass of the same counts whose out rows are the same (decode passes).
func (b *Batched) recordPass(m, segs, maxRows, nout, oOut int) error {
	bt, c, p := b.bt, &b.cfg, b.pre
	oPos, oRow, oSeg, _, oTable, oIDs := bt.offsets(p.chunk)
	in := func(off int) cu.DevicePtr { return bt.din.Offset(4 * off) }
	l := p.l
	l.pdl = p.l.pdl && m <= p.pdlMax
	l.splitK = !bt.noSplitK
	err := b.recordPrefill(&l, in(0), m, 0, m, &batchArgs{pos: in(oPos), row: in(oRow), seg: in(oSeg), segs: segs,
		maxRows: maxRows, tables: in(oTable)})
	if err != nil || nout == 0 {
		return err
	}
	// The head: the out rows gathered, normalized, one gemm, then the
	// greedy choice of each on the device.
	w := bt.in.Uint32s()
	for k := range nout {
		if err := b.c.CopyDtoDAsync(bt.xo.Offset(4*k*c.Dim), p.x.Offset(4*int(w[oOut+k])*c.Dim), 4*c.Dim, b.stream); err != nil {
			return err
		}
	}
	if err := l.prefillNorm(bt.xo, b.outNorm, c.RMSEps, nout, c.Dim, p.xn); err != nil {
		return err
	}
	if err := l.gemmInto(p.xn, nout, &b.output, nil, 0, gemmStore, bt.logits, c.VocabSize); err != nil {
		return err
	}
	return l.launch(b.k.rowsArgmax, cu.Dim(nout), 1024, 0, cu.Args{bt.logits, i32(c.VocabSize),
		c.Block.LogitScale, c.Block.FinalSoftcap, in(oIDs)})
}

// greedySampler reports whether s picks the argmax of the raw logits, as
// rows_argmax does: greedy without penalties.
func greedySampler(s *sample.Sampler) bool {
	return s == nil || (s.Params().Greedy() && !penaltiesOn(s.Params()))
}

// batchArgs are a pass's per-token inputs on the device.
type batchArgs struct {
	pos, row      cu.DevicePtr // int32 [m]
	seg           cu.DevicePtr // int32 [segs][4]: first token, tokens, first position, table offset
	segs, maxRows int
	tables        cu.DevicePtr
}
