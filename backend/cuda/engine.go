// Package cuda runs llama-family models on an NVIDIA GPU through the CUDA
// driver API, with its own kernels (package kernels) and no CUDA SDK at build
// time. A decode step (embedding, every layer, final norm, output head and
// greedy sampling) is captured once into a CUDA graph and replayed for each
// token: the token id and position travel in 8 bytes of pinned memory, the
// sampled id comes back in 4, and everything else stays on the device.
package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"

	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/sample"
)

// Options configures a CUDA backend.
type Options struct {
	// ContextLen is the KV cache length in tokens (0: the model's, capped at
	// DefaultMaxContext).
	ContextLen int
	// Device is the CUDA device ordinal.
	Device int
	// NoPDL turns programmatic dependent launch off (it is on for sm_90+).
	NoPDL bool
}

// DefaultMaxContext caps the default KV cache, as the CPU backend does.
const DefaultMaxContext = 4096

// attnChunk is the number of cached positions one attention block takes
// (flash-decoding split); the grid has ContextLen/attnChunk splits per head.
const attnChunk = 64

// io is the step's input (token, position) and output (sampled token), in
// pinned host memory that the kernels read and write directly: the graph
// has no copy nodes. The position is also kept in device memory (pos) for
// the kernels after the embedding.
const (
	ioToken  = 0
	ioPos    = 1
	ioResult = 2
	ioWords  = 4
)

type layerWeights struct {
	attnNorm, ffnNorm cu.DevicePtr
	qkv, wo           deviceMatrix
	bias              cu.DevicePtr
	gate, up, down    deviceMatrix
	kCache, vCache    cu.DevicePtr
}

// Backend is the CUDA forward pass of one model with its KV cache. It is not
// safe for concurrent use.
type Backend struct {
	c      *cu.Context
	k      *kernelSet
	stream cu.Stream
	cfg    model.Config
	ctxLen int
	splits int

	layers         []layerWeights
	embd, output   deviceMatrix
	outNorm        cu.DevicePtr
	ropeCS         cu.DevicePtr
	x, q, h        cu.DevicePtr
	logits         cu.DevicePtr
	partAcc        cu.DevicePtr
	partML         cu.DevicePtr
	attnTickets    cu.DevicePtr
	att            cu.DevicePtr // attention output, NumHeads*HeadDim
	pos            cu.DevicePtr
	partV, partI   cu.DevicePtr // logits kernel's per-block argmax
	ticket         cu.DevicePtr
	host           *cu.HostBuffer
	graph          *cu.Graph
	launches       int       // kernels in one step
	eager          *launcher // debug mode: launches outside the graph
	debug          *debugRef
	allocs         []cu.DevicePtr
	weightBytes    int64
	deviceBytes    int64 // device memory taken by New
	logitsHostByte []byte
}

// New uploads m's weights to the GPU, allocates the KV cache and captures the
// decode step.
func New(m *model.Model, o Options) (_ *Backend, err error) {
	if err := cu.Available(); err != nil {
		return nil, err
	}
	c, err := cu.Open(o.Device)
	if err != nil {
		return nil, err
	}
	b := &Backend{c: c, cfg: m.Config}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	freeBefore, _, err := c.MemInfo()
	if err != nil {
		return nil, err
	}
	cfg := &b.cfg
	b.ctxLen = o.ContextLen
	if b.ctxLen <= 0 {
		b.ctxLen = min(cfg.ContextLen, DefaultMaxContext)
	}
	if err := b.checkConfig(); err != nil {
		return nil, err
	}
	if b.k, err = loadKernels(c); err != nil {
		return nil, err
	}
	if b.stream, err = c.NewStream(); err != nil {
		return nil, err
	}
	if err := b.uploadWeights(m); err != nil {
		return nil, err
	}
	if err := b.allocState(); err != nil {
		return nil, err
	}
	l := &launcher{c: c, k: b.k, stream: b.stream, sms: c.Info.SMCount, pdl: c.Info.Major >= 9 && !o.NoPDL}
	b.graph, err = c.Capture(b.stream, func() error { return b.recordStep(l, nil) })
	if err != nil {
		return nil, fmt.Errorf("cuda: capturing the decode step: %w", err)
	}
	b.launches = l.count
	freeAfter, _, err := c.MemInfo()
	if err != nil {
		return nil, err
	}
	b.deviceBytes = freeBefore - freeAfter
	if os.Getenv(debugEnv) == "1" {
		eager := *l
		b.eager = &eager
		if b.debug, err = newDebugRef(m, b.ctxLen); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *Backend) checkConfig() error {
	c := &b.cfg
	switch {
	case c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0:
		return fmt.Errorf("cuda: %d heads do not group over %d KV heads", c.NumHeads, c.NumKVHeads)
	case c.HeadDim%4 != 0 || c.HeadDim <= 0:
		return fmt.Errorf("cuda: head dimension %d is not a multiple of 4", c.HeadDim)
	case c.RopeDim%2 != 0 || c.RopeDim > c.HeadDim:
		return fmt.Errorf("cuda: RoPE dimension %d does not fit head dimension %d", c.RopeDim, c.HeadDim)
	case b.ctxLen > maxAttnSplits*attnChunk:
		return fmt.Errorf("cuda: context of %d tokens is too large (at most %d)", b.ctxLen, maxAttnSplits*attnChunk)
	}
	for _, n := range []struct {
		what string
		cols int
	}{{"model", c.Dim}, {"attention output", c.QDim()}, {"feed-forward", c.FFNDim}} {
		if err := checkRowLen(b.c, n.what, n.cols); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) alloc(n int) (cu.DevicePtr, error) {
	p, err := b.c.Alloc(n)
	if err == nil {
		b.allocs = append(b.allocs, p)
	}
	return p, err
}

func (b *Backend) uploadMatrix(ms ...*model.Tensor) (deviceMatrix, error) {
	var hs []hostMatrix
	for _, t := range ms {
		h, err := layoutMatrix(t)
		if err != nil {
			return deviceMatrix{}, err
		}
		hs = append(hs, h)
	}
	h := hs[0]
	if len(hs) > 1 {
		var err error
		if h, err = stackRows(hs...); err != nil {
			return deviceMatrix{}, fmt.Errorf("cuda: %s…%s: %w", ms[0].Name, ms[len(ms)-1].Name, err)
		}
	}
	d, err := upload(b.c, h)
	if err != nil {
		return d, err
	}
	b.allocs = append(b.allocs, d.Q)
	if d.D != 0 {
		b.allocs = append(b.allocs, d.D)
	}
	b.weightBytes += int64(d.Bytes)
	return d, nil
}

func (b *Backend) uploadVector(ts ...*model.Tensor) (cu.DevicePtr, error) {
	var f []float32
	for _, t := range ts {
		f = append(f, bytesF32(t.Data)...)
	}
	p, err := uploadFloats(b.c, f)
	if err == nil {
		b.allocs = append(b.allocs, p)
		b.weightBytes += int64(4 * len(f))
	}
	return p, err
}

func (b *Backend) uploadWeights(m *model.Model) error {
	var err error
	if b.embd, err = b.uploadMatrix(&m.TokenEmbd); err != nil {
		return err
	}
	if b.cfg.TiedEmbeddings {
		b.output = b.embd
	} else if b.output, err = b.uploadMatrix(&m.Output); err != nil {
		return err
	}
	if b.outNorm, err = b.uploadVector(&m.OutputNorm); err != nil {
		return err
	}
	b.layers = make([]layerWeights, len(m.Layers))
	for i := range m.Layers {
		src, dst := &m.Layers[i], &b.layers[i]
		if dst.attnNorm, err = b.uploadVector(&src.AttnNorm); err != nil {
			return err
		}
		if dst.ffnNorm, err = b.uploadVector(&src.FFNNorm); err != nil {
			return err
		}
		if dst.qkv, err = b.uploadMatrix(&src.Wq, &src.Wk, &src.Wv); err != nil {
			return err
		}
		if src.Bq != nil {
			if dst.bias, err = b.uploadVector(src.Bq, src.Bk, src.Bv); err != nil {
				return err
			}
		}
		if dst.wo, err = b.uploadMatrix(&src.Wo); err != nil {
			return err
		}
		if dst.gate, err = b.uploadMatrix(&src.Gate); err != nil {
			return err
		}
		if dst.up, err = b.uploadMatrix(&src.Up); err != nil {
			return err
		}
		if dst.gate.Type != dst.up.Type {
			return fmt.Errorf("cuda: layer %d: ffn_gate and ffn_up differ in type, which the fused kernel does not take", i)
		}
		if dst.down, err = b.uploadMatrix(&src.Down); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) allocState() error {
	c := &b.cfg
	kvBytes := 4 * c.NumKVHeads * b.ctxLen * c.HeadDim
	var err error
	for i := range b.layers {
		if b.layers[i].kCache, err = b.alloc(kvBytes); err != nil {
			return fmt.Errorf("cuda: KV cache: %w", err)
		}
		if b.layers[i].vCache, err = b.alloc(kvBytes); err != nil {
			return fmt.Errorf("cuda: KV cache: %w", err)
		}
	}
	b.splits = (b.ctxLen + attnChunk - 1) / attnChunk
	for _, a := range []struct {
		p *cu.DevicePtr
		n int
	}{
		{&b.x, c.Dim}, {&b.q, c.QDim()}, {&b.h, c.FFNDim}, {&b.logits, c.VocabSize},
		{&b.partAcc, c.NumHeads * b.splits * c.HeadDim}, {&b.partML, 2 * c.NumHeads * b.splits},
		{&b.pos, 1}, {&b.ticket, 1}, {&b.attnTickets, c.NumHeads}, {&b.att, c.QDim()}, {&b.partV, 16 * b.c.Info.SMCount}, {&b.partI, 16 * b.c.Info.SMCount},
	} {
		if *a.p, err = b.alloc(4 * a.n); err != nil {
			return err
		}
	}
	if b.ropeCS, err = uploadFloats(b.c, refRopeTable(b.ctxLen, c.RopeDim, c.RopeBase, ropeScale(c))); err != nil {
		return err
	}
	b.allocs = append(b.allocs, b.ropeCS)
	if err := b.c.MemsetD32(b.ticket, 0, 1); err != nil {
		return err
	}
	if err := b.c.MemsetD32(b.attnTickets, 0, c.NumHeads); err != nil {
		return err
	}
	if b.host, err = b.c.AllocHost(4 * ioWords); err != nil {
		return err
	}
	b.logitsHostByte = make([]byte, 4*c.VocabSize)
	return nil
}

func ropeScale(c *model.Config) float32 {
	if c.RopeFreqScale == 0 {
		return 1
	}
	return c.RopeFreqScale
}

// recordStep enqueues one decode step; it runs once, under stream capture,
// or every step in debug mode, where afterLayer checks each layer's output.
func (b *Backend) recordStep(l *launcher, afterLayer func(i int) error) error {
	c := &b.cfg
	pos := b.pos
	if err := l.embed(b.host.Device, pos, &b.embd, b.x); err != nil {
		return err
	}
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	for i := range b.layers {
		ly := &b.layers[i]
		err := l.qkvRope(qkvArgs{x: b.x, normW: ly.attnNorm, eps: c.RMSEps, w: &ly.qkv, bias: ly.bias,
			nHead: c.NumHeads, nKV: c.NumKVHeads, headDim: c.HeadDim, ropeCS: b.ropeCS, ropeDim: c.RopeDim,
			neox: c.RopeNeox, pos: pos, q: b.q, kCache: ly.kCache, vCache: ly.vCache, ctxMax: b.ctxLen})
		if err != nil {
			return err
		}
		a := attnArgs{q: b.q, kCache: ly.kCache, vCache: ly.vCache, ctxMax: b.ctxLen, headDim: c.HeadDim,
			nHead: c.NumHeads, nKV: c.NumKVHeads, pos: pos, scale: scale, chunk: attnChunk, splits: b.splits,
			partAcc: b.partAcc, partML: b.partML, tickets: b.attnTickets, out: b.att}
		if err := l.attention(a); err != nil {
			return err
		}
		if err := l.matvecAdd(b.att, &ly.wo, b.x); err != nil {
			return err
		}
		if err := l.gateUp(b.x, ly.ffnNorm, c.RMSEps, &ly.gate, &ly.up, b.h); err != nil {
			return err
		}
		if err := l.matvecAdd(b.h, &ly.down, b.x); err != nil {
			return err
		}
		if afterLayer != nil {
			if err := afterLayer(i); err != nil {
				return err
			}
		}
	}
	if l.logitsBlocks(c.VocabSize) > 16*b.c.Info.SMCount {
		return fmt.Errorf("cuda: logits grid larger than its partials")
	}
	return l.logits(logitsArgs{x: b.x, normW: b.outNorm, eps: c.RMSEps, w: &b.output, logits: b.logits,
		partV: b.partV, partI: b.partI, ticket: b.ticket, result: b.host.Device.Offset(4 * ioResult)})
}

// Name describes the device and the captured step.
func (b *Backend) Name() string {
	return fmt.Sprintf("cuda (%v, %d kernels per token)", b.c.Info, b.launches)
}

// ContextLen is the KV cache length.
func (b *Backend) ContextLen() int { return b.ctxLen }

// Stats reports what the engine holds on the device.
type Stats struct {
	KernelsPerToken int
	GraphNodes      int
	WeightBytes     int64
	DeviceBytes     int64 // device memory taken by New: weights, KV cache, scratch, modules
}

// Stats returns the engine's launch and memory figures.
func (b *Backend) Stats() Stats {
	return Stats{KernelsPerToken: b.launches, GraphNodes: b.graph.Nodes, WeightBytes: b.weightBytes, DeviceBytes: b.deviceBytes}
}

func (b *Backend) check(tokens []int32, pos int) error {
	if len(tokens) == 0 {
		return errors.New("cuda: no tokens")
	}
	if pos < 0 || pos+len(tokens) > b.ctxLen {
		return fmt.Errorf("cuda: positions %d..%d do not fit the context of %d tokens", pos, pos+len(tokens)-1, b.ctxLen)
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= b.cfg.VocabSize {
			return fmt.Errorf("cuda: token id %d is out of range (vocabulary of %d)", t, b.cfg.VocabSize)
		}
	}
	return nil
}

// step runs the graph for one token and returns the greedy choice.
func (b *Backend) step(token int32, pos int) (int32, error) {
	w := b.host.Uint32s()
	w[ioToken], w[ioPos] = uint32(token), uint32(pos)
	if b.debug != nil {
		return b.debugStep(token, pos)
	}
	if err := b.graph.Launch(b.stream); err != nil {
		return 0, err
	}
	if err := b.c.SyncStream(b.stream); err != nil {
		return 0, fmt.Errorf("cuda: decode step at position %d: %w", pos, err)
	}
	return int32(w[ioResult]), nil
}

// debugStep runs a step kernel by kernel and compares every layer's output
// with the float64 twin, printing the first divergence to standard error.
func (b *Backend) debugStep(token int32, pos int) (int32, error) {
	r := b.debug
	r.embed(token)
	buf := make([]byte, 4*b.cfg.Dim)
	err := b.recordStep(b.eager, func(i int) error {
		if err := b.c.SyncStream(b.stream); err != nil {
			return err
		}
		if err := b.c.CopyDtoH(buf, b.x); err != nil {
			return err
		}
		r.layer(i, pos)
		if err := r.compare(bytesF32(buf), i, pos); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := b.c.SyncStream(b.stream); err != nil {
		return 0, fmt.Errorf("cuda: decode step at position %d: %w", pos, err)
	}
	return int32(b.host.Uint32s()[ioResult]), nil
}

// readLogits copies the last step's logits to the host.
func (b *Backend) readLogits() ([]float32, error) {
	if err := b.c.CopyDtoH(b.logitsHostByte, b.logits); err != nil {
		return nil, err
	}
	return bytesF32(b.logitsHostByte), nil
}

// deviceGreedy reports whether the device's argmax is the sampler's choice:
// greedy with no penalties (penalties change the logits first).
func deviceGreedy(s *sample.Sampler) bool {
	if s == nil {
		return true
	}
	p := s.Params()
	penalties := p.PenaltyLastN > 0 && ((p.RepeatPenalty != 0 && p.RepeatPenalty != 1) || p.FrequencyPenalty != 0 || p.PresencePenalty != 0)
	return p.Greedy() && !penalties
}

// Decode implements backend.Backend: one token at pos, then the sampled
// next token. Greedy decoding samples on the device; other samplers get the
// logits on the host (the device sampler chain is not written yet).
func (b *Backend) Decode(ctx context.Context, token int32, pos int, s *sample.Sampler) (int32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := b.check([]int32{token}, pos); err != nil {
		return 0, err
	}
	next, err := b.step(token, pos)
	if err != nil || deviceGreedy(s) {
		return next, err
	}
	logits, err := b.readLogits()
	if err != nil {
		return 0, err
	}
	next = s.Sample(logits)
	if next < 0 {
		return 0, errors.New("cuda: the sampler found no candidate (all logits NaN?)")
	}
	return next, nil
}

// Prefill implements backend.Backend. It runs the prompt one token at a time
// through the decode graph (a batched prefill is future work).
func (b *Backend) Prefill(ctx context.Context, tokens []int32, pos int, s *sample.Sampler) (int32, error) {
	if err := b.check(tokens, pos); err != nil {
		return 0, err
	}
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

// Logits implements backend.Backend.
func (b *Backend) Logits(ctx context.Context, token int32, pos int) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.check([]int32{token}, pos); err != nil {
		return nil, err
	}
	if _, err := b.step(token, pos); err != nil {
		return nil, err
	}
	return b.readLogits()
}

// Close frees everything on the device.
func (b *Backend) Close() error {
	if b.c == nil {
		return nil
	}
	var errs []error
	if b.graph != nil {
		errs = append(errs, b.graph.Destroy())
	}
	for _, p := range b.allocs {
		errs = append(errs, b.c.Free(p))
	}
	errs = append(errs, b.c.FreeHost(b.host))
	if b.k != nil {
		b.k.unload()
	}
	errs = append(errs, b.c.DestroyStream(b.stream), b.c.Close())
	b.c = nil
	return errors.Join(errs...)
}
