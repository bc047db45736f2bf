package cuda

import (
	"math/rand/v2"
	"os"
	"testing"

	"gotok/quant"
)

// randLayout returns a rows×cols matrix of typ in the kernels' layout with
// random quants and small scales: data to time kernels on, not to check.
func randLayout(r *rand.Rand, typ quant.Type, rows, cols int) hostMatrix {
	nb := (cols + 31) / 32
	m := hostMatrix{Type: wtQ4_0, Rows: rows, Cols: cols, Q: make([]byte, rows*nb*16), D: make([]byte, rows*nb*2)}
	if typ == quant.Q8_0 {
		m.Type, m.Q = wtQ8_0, make([]byte, rows*nb*32)
	}
	for i := range m.Q {
		m.Q[i] = byte(r.Uint32())
	}
	for i := 0; i < len(m.D); i += 2 {
		m.D[i], m.D[i+1] = 0x1f, 0x21 // 0.01 in f16
	}
	return m
}

// TestKernelDurations launches each decode kernel on SmolLM-135M shapes a
// few times, one by one, for a profiler to time (GOTOK_NCU=1 under ncu:
// scripts/gpu-check.sh with NCU=1).
func TestKernelDurations(t *testing.T) {
	if os.Getenv("GOTOK_NCU") == "" {
		t.Skip("set GOTOK_NCU=1 and run under ncu")
	}
	g := newGPU(t)
	r := rand.New(rand.NewPCG(8, 8))
	const (
		dim, nHead, nKV, hd, ffn, vocab, ctx = 576, 9, 3, 64, 1536, 49152, 4096
	)
	qkv := g.matrix(randLayout(r, quant.Q4_0, (nHead+2*nKV)*hd, dim))
	wq, wk, wv := qkv.rowsFrom(0, nHead*hd), qkv.rowsFrom(nHead*hd, nKV*hd), qkv.rowsFrom((nHead+nKV)*hd, nKV*hd)
	wo := g.matrix(randLayout(r, quant.Q4_0, dim, nHead*hd))
	gate, up := g.matrix(randLayout(r, quant.Q4_0, ffn, dim)), g.matrix(randLayout(r, quant.Q4_0, ffn, dim))
	down := g.matrix(randLayout(r, quant.Q4_0, dim, ffn))
	out := g.matrix(randLayout(r, quant.Q8_0, vocab, dim))
	res, _ := g.residual(randFloats(r, dim, 1))
	next, poison := g.int64s(make([]int64, dim)), g.floats([]float32{0}, 0)
	nw := g.floats(randFloats(r, dim, 1), 0)
	q := g.floats(nil, nHead*hd)
	kc, vc := g.kv(randFloats(r, nKV*ctx*hd, 1)), g.kv(randFloats(r, nKV*ctx*hd, 1))
	cs := g.floats(refRopeTable(ctx, plainRope(hd)), 0)
	acc, ml := attnPartials(nHead, hd)
	partAcc, partML, tickets := g.floats(nil, acc), g.floats(nil, ml), g.floats(make([]float32, 2*nHead), 0)
	logits, blocks := g.floats(nil, vocab), g.l.logitsBlocks(out)
	partV, partI, ticket, best := g.floats(nil, blocks), g.floats(nil, blocks), g.floats([]float32{0}, 0), g.floats(nil, 1)
	for _, pos := range []int{100, 2148} {
		dpos := g.int32s(int32(pos))
		for rep := 0; rep < 3; rep++ {
			err := g.l.qkvRope(qkvArgs{res: res, resNext: next, poison: poison, normW: nw, eps: 1e-5, wq: &wq, wk: &wk, wv: &wv, nHead: nHead,
				nKV: nKV, headDim: hd, ropeCS: cs, ropeDim: hd, pos: dpos, q: q, kCache: kc, vCache: vc, ctxMax: ctx})
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []int{32, 128} {
				err := g.l.attention(attnArgs{q: q, kCache: kc, vCache: vc, ctxMax: ctx, headDim: hd, nHead: nHead, nKV: nKV,
					pos: dpos, scale: 0.125, rs: 1, single: attSingle, minChunk: chunk, partAcc: partAcc, partML: partML,
					tickets: tickets, wo: wo, res: res, poison: poison})
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range []error{
				g.l.ffn(ffnArgs{res: res, out: next, poison: poison, normW: nw, eps: 1e-5, gate: gate, up: up, down: down, rs: 1}),
				g.l.logits(logitsArgs{res: next, poison: poison, normW: nw, eps: 1e-5, w: out, scale: 1, logits: logits, partV: partV,
					partI: partI, ticket: ticket, best: best}),
			} {
				if e != nil {
					t.Fatal(e)
				}
			}
		}
	}
	if err := g.c.SyncStream(g.l.stream); err != nil {
		t.Fatal(err)
	}
}
