package cuda

import (
	"context"
	"errors"
	"fmt"

	"gotok/backend"
	"gotok/backend/cuda/cu"
)

// headRowsMax is the most rows the output head takes at once for every
// token's logits (ForwardAll, SeqStep.AllLogits): the engine's prompt
// scoring and perplexity ask for 64 at a time, and 64 rows of Llama 3's
// vocabulary are 33 MB on the device and as much pinned on the host.
const headRowsMax = 64

// headRows is the output head's buffers for every token's logits,
// allocated the first time they are asked for.
type headRows struct {
	logits cu.DevicePtr   // f32 [headRowsMax][vocab]
	ids    cu.DevicePtr   // int32 [headRowsMax]: rows_argmax's choices, unread
	host   *cu.HostBuffer // the logits copied back, f32 [headRowsMax][vocab]
}

var (
	_ backend.AllLogits = (*Backend)(nil)
	_ backend.AllLogits = (*Batched)(nil)
)

// headGemm says whether the output head can run as a prefill gemm over
// many rows: the batched prefill runs this model, and its head's type has
// a gemm over whole 32-element blocks.
func (b *Backend) headGemm() bool {
	return b.pre != nil && b.k.pre.gemm[b.output.Type][gemmStore][gemmSmall] != nil && b.output.Cols%32 == 0
}

// headRowBuffers returns the head's buffers for every token's logits,
// allocating them on first use: most runs never score a text, and the
// two buffers are the size of the output head's f32 output for 64 rows.
func (b *Backend) headRowBuffers() (*headRows, error) {
	if b.rows != nil {
		return b.rows, nil
	}
	vocab := b.cfg.VocabSize
	host, err := b.c.AllocHost(4 * headRowsMax * vocab)
	if err != nil {
		return nil, fmt.Errorf("cuda: every token's logits: %w", err)
	}
	base, err := b.alloc(alignUp(4*headRowsMax*vocab) + 4*headRowsMax)
	if err != nil {
		return nil, fmt.Errorf("cuda: every token's logits: %w", errors.Join(err, b.c.FreeHost(host)))
	}
	b.rows = &headRows{logits: base, ids: base.Offset(alignUp(4 * headRowsMax * vocab)), host: host}
	return b.rows, nil
}

// closeHeadRows frees what Close's list of device allocations does not
// hold.
func (b *Backend) closeHeadRows() error {
	if b.rows == nil {
		return nil
	}
	return b.c.FreeHost(b.rows.host)
}

// recordHeadRows enqueues the output head (recordHeadGemm) on n rows (at
// most headRowsMax less at) of the f32 residual stream x ([n][dim]) into
// rows [at, at+n) of hr.logits, with rows_argmax's choices, which nothing
// reads, in hr.ids.
func (b *Backend) recordHeadRows(l *launcher, hr *headRows, x cu.DevicePtr, n, at int) error {
	if n <= 0 || at < 0 || at+n > headRowsMax {
		return fmt.Errorf("cuda: head rows [%d,%d) outside the %d of the buffer", at, at+n, headRowsMax)
	}
	return b.recordHeadGemm(l, x, n, hr.logits.Offset(4*at*b.cfg.VocabSize), hr.ids.Offset(4*at), false)
}

// recordHeadGemm enqueues the output head as a gemm on n rows of the f32
// residual stream x ([n][dim]): the final norm of each into the prefill's
// f16 buffer, one gemm into out ([n][vocab] f32), and rows_argmax, which
// applies the logit multiplier and final soft-cap in place as the decode
// step's head does (the multiplier first) and writes each row's greedy
// choice to ids (int32 [n]); without argmax only where the model has a
// multiplier or a soft-cap. The rows are then final logits, as the host
// wants them.
func (b *Backend) recordHeadGemm(l *launcher, x cu.DevicePtr, n int, out, ids cu.DevicePtr, argmax bool) error {
	c := &b.cfg
	if err := l.prefillNorm(x, b.outNorm, c.RMSEps, n, c.Dim, b.pre.xn); err != nil {
		return err
	}
	if err := l.gemmInto(b.pre.xn, n, &b.output, nil, 0, gemmStore, out, c.VocabSize); err != nil {
		return err
	}
	if !argmax && c.Block.LogitScale == 1 && !(c.Block.FinalSoftcap > 0) {
		return nil // rows_argmax would leave the rows as they are
	}
	return l.launch(b.k.rowsArgmax, cu.Dim(n), 1024, 0, cu.Args{out, i32(c.VocabSize), c.Block.LogitScale,
		c.Block.FinalSoftcap, ids})
}

// ForwardAll implements backend.AllLogits: tokens at positions pos,
// pos+1, … of the single-sequence cache, as Prefill runs them, each
// token's logits to out. The tokens run through the batched prefill in
// chunks, and after each chunk the head runs on its rows, headRowsMax at
// a time, each piece copied back before the next overwrites the buffer.
// Models the batched prefill or its head gemm cannot run, debug mode and
// inputs Prefill runs through the decode graph (prefillStepsMax tokens)
// take a decode step a token, reading each one's logits.
//
// Afterwards the backend is as after Prefill: the KV cache holds the
// tokens' keys and values, and the last token's logits are in b.logits
// for readLogits.
func (b *Backend) ForwardAll(ctx context.Context, tokens []int32, pos int, out []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.check(tokens, pos); err != nil {
		return err
	}
	vocab := b.cfg.VocabSize
	if len(out) < len(tokens)*vocab {
		return fmt.Errorf("cuda: the logits of %d tokens need %d floats, not %d", len(tokens), len(tokens)*vocab, len(out))
	}
	if err := b.settle(); err != nil {
		return err
	}
	if !b.batchedPrefill(len(tokens)) || !b.headGemm() {
		return b.forwardAllSteps(ctx, tokens, pos, out)
	}
	hr, err := b.headRowBuffers()
	if err != nil {
		return err
	}
	p, c := b.pre, &b.cfg
	// The stream is idle (settled), so the pinned buffer is free to
	// rewrite.
	w := p.tokens.Uint32s()
	for i, t := range tokens {
		w[i] = uint32(t)
	}
	// b.logits is not this call's until its last row is copied there.
	b.logitsPos = -1
	fail := func(err error) error {
		b.c.SyncStream(b.stream) // leave nothing running that reads the buffers
		return err
	}
	if err := b.c.CopyHtoDAsync(p.dtok, p.tokens, 0, 4*len(tokens), b.stream); err != nil {
		return fail(err)
	}
	host := hr.host.Float32s()
	for c0 := 0; c0 < len(tokens); c0 += p.chunk {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		m := min(p.chunk, len(tokens)-c0)
		l := p.l
		l.pdl = p.l.pdl && m <= p.pdlMax
		if err := b.recordPrefill(&l, p.dtok.Offset(4*c0), m, pos+c0, m, nil); err != nil {
			return fail(err)
		}
		// The chunk's rows through the head a piece at a time: the next
		// piece (and the next chunk's layers, which rewrite the residual
		// stream) are enqueued after this piece is back on the host.
		for r0 := 0; r0 < m; r0 += headRowsMax {
			n := min(headRowsMax, m-r0)
			if err := b.recordHeadRows(&l, hr, p.x.Offset(4*r0*c.Dim), n, 0); err != nil {
				return fail(err)
			}
			if err := b.c.CopyDtoHAsync(hr.host, 0, hr.logits, 4*n*vocab, b.stream); err != nil {
				return fail(err)
			}
			lastPiece := c0+r0+n == len(tokens)
			if lastPiece {
				// The last token's logits where Prefill leaves them, for
				// readLogits and the host samplers.
				if err := b.c.CopyDtoDAsync(b.logits, hr.logits.Offset(4*(n-1)*vocab), 4*vocab, b.stream); err != nil {
					return fail(err)
				}
			}
			if err := b.c.SyncStream(b.stream); err != nil {
				return fmt.Errorf("cuda: every token's logits of %d tokens at position %d: %w", len(tokens), pos, err)
			}
			copy(out[(c0+r0)*vocab:(c0+r0+n)*vocab], host[:n*vocab])
			if lastPiece {
				b.logitsPos = pos + len(tokens) - 1
			}
		}
	}
	return nil
}

// forwardAllSteps is ForwardAll a decode step a token: the path for
// models without the head gemm, debug mode and short inputs.
func (b *Backend) forwardAllSteps(ctx context.Context, tokens []int32, pos int, out []float32) error {
	vocab := b.cfg.VocabSize
	for i, t := range tokens {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := b.step(t, pos+i); err != nil {
			return err
		}
		logits, err := b.readLogits(pos + i)
		if err != nil {
			return err
		}
		copy(out[i*vocab:(i+1)*vocab], logits)
	}
	return nil
}

// ForwardAll implements backend.AllLogits on the single-sequence cache,
// which the resident sequence of the batched steps gives up first.
func (b *Batched) ForwardAll(ctx context.Context, tokens []int32, pos int, out []float32) error {
	if err := b.flushResident(); err != nil {
		return err
	}
	return b.Backend.ForwardAll(ctx, tokens, pos, out)
}
