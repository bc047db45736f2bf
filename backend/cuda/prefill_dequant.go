package cuda

import (
	"errors"
	"fmt"

	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/quant"
)

// On prompts of dequantMinRows rows and more, a product over weights of a
// quantized family runs through F16's wgmma gemm: its rows are
// written as f16 into scratch by dequant.cu first. F16's kernel takes its
// weights by cp.async four stages ahead, where the others wait on their
// registers' loads and dequantize in the k loop, once for each row tile of
// the prompt (BENCHMARKS.md, "Quantized weights through F16's gemm"). In a
// prefill chunk the copies are written on a side stream one slice ahead
// of the products that read them (dequantAhead).

// dequantMinRows is the fewest rows of a product that dequantizes its
// weights to f16 first. At Llama-8B's shape (H200) a Q4_K_M prompt of 128
// tokens ran 30.2k tok/s without, 35.7k with; Q4_0's was level (44.9k,
// 45.8k).
const dequantMinRows = 128

// dequantScratchMax bounds each of the two buffers of f16 copies: larger
// products run in slices of their rows. Llama-8B's gate and up (235 MB as
// f16) take two, each still 448 blocks of wgmma's tile at 512 rows.
const dequantScratchMax = 128 << 20

// dequantScratch is the bytes of a buffer of f16 copies: the largest a
// layer's products take (gate and up together), at most
// dequantScratchMax; 0 when every matrix is F16 or F32.
func (b *Backend) dequantScratch() int {
	n := 0
	for i := range b.layers {
		for _, ws := range b.layers[i].products() {
			if b.k.pre.dequant[ws[0].Type] == nil {
				continue
			}
			bytes := 0
			for _, w := range ws {
				bytes += 2 * w.Rows * w.Cols
			}
			n = max(n, bytes)
		}
	}
	return min(n, dequantScratchMax)
}

// dequantJob is one slice of a product's weights as f16: rows [r0,
// r0+rows) of w and, for a GLU, of w2 (the up rows) after them.
type dequantJob struct {
	w, w2    *deviceMatrix
	r0, rows int
}

// dequantSlices cuts w (and w2) into the slices a buffer of bytes holds,
// each whole tiles of the product's columns (a GLU tile takes 64 units,
// each a gate and an up row); nil when not one tile fits.
func dequantSlices(w, w2 *deviceMatrix, bytes int) []dequantJob {
	rowBytes, align := 2*w.Cols, gemmTiles[gemmWG].n
	if w2 != nil {
		rowBytes, align = 4*w.Cols, gemmTiles[gemmWG].n/2
	}
	step := bytes / rowBytes
	if step < w.Rows {
		step -= step % align
	}
	if step <= 0 {
		return nil
	}
	var js []dequantJob
	for r0 := 0; r0 < w.Rows; r0 += step {
		js = append(js, dequantJob{w, w2, r0, min(step, w.Rows-r0)})
	}
	return js
}

// dequantizes reports whether gemmInto runs an m-row product over w with
// epilogue epi through f16 copies.
func (l *launcher) dequantizes(m int, w *deviceMatrix, epi gemmEpilogue) bool {
	if l.dequant == 0 || m < l.dequantMin || l.k.pre.dequant[w.Type] == nil || w.Cols%32 != 0 {
		return false
	}
	if l.splitK && epi == gemmAdd && m <= gemmTiles[gemmSmall].m {
		return false
	}
	return gemmTiles[l.gemmTileFor(m, w.Rows, w.Cols, epi)].wg
}

// gemmDequantized runs gemmInto's product through F16's kernel, a slice of
// w's rows (and w2's) at a time, each written as f16 by dequant.cu: by the
// side stream when it is the next slice planned (dequantAhead), else here.
// It reports false (and does nothing) when no slice fits the scratch.
func (l *launcher) gemmDequantized(a cu.DevicePtr, m int, w, w2 *deviceMatrix, act model.Activation, epi gemmEpilogue, out cu.DevicePtr, ldo int) (bool, error) {
	jobs := dequantSlices(w, w2, l.dequantBytes)
	if jobs == nil {
		return false, nil
	}
	outBytes := 4 // f32 out, or f16 for the GLU
	if epi == gemmGLU {
		outBytes = 2
	}
	for _, j := range jobs {
		slot, err := l.dq.take(l, j)
		if err != nil {
			return true, err
		}
		buf := l.dequant
		if slot >= 0 {
			buf = l.dq.buf[slot]
		} else if err := l.dequantJob(j, buf); err != nil {
			return true, err
		}
		var views [2]*deviceMatrix
		for i, x := range []*deviceMatrix{j.w, j.w2} {
			if x != nil {
				views[i] = &deviceMatrix{Type: wtF16, Quant: quant.F16, Rows: j.rows, Cols: x.Cols,
					Q: buf.Offset(i * 2 * j.rows * x.Cols), QBytes: 2 * j.rows * x.Cols}
			}
		}
		if err := l.gemmInto(a, m, views[0], views[1], act, epi, out.Offset(outBytes*j.r0), ldo); err != nil {
			return true, err
		}
		if err := l.dq.release(l, slot); err != nil {
			return true, err
		}
	}
	return true, nil
}

// dequantJob writes j's rows of w, then of w2, as f16 to buf.
func (l *launcher) dequantJob(j dequantJob, buf cu.DevicePtr) error {
	if err := l.dequantRows(j.w, j.r0, j.rows, buf); err != nil {
		return err
	}
	if j.w2 == nil {
		return nil
	}
	return l.dequantRows(j.w2, j.r0, j.rows, buf.Offset(2*j.rows*j.w.Cols))
}

// dequantRows writes rows [r0, r0+n) of w as f16 rows [n][w.Cols] to out.
func (l *launcher) dequantRows(w *deviceMatrix, r0, n int, out cu.DevicePtr) error {
	f := l.k.pre.dequant[w.Type]
	if f == nil || w.Cols%32 != 0 {
		return fmt.Errorf("cuda: no f16 copy of %s weights with rows of %d", w.Type.suffix(), w.Cols)
	}
	nkb := w.Cols / 32
	const threads = 256 // DEQUANT_THREADS
	blocks := n * nkb
	return l.launch(f, cu.Dim((blocks+threads-1)/threads), threads, 0,
		cu.Args{w.Q, w.D, uint64(r0 * nkb), i32(blocks), out})
}

// dequantAhead writes a prefill chunk's f16 copies on a side stream, one
// slice ahead of the products that read them, into two buffers in turn:
// slice j+1 is written while slice j's product runs (the copy streams
// memory, the product mostly computes). The chunk's slices are planned
// before its first layer (plan); a product whose slice is not the next
// one planned ends the plan (end) and writes its copies in line. The
// methods are no-ops on a nil dequantAhead.
type dequantAhead struct {
	side       cu.Stream
	buf        [2]cu.DevicePtr // buf[0] is also the launcher's in-line buffer
	ready      [2]cu.Event     // the side stream wrote the buffer's slice
	free       [2]cu.Event     // the product that read the buffer is done
	fork, join cu.Event
	jobs       []dequantJob
	next       int // the slice the next product takes; issued when < len(jobs)
	// missed counts slices planned and never taken: a plan out of step
	// with the products, which then write their copies in line (the
	// tests check it stays 0).
	missed int
}

// newDequantAhead makes the side stream and its events over buffers a and
// b.
func newDequantAhead(c *cu.Context, a, b cu.DevicePtr) (*dequantAhead, error) {
	d := &dequantAhead{buf: [2]cu.DevicePtr{a, b}}
	var err error
	if d.side, err = c.NewStream(); err != nil {
		return nil, err
	}
	for _, e := range []*cu.Event{&d.ready[0], &d.ready[1], &d.free[0], &d.free[1], &d.fork, &d.join} {
		if *e, err = c.NewSyncEvent(); err != nil {
			d.close(c)
			return nil, err
		}
	}
	return d, nil
}

func (d *dequantAhead) close(c *cu.Context) {
	if d == nil {
		return
	}
	for _, e := range []cu.Event{d.ready[0], d.ready[1], d.free[0], d.free[1], d.fork, d.join} {
		c.DestroyEvent(e)
	}
	c.DestroyStream(d.side)
}

// plan starts a chunk's slices: the side stream waits for what l's stream
// has queued (earlier products may still read the buffers), then writes
// the first.
func (d *dequantAhead) plan(l *launcher, jobs []dequantJob) error {
	if d == nil || len(jobs) == 0 {
		return nil
	}
	if err := d.end(l); err != nil {
		return err
	}
	if err := l.c.Record(d.fork, l.stream); err != nil {
		return err
	}
	if err := l.c.WaitEvent(d.side, d.fork); err != nil {
		return err
	}
	d.jobs, d.next = jobs, 0
	return d.issue(l, 0)
}

// issue queues slice i on the side stream, into buffer i mod 2 once the
// product of slice i-2 is done with it.
func (d *dequantAhead) issue(l *launcher, i int) error {
	s := i % 2
	if err := l.c.WaitEvent(d.side, d.free[s]); err != nil {
		return err
	}
	sl := *l
	sl.stream, sl.pdl, sl.after = d.side, false, nil
	if err := sl.dequantJob(d.jobs[i], d.buf[s]); err != nil {
		return err
	}
	return l.c.Record(d.ready[s], d.side)
}

// take returns the buffer (0 or 1) that holds slice j when it is the next
// planned, l's stream then waiting for it and the slice after it queued;
// else -1, after ending the plan.
func (d *dequantAhead) take(l *launcher, j dequantJob) (int, error) {
	if d == nil || d.next >= len(d.jobs) {
		return -1, d.end(l)
	}
	if d.jobs[d.next] != j {
		return -1, d.end(l)
	}
	s := d.next % 2
	if err := l.c.WaitEvent(l.stream, d.ready[s]); err != nil {
		return -1, err
	}
	d.next++
	if d.next < len(d.jobs) {
		if err := d.issue(l, d.next); err != nil {
			return -1, err
		}
	}
	return s, nil
}

// release marks buffer s free once what l's stream has queued is done (s
// -1: nothing taken).
func (d *dequantAhead) release(l *launcher, s int) error {
	if d == nil || s < 0 {
		return nil
	}
	return l.c.Record(d.free[s], l.stream)
}

// end drops the plan, l's stream waiting for whatever the side stream has
// queued: nothing it writes is then still pending when the buffers are
// written in line or the chunk's scratch read.
func (d *dequantAhead) end(l *launcher) error {
	if d == nil || d.jobs == nil {
		return nil
	}
	d.missed += len(d.jobs) - d.next
	d.jobs, d.next = nil, 0
	err := l.c.Record(d.join, d.side)
	if err == nil {
		err = l.c.WaitEvent(l.stream, d.join)
	}
	if err != nil {
		// Nothing the side stream queued may still write the buffers
		// when the caller gives up: wait for it here.
		return errors.Join(err, l.c.SyncStream(d.side))
	}
	return nil
}

// dequantPlan lists the slices recordPrefill's products over m rows
// dequantize, in their order, keep rows going past the last layer's keys
// and values (recordPrefill says which).
func (b *Backend) dequantPlan(l *launcher, m, keep int) []dequantJob {
	c := &b.cfg
	var jobs []dequantJob
	add := func(rows int, w, w2 *deviceMatrix, epi gemmEpilogue) {
		if l.dequantizes(rows, w, epi) {
			jobs = append(jobs, dequantSlices(w, w2, l.dequantBytes)...)
		}
	}
	// The projections' epilogues: add, or store where a post-norm or a
	// residual multiplier takes the branch (prefillProject).
	project := func(post cu.DevicePtr) gemmEpilogue {
		if post == 0 && c.Block.ResidualScale == 1 {
			return gemmAdd
		}
		return gemmStore
	}
	for i := range b.layers {
		ly := &b.layers[i]
		if ly.qkv.Rows > 0 {
			add(m, &ly.qkv, nil, gemmStore)
		} else {
			for _, w := range []*deviceMatrix{&ly.wq, &ly.wk, &ly.wv} {
				add(m, w, nil, gemmStore)
			}
		}
		mo := m
		if i == len(b.layers)-1 && keep < m {
			mo = keep
		}
		if mo <= 0 {
			break
		}
		add(mo, &ly.wo, nil, project(ly.attnPost))
		add(mo, &ly.gate, &ly.up, gemmGLU)
		add(mo, &ly.down, nil, project(ly.ffnPost))
	}
	return jobs
}
