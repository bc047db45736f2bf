// Package cuda runs llama-family models on an NVIDIA GPU through the CUDA
// driver API, with its own kernels (package kernels) and no CUDA SDK at build
// time. A decode step (embedding, every layer, final norm, output head and
// sampling) is captured once into a CUDA graph and replayed for each token:
// the token id, position and sampler settings travel in a few words of
// pinned memory, the sampled id comes back in 4 bytes, and everything else
// stays on the device.
package cuda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"gotok/backend"
	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/sample"
)

// Options configures a CUDA backend.
type Options struct {
	// ContextLen is the KV cache length in tokens (0: the model's, capped at
	// backend.DefaultMaxContext).
	ContextLen int
	// Device is the CUDA device ordinal.
	Device int
	// NoPDL turns programmatic dependent launch off (it is on for sm_90+).
	NoPDL bool
}

// io is the step's input (token, position, sampler parameters) and output
// (sampled token), in pinned host memory that the kernels read and write
// directly: the graph has no copy nodes. The embedding kernel copies the
// position and the parameters to device memory (pos, params) for the
// kernels after it. The decode steps write their token to slot pos&1 of
// the two at ioResult, so that the host can read one step's while the
// next runs (Backend.decodeAhead); the batched prefill writes it to the
// first.
const (
	ioToken  = 0
	ioPos    = 1
	ioResult = 2
	ioParams = 4 // IO_PARAMS in kernels/embed.cu; spWords words
	ioWords  = ioParams + spWords
)

type layerWeights struct {
	attnNorm, ffnNorm cu.DevicePtr // 0 without pre-norms
	// qNorm and kNorm are the Q/K norms' gains, attnPost and ffnPost the
	// post-norms' (0: the block has none).
	qNorm, kNorm      cu.DevicePtr
	attnPost, ffnPost cu.DevicePtr
	// qkv is Q, K and V stacked when they share a kernel family other than
	// wtMix (zero otherwise); wq, wk and wv are the three, views of it when
	// stacked.
	qkv, wq, wk, wv deviceMatrix
	wo              deviceMatrix
	bias            cu.DevicePtr
	gate, up, down  deviceMatrix
	kCache, vCache  cu.DevicePtr
}

// products are the matrices of the layer's prefill products, one group a
// product: the gate/up pair multiplies together (zero matrices where the
// layer has none: qkv unstacked).
func (ly *layerWeights) products() [][]*deviceMatrix {
	return [][]*deviceMatrix{{&ly.qkv}, {&ly.wq}, {&ly.wk}, {&ly.wv}, {&ly.wo}, {&ly.gate, &ly.up}, {&ly.down}}
}

// tuning holds the decode step's shape choices: fixed by the engine, swept
// by the benchmark test.
type tuning struct {
	attnSingle   int  // attention: the longest context in one split
	attnMinChunk int  // attention: past that, the fewest positions one split takes
	attnOBlocks  int  // attention: blocks of a head group that share a one-split context's output projection
	attnNoSpin   bool // attention: split contexts merge in the last block even when the grid fits the GPU
	attnSplits   int  // attention: splits of a context past attnSingle (0: attnSplitsFor)
	// attnWarpsLong is the attention kernel's warps per head for contexts
	// past attnSingle, in graphs of their own (0: as for short ones).
	attnWarpsLong int
	// attnCluster is the blocks per cluster that split a context of up
	// to attnSingle positions (attention_cl) when long contexts have their
	// own graphs (0: the split kernel for every length).
	attnCluster int
	// attnMidSingle and attnMidCluster: contexts past attnSingle and up
	// to attnMidSingle run on clusters of attnMidCluster blocks, in
	// graphs of their own (0: none; the split kernel past attnSingle).
	attnMidSingle, attnMidCluster int
	// noL2Head leaves the output head's weights out of the persisting
	// L2 window (Backend.keepHeadInL2).
	noL2Head bool
	// ffn is the FFN kernel's shape for Q4_0 and Q8_0 weights (zero:
	// defaultFFNShape), ffnMix for the mixed-type family (zero: the
	// same), and attnWarps the attention kernel's warps per head for
	// short contexts (0: attnWarps): the launcher's defaults.
	ffn, ffnMix ffnShape
	attnWarps   int
	// ffnSplit runs the FFN as two kernels: gate/up into a buffer, then
	// the down projection row-parallel (matvec_add).
	ffnSplit bool
	// carveout is the decode kernels' shared-memory share of L1, in
	// percent (0: decodeCarveout).
	carveout int
	// qkvWarps is the QKV kernel's warps a block (0: qkvWarps). Each
	// block stages the whole residual stream and the norm's weights.
	qkvWarps int
	// attnHeads runs the attention's output projection as a kernel of its
	// own (matvec_add) on the heads' outputs; attnHeadsLong only in the
	// graphs of contexts past attnSingle.
	attnHeads, attnHeadsLong bool
	// attnHeads8 has matvec_add8 project the heads' outputs, rounded to
	// int8 blocks (q8_row), where W_o's layout has one.
	attnHeads8 bool
	// act8 has the int8 layouts' QKV and split gate/up kernels read
	// their activations from act_q8, one kernel more each, instead of
	// staging and quantizing the residual stream in every block; and
	// F16's and BF16's split gate/up (glu), QKV (with qkvXF) and head
	// (with logitsX8) read act_f32's float row from the same buffer.
	act8 bool
	// qkvXF has F16 and BF16 QKV weights take act_f32's row (with act8's
	// buffer) in qkv_rope_xf instead of staging the residual stream.
	qkvXF bool
	// postApart runs the attention's post-norm in postnorm's kernel and
	// the FFN's in its own layer, instead of within act_q8 (recordStep;
	// for the launch-shape sweep's A/B).
	postApart bool
	// logitsPerSM is the output head's blocks per SM (0:
	// logitsBlocksPerSM); logitsWide takes its wide kernels
	// (launcher.logitsWide).
	logitsPerSM int
	logitsWide  bool
	// logitsX8 has the head take act_q8's int8 activations where its
	// layout has a logits_x8 kernel, act_f32's row where it has a
	// logits_xf one (launcher.logitsX8Kernel).
	logitsX8 bool
}

func defaultTuning() tuning {
	return tuning{attnSingle: attSingle, attnMinChunk: attMinChunk, attnOBlocks: attOBlocks, attnWarpsLong: attWarpsLong,
		attnCluster: attCluster, attnMidSingle: attMidSingle, attnMidCluster: attMidCluster}
}

// largeModelDim is the model width from which tuningFor takes the shapes
// measured on Llama-3.2-1B-shaped models over those of SmolLM-135M's.
const largeModelDim = 1024

// tuningFor is the step's shapes for a model of config c. The defaults
// were tuned on SmolLM-135M (d 576, 9 heads, FFN 1536). Wider models have
// more heads and hidden units a block must cover: on the Llama-1B shape
// (d 2048, 32/8 heads, FFN 8192; H200, µs a token @100 / @2148, one
// change at a time from the defaults' 996 / 1960, Q4_0) 32 hidden units a
// block, 4 a warp: 780 / 1808; 8 blocks sharing the output projection:
// 908 / 1961; 4 warps a head for long contexts: 979 / 1609. Together
// 754 / 1392. The mixed-type FFN takes twice the registers a row and
// keeps the SmolLM shape (Q4_K: 16 units 1 a warp 1535 µs @100, 32 units
// 4 a warp 2640), and runs split in two kernels (matvec_add.cu): 1287 /
// 2073 against 1419 / 2175 fused (with matvec_add's chunks, 1173 /
// 1946). The other families' FFNs stayed fused then (Q4_0: 673 / 1370,
// split 729 / 1351; F16: 1029 / 1700, split 1130 / 1785); both split
// since, on int8 hidden units and on act_f32's row (below). ffn is the
// FFN weights' kernel family.
func tuningFor(c *model.Config, ffn gpuType) tuning {
	t := defaultTuning()
	if c.Dim >= largeModelDim {
		t.attnOBlocks = 8
		t.attnWarpsLong = 4
		// The FFN split in two kernels for the mixed family, for Q8_0
		// from the 8B shape's width (µs a token @100, 4 layers: fused 736,
		// split 711), and for Q4_0, whose split kernels take act_q8's
		// int8 activations and int8 hidden units (H200, µs a token @100,
		// fused → split: Llama-1B 725 → 616, Llama-8B shape, 4 layers,
		// 773 → 643).
		// F16 and BF16 split on act_f32's row (glu, then matvec_add's
		// float path; H200, µs a token @100, fused → split: Llama-8B
		// shape, 4 layers, F16 1,020 → 903, BF16 1,023 → 905; Llama-1B
		// F16 1,107 → 993).
		t.ffnSplit = ffn == wtMix || ffn == wtQ4_0 || ffn == wtQ8_0 && c.Dim >= 4096 || ffn == wtF16 || ffn == wtBF16
		// Long contexts merge their splits in one block a head group,
		// which then projected all of W_o's rows alone: 162 µs a layer at
		// 2148 positions on the Llama-8B shape (Q8_0, H200).
		t.attnHeadsLong = true
		// W_o apart on the heads' outputs as int8 (q8_row, then
		// matvec_add8) where its layout has an int8 kernel, and apart at
		// every context from the 8B shape's width: the attention
		// kernels' own projection (a few blocks a head group, float
		// heads) took most of their time. Llama-8B shape (4 layers,
		// Q4_K_M, H200), µs a token @100 / @2148: apart when long on
		// float heads 468.7 / 504.5, apart on float heads 451.5 / 504.3,
		// apart when long on int8 ones 468.0 / 471.0, apart on int8 ones
		// 416.2 / 471.2 (attention_cl 24.3 → 5.2 µs a layer, W_o's
		// matvec_add 13.7 → 7.8 on int8, q8_row 1.3). Narrower models
		// keep W_o in the attention kernel at short contexts until
		// measured (Llama-1B's attention_cl with W_o took 8.9 µs a
		// layer, where the three kernels apart may take as long). F16
		// and BF16 have no int8 kernel: float heads apart at every
		// context, 830 → 821 µs @100 (8B shape, 4 layers), Llama-1B 961
		// → 929.
		t.attnHeads8 = true
		t.attnHeads = c.Dim >= 4096 || ffn == wtF16 || ffn == wtBF16
		// Llama-8B shape (8 layers, H200), µs a token @100, Q8_0 / Q4_0 /
		// Q4_K_M: QKV blocks of 4 warps 1,443 / 1,685 / 2,269, 8 warps
		// 1,261 / 1,506 / 2,017 (16: 1,217 / 1,459 / 1,955, but 128
		// registers a thread and spills).
		t.qkvWarps = 8
		if ffn == wtF16 || ffn == wtBF16 {
			// Float weights read their activations staged, two rows a
			// warp: blocks of 4 warps (H200, µs a token @100, 8 → 4
			// warps, F16): Llama-1B 1,174 → 1,114, 8B shape (4 layers)
			// 1,035 → 1,017. BF16's kernel is F16's but for the widening.
			t.qkvWarps = 4
			// QKV on act_f32's row from the 8B shape's width (H200, µs a
			// token @100, staged → act_f32, F16): Llama-8B shape (4
			// layers) 818 → 801, BF16 824 → 807; Llama-1B 927 → 950.
			t.qkvXF = c.Dim >= 4096
		}
		// The int8 layouts' activations from act_q8, once a layer (H200,
		// µs a token @100, staged → act_q8): Llama-8B shape (4 layers)
		// Q4_K_M 802 → 727, Llama-1B Q4_K_M 891 → 813; the QKV kernel
		// 15.7 → 6.1 µs a layer (8B, Q4_K), the split gate/up 43 → 25.
		// Q4_0, whose kernels take int8 activations from here only: 8B
		// shape 802 → 773, 1B 739 → 725 (fused FFN).
		// The fused FFN (Q8_0) stages still: with act_q8 it took 98 → 119
		// µs a layer (8B).
		t.act8 = true
		// Three head blocks an SM (µs a token @100, 2 → 3 blocks): 8B
		// shape Q4_K_M 727 → 624, Q8_0 942 → 870; 1B Q4_K_M 813 → 755
		// (4 blocks: 726, but 8B 729), Q8_0 960 → 919.
		t.logitsPerSM = 3
		// The wide head kernels (Q8_0 and Q4_K; µs a token @100, one
		// group ahead → wide): 8B shape (4 layers) Q8_0 610 → 593, 1B
		// Q4_K_M 660 → 648, 1B Q8_0 780 → 775.
		t.logitsWide = true
		// The head on act_q8's activations, a warp a row group loading
		// all of its rows at once (logits_x8): see BENCHMARKS.md.
		t.logitsX8 = true
		// Half of L1 as shared memory: a quarter (64 KiB) held one QKV or
		// FFN block of the 8B shape (37 KiB staged) an SM.
		t.carveout = 50
		// The FFN, 32 units a block, 4 a warp on the Llama-1B shape (Q4_0
		// 638 µs @100, 2 a warp 684); 2 a warp from the 8B shape's width on
		// (Q8_0 1,433, Q4_0 1,337; 4 a warp 1,782 and 1,684).
		t.ffn = ffnShape{32, 4}
		if c.Dim >= 4096 {
			t.ffn = ffnShape{32, 2}
		}
	}
	if c.Block.PostNorm && ffn == wtQ4_0 {
		// Narrower post-normed models too: their branches then join the
		// stream in act_q8_post, not in a postnorm kernel each (H200,
		// SmolLM-135M shape, Q4_0, µs a token @100, staged → act_q8):
		// Gemma 3 553.0 → 523.0, OLMo 2 553.5 → 524.3; llama's block,
		// which has no post-norm to fold, 380.9 → 406.4.
		t.act8 = true
	}
	return t
}

// stepKind is what a captured decode step takes in and gives out.
type stepKind int

const (
	stepGreedy         stepKind = iota // the host's token in, the argmax out (no penalties)
	stepSampled                        // the host's token and sampler parameters in; penalties, the sampler chain's token out
	stepChained                        // as stepGreedy, its token the step before's, from device memory
	stepSampledChained                 // as stepSampled, its token the step before's and its draw the next, from device memory
	stepKinds
)

// chained is the kind that follows k on the device.
func (k stepKind) chained() stepKind {
	if k == stepSampled || k == stepSampledChained {
		return stepSampledChained
	}
	return stepChained
}

// stepGraphs are the captured decode step, one graph per kind.
type stepGraphs [stepKinds]*cu.Graph

// The captured step's graphs by context length: graphShort up to
// tune.attnSingle positions, graphMid (when captured) up to
// tune.attnMidSingle, graphLong (when captured) past that.
const (
	graphShort = iota
	graphLong
	graphMid
	graphTiers
)

// graphFor is the graph that runs the step at pos.
func (b *Backend) graphFor(pos int, k stepKind) *cu.Graph {
	n, g := pos+1, &b.graphs
	switch {
	case n <= b.tune.attnSingle:
		return g[graphShort][k]
	case n <= b.tune.attnMidSingle && g[graphMid][k] != nil:
		return g[graphMid][k]
	case g[graphLong][k] != nil:
		return g[graphLong][k]
	}
	return g[graphShort][k]
}

// runAhead is the step that Backend.decodeAhead queued past the one the
// caller asked for: chained to it, so its input is that step's token, at
// the next position. The caller's next Decode takes it over when its
// token and position are those (and, sampled, its sampler is where the
// device's is).
type runAhead struct {
	queued bool // a step is queued that the host has not waited for
	ok     bool // and it can be taken over: the step before gave a token
	pos    int
	token  int32
	// sampled: the queued step runs the sampler chain with params at
	// draw step, and appends its token to the device's penalty history.
	sampled bool
	params  sample.Params
	step    uint64
}

// Backend is the CUDA forward pass of one model with its KV cache. It is not
// safe for concurrent use.
type Backend struct {
	c      *cu.Context
	k      *kernelSet
	stream cu.Stream
	cfg    model.Config
	ctxLen int
	tune   tuning

	layers       []layerWeights
	embd, output deviceMatrix
	outNorm      cu.DevicePtr
	headWindow   *cu.L2Window // the output head's weights, kept in L2 (nil: no room set aside)
	ropeCS       cu.DevicePtr
	localRopeCS  cu.DevicePtr    // the rotation of the layers with LayerAttn.LocalRope (0: none)
	temp         cu.DevicePtr    // the queries' attention temperature by position (tempTable; 0: none)
	res          [2]cu.DevicePtr // the residual stream, fixed point (kernels/common.cuh): layer i reads res[i%2]
	branch       [2]cu.DevicePtr // the post-normed branches' outputs, fixed point: attention's, the FFN's (0: no post-norms)
	poison       cu.DevicePtr    // set when a residual addend did not fit in fixed point
	q            cu.DevicePtr
	ffnH         cu.DevicePtr // the split FFN's hidden units (tuning.ffnSplit)
	ffnH8        cu.DevicePtr // and as int8 blocks, for the int8 layouts (ffnArgs.h8)
	x8           cu.DevicePtr // act_q8's int8 activations or act_f32's float row (tuning.act8)
	heads        cu.DevicePtr // the attention heads' outputs (tuning.attnHeads)
	heads8       cu.DevicePtr // and as int8 blocks (tuning.attnHeads8)
	logits       cu.DevicePtr
	partAcc      cu.DevicePtr
	partML       cu.DevicePtr
	attnTickets  cu.DevicePtr
	pos          cu.DevicePtr
	partV, partI cu.DevicePtr // logits kernel's per-block argmax
	headKey      cu.DevicePtr // the logits_x8 and logits_xf heads' best candidates, 64 slots (logitsArgs.key)
	ticket       cu.DevicePtr
	best         cu.DevicePtr // the argmax of the (penalized) logits
	params       cu.DevicePtr // samp_params, copied from io by the embedding
	hist         cu.DevicePtr // penalty history: {length, oldest, ring[ctxLen]}
	counts       cu.DevicePtr // penalty history: occurrences per token id
	host         *cu.HostBuffer
	// graphs by context length (graphShort, graphMid, graphLong): see
	// graphFor and capture.
	graphs         [graphTiers]stepGraphs
	next           cu.DevicePtr // a chained step's input: {token, position}, written by the head or the sampler
	done           [2]cu.Event  // the decode step at pos has finished when done[pos&1] has
	ahead          runAhead
	launches       int // kernels in one greedy step
	sampleLaunches int // kernels in one sampled step
	hs             hostSampler
	eager          *launcher // debug mode: launches outside the graph
	debug          *debugRef
	allocs         []cu.DevicePtr
	weightBytes    int64
	deviceBytes    int64 // device memory taken by New
	logitsHostByte []byte
	// logitsPos is the position whose logits b.logits holds once the
	// stream has drained: the last step or prefill enqueued writes them
	// (readLogits).
	logitsPos int
	pre       *prefill // batched prefill; nil: the model prefills through the decode graph
	bt        *batch   // batched steps of many sequences (EnableBatching); nil: none

	// rows is the head's buffers for every token's logits (ForwardAll,
	// SeqStep.AllLogits); nil until they are first asked for.
	rows *headRows
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
	if b.ctxLen, err = backend.ContextLenKV(o.ContextLen, cfg, KVElemBytes); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
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
	b.tune = tuningFor(&b.cfg, b.layers[0].gate.Type)
	if _, f := b.newLauncher(false).logitsKernel(&b.output); !b.k.int8[f] {
		// The wide models' head blocks an SM are the int8 kernels' (Q8_0,
		// the typed families); the others read their bytes best at the
		// default (Llama-8B shape, 4 layers, H200, µs a token @100, 3 → 2
		// an SM: F16 1,130 → 1,039, BF16 1,128 → 1,039, Q4_0 885 → 789).
		b.tune.logitsPerSM = 0
	}
	if err := b.k.setCarveout(c, cmp.Or(b.tune.carveout, decodeCarveout)); err != nil {
		return nil, err
	}
	if err := b.allocState(); err != nil {
		return nil, err
	}
	for i := range b.done {
		if b.done[i], err = c.NewSyncEvent(); err != nil {
			return nil, err
		}
	}
	if err := b.keepHeadInL2(); err != nil {
		return nil, err
	}
	l := b.newLauncher(c.Info.Major >= 9 && !o.NoPDL)
	if err := b.capture(l); err != nil {
		return nil, err
	}
	if err := b.setupPrefill(*l); err != nil {
		return nil, err
	}
	freeAfter, _, err := c.MemInfo()
	if err != nil {
		return nil, err
	}
	b.deviceBytes = freeBefore - freeAfter
	if os.Getenv(debugEnv) == "1" {
		if f := b.cfg.Features(); len(f) > 0 {
			// The float64 twin runs the llama block only.
			return nil, fmt.Errorf("cuda: %s=1 checks llama blocks only; this %s model has %s", debugEnv, b.cfg.Arch, strings.Join(f, ", "))
		}
		eager := *l
		b.eager = &eager
		if b.debug, err = newDebugRef(m, b.ctxLen); err != nil {
			return nil, err
		}
		for i := range b.layers {
			dl := &b.debug.layers[i]
			dl.int8Attn, dl.int8FFN, dl.int8Down, dl.int8Heads = b.layerInt8(&eager, i)
		}
	}
	return b, nil
}

// layerInt8 reports which of layer i's kernels round their input to int8
// when l launches the step as recordStep does (kernelSet.int8): the QKV
// kernel, the FFN's gate/up kernel, the split FFN's down projection (on
// int8 hidden units) and the attention's output projection (on int8
// heads: attnArgs.heads8).
func (b *Backend) layerInt8(l *launcher, i int) (attn, ffn, down, heads bool) {
	ly := &b.layers[i]
	qa := qkvArgs{wq: &ly.wq, wk: &ly.wk, wv: &ly.wv, normW: ly.attnNorm}
	if b.tune.act8 {
		qa.x8 = b.x8 // the kernel may differ with it (qkvV)
	}
	fq, _ := l.qkvKernel(qa)
	heads = b.headsApart(l) && b.tune.attnHeads8 && l.headsInt8(attnArgs{wo: &ly.wo, heads: b.heads, heads8: b.heads8}) != nil
	fa := ffnArgs{gate: &ly.gate, up: &ly.up, down: &ly.down}
	if b.tune.ffnSplit {
		fa.h, fa.h8 = b.ffnH, b.ffnH8
	}
	attn = l.k.rounds8(fq, qa.x8 != 0)
	_, ff, err := l.ffnPick(fa)
	if err != nil {
		return attn, false, false, heads
	}
	// The fused FFN kernel stages its input (ffnArgs.x8).
	return attn, l.k.rounds8(ff, b.tune.act8 && fa.h != 0), l.ffnInt8Down(fa, ff) != nil, heads
}

// headsApart says whether a step l launches projects the heads' outputs
// in a kernel of its own (tuning.attnHeads, attnHeadsLong).
func (b *Backend) headsApart(l *launcher) bool {
	return b.tune.attnHeads || b.tune.attnHeadsLong && l.attnCluster == 0
}

// newLauncher is a launcher on b's stream with b's tuned shapes.
func (b *Backend) newLauncher(pdl bool) *launcher {
	return &launcher{c: b.c, k: b.k, stream: b.stream, sms: b.c.Info.SMCount, pdl: pdl,
		ffnShape: b.tune.ffn, ffnMixShape: b.tune.ffnMix, attnWarpsPerHead: b.tune.attnWarps, warpsPerBlock: b.tune.qkvWarps,
		logitsPerSM: b.tune.logitsPerSM, logitsWide: b.tune.logitsWide, largeGemm: b.c.Info.Major >= 9, wgGemm: b.k.pre.wgGemm}
}

func (b *Backend) checkConfig() error {
	c := &b.cfg
	switch {
	case c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0:
		return fmt.Errorf("cuda: %d heads do not group over %d KV heads", c.NumHeads, c.NumKVHeads)
	case c.HeadDim%4 != 0 || c.HeadDim <= 0:
		return fmt.Errorf("cuda: head dimension %d is not a multiple of 4", c.HeadDim)
	case c.Rope.Dim%2 != 0 || c.Rope.Dim > c.HeadDim:
		return fmt.Errorf("cuda: RoPE dimension %d does not fit head dimension %d", c.Rope.Dim, c.HeadDim)
	}
	if _, _, ok := attnLanes(c.HeadDim); !ok {
		return fmt.Errorf("cuda: head dimension %d is not 4·2^k·m with m ≤ %d, which the attention kernel needs", c.HeadDim, attMaxNQ)
	}
	if n := stagedNormBytes(c.Dim); n > maxStagedBytes {
		return fmt.Errorf("cuda: model width %d: the decode kernels stage it and its norm weights in %d bytes of shared memory, more than %d", c.Dim, n, maxStagedBytes)
	}
	if n := residualAddends(c); n > maxResidualAddends {
		return fmt.Errorf("cuda: %d addends per residual element and step, more than the fixed-point residual stream's %d", n, maxResidualAddends)
	}
	return nil
}

// maxStagedBytes is the dynamic shared memory a block may take without
// opting in to more (48 KiB).
const maxStagedBytes = 48 << 10

// maxResidualAddends bounds the atomic adds into one element of the
// fixed-point residual stream in a step: each addend is under 2^16
// (RES_LIMIT in kernels/common.cuh) with 30 fraction bits, so 2^16 of them
// stay under 2^62.
const maxResidualAddends = 1 << 16

// residualAddends is the most atomic adds one residual element takes in a
// step: the embedding, then per layer one per attention head group and one
// per FFN block (the split FFN's matvec_add adds one per chunk of 64
// blocks of a row: fewer).
func residualAddends(c *model.Config) int {
	return 1 + c.NumLayers*(c.NumHeads/attnGroup(c.NumHeads, c.NumKVHeads)+(c.FFNDim+ffnMinUnits-1)/ffnMinUnits)
}

// capture records the greedy and the sampled step into graphs, replacing
// any from before: for short contexts with l as it is (its attention on
// clusters, tune.attnCluster), and for long ones, when tune.attnWarpsLong
// is set, with the split kernel and that many attention warps per head.
// Long contexts are split over many blocks, each with a short chunk,
// where fewer warps a head merge faster (H200, µs a token @2148: 4 warps
// 590, 2 warps 569); short contexts want more (@100 on clusters of 4: 4
// warps 426, 2 warps 476).
func (b *Backend) capture(l *launcher) error {
	if err := b.settle(); err != nil {
		return err
	}
	b.destroyGraphs()
	l.headWindow = nil
	if !b.tune.noL2Head {
		l.headWindow = b.headWindow
	}
	long := *l
	long.attnWarpsPerHead = b.tune.attnWarpsLong
	long.attnCluster = 0
	l.attnCluster = 0
	if long.attnWarpsPerHead > 0 {
		l.attnCluster = b.tune.attnCluster
	}
	mid := *l
	mid.attnCluster = b.tune.attnMidCluster
	for i, l := range []*launcher{graphShort: l, graphLong: &long, graphMid: &mid} {
		switch {
		case i == graphLong && long.attnWarpsPerHead == 0,
			i == graphMid && (l.attnCluster <= 1 || b.tune.attnMidSingle <= b.tune.attnSingle || long.attnWarpsPerHead == 0 ||
				b.c.Info.Major < 9): // no clusters: the long graph serves
			continue
		}
		for k := range stepKinds {
			var err error
			l.count = 0
			b.graphs[i][k], err = b.c.Capture(b.stream, func() error { return b.recordStep(l, k, nil) })
			if err != nil {
				return fmt.Errorf("cuda: capturing the decode step (kind %d): %w", k, err)
			}
			switch k {
			case stepGreedy:
				b.launches = l.count
			case stepSampled:
				b.sampleLaunches = l.count
			}
		}
	}
	return nil
}

// destroyGraphs frees the captured graphs.
func (b *Backend) destroyGraphs() error {
	var errs []error
	for i := range b.graphs {
		for k, g := range b.graphs[i] {
			if g != nil {
				errs = append(errs, g.Destroy())
				b.graphs[i][k] = nil
			}
		}
	}
	return errors.Join(errs...)
}

// keepHeadInL2 sets L2 aside for the output head's weights, where the
// device has persisting L2: every step reads them whole (30 MB of Q8_0 for
// SmolLM's 49152×576), a third of the step's weight bytes, and with the
// rest of the weights streaming through L2 they would come from HBM each
// time. The layers read theirs spread over 90 kernels whose time goes with
// latency, not bandwidth; the head is one kernel that waits for all its
// bytes.
//
// A head larger than the persisting L2 is left streaming: a window over
// part of it only takes L2 from the layers (Llama-1B's 279 MB Q8_0 head,
// H200: 754 µs a token with the window, 717 without).
func (b *Backend) keepHeadInL2() error {
	info := b.c.Info
	base, n := b.output.span()
	if info.MaxPersistingL2 == 0 || n <= 0 || n > info.MaxPersistingL2 || n > info.MaxL2Window {
		return nil
	}
	set, err := b.c.SetPersistingL2(n)
	if err != nil {
		return fmt.Errorf("cuda: setting L2 aside for the output head: %w", err)
	}
	b.headWindow = &cu.L2Window{Base: base, Bytes: n, HitRatio: min(1, float32(set)/float32(n))}
	return nil
}

func (b *Backend) alloc(n int) (cu.DevicePtr, error) {
	p, err := b.c.Alloc(n)
	if err == nil {
		b.allocs = append(b.allocs, p)
	}
	return p, err
}

// stagedUpload is one weight buffer waiting for its place in the arena;
// tag is added to its address (a wtMix header's layout code).
type stagedUpload struct {
	dst  *cu.DevicePtr
	data []byte
	tag  cu.DevicePtr
}

// weightStage collects the weights in the kernels' layout before one
// allocation takes them all: hundreds of small allocations would each be
// rounded up by the driver.
type weightStage struct {
	ups   []stagedUpload
	bytes int64
}

func (s *weightStage) add(dst *cu.DevicePtr, data []byte) {
	s.ups = append(s.ups, stagedUpload{dst: dst, data: data})
	s.bytes += int64(len(data))
}

// matrix lays out t as dst.
func (s *weightStage) matrix(dst *deviceMatrix, t *model.Tensor) error {
	h, err := layoutMatrix(t)
	if err != nil {
		return err
	}
	s.put(dst, h)
	return nil
}

// put stages h as dst.
func (s *weightStage) put(dst *deviceMatrix, h hostMatrix) {
	*dst = deviceMatrix{Type: h.Type, Quant: h.Quant, Rows: h.Rows, Cols: h.Cols, QBytes: len(h.Q), DBytes: len(h.D)}
	s.add(&dst.Q, h.Q)
	if len(h.D) > 0 {
		s.add(&dst.D, h.D)
		s.ups[len(s.ups)-1].tag = h.tag()
	}
}

// group lays out the matrices that one fused kernel reads (fuseLayouts).
func (s *weightStage) group(ts ...*model.Tensor) ([]hostMatrix, error) {
	hs := make([]hostMatrix, len(ts))
	for i, t := range ts {
		var err error
		if hs[i], err = layoutMatrix(t); err != nil {
			return nil, err
		}
	}
	hs, err := fuseLayouts(hs)
	if err != nil {
		var names []string
		for _, t := range ts {
			names = append(names, t.Name)
		}
		return nil, fmt.Errorf("cuda: %s: %w", strings.Join(names, ", "), err)
	}
	return hs, nil
}

// fuseLayouts readies matrices that one fused kernel reads. They keep
// their own family's kernels when they share one of F32, F16, BF16, Q4_0
// or Q8_0; any other set of quantized types goes to the wtMix kernels,
// each matrix with its own layout. A set that no one family reads (F16
// beside Q4_K, say) is an error naming the types.
func fuseLayouts(hs []hostMatrix) ([]hostMatrix, error) {
	same := true
	for _, h := range hs {
		same = same && h.Type == hs[0].Type && h.Quant == hs[0].Quant
	}
	if same && hs[0].Type != wtMix {
		return hs, nil
	}
	out := make([]hostMatrix, len(hs))
	for i, h := range hs {
		var err error
		if out[i], err = h.mix(); err != nil {
			var types []string
			for _, h := range hs {
				types = append(types, h.Quant.String())
			}
			return nil, fmt.Errorf("one fused kernel cannot read %s together: %w", strings.Join(types, ", "), err)
		}
	}
	return out, nil
}

// vector lays out the float32 tensors ts, concatenated, as dst.
func (s *weightStage) vector(dst *cu.DevicePtr, ts ...*model.Tensor) {
	var f []float32
	for _, t := range ts {
		f = append(f, bytesF32(t.Data)...)
	}
	s.add(dst, f32Bytes(f))
}

// optVector stages t, when the model has it (dst stays 0 otherwise).
func (s *weightStage) optVector(dst *cu.DevicePtr, t *model.Tensor) {
	if t != nil && t.Data != nil {
		s.vector(dst, t)
	}
}

// arenaAlign keeps every buffer in an arena aligned for 16-byte loads (and
// more, as cuMemAlloc's own buffers are).
const arenaAlign = 256

func alignUp(n int) int { return (n + arenaAlign - 1) &^ (arenaAlign - 1) }

// upload allocates one buffer for every staged weight and copies them in.
func (s *weightStage) upload(b *Backend) error {
	total := 0
	for _, u := range s.ups {
		total += alignUp(len(u.data))
	}
	base, err := b.alloc(total)
	if err != nil {
		return fmt.Errorf("cuda: weights (%d bytes): %w", total, err)
	}
	off := 0
	for _, u := range s.ups {
		*u.dst = base.Offset(off)
		if err := b.c.CopyHtoD(*u.dst, u.data); err != nil {
			return err
		}
		*u.dst += u.tag
		off += alignUp(len(u.data))
	}
	b.weightBytes += s.bytes
	return nil
}

func (b *Backend) uploadWeights(m *model.Model) error {
	var s weightStage
	if err := s.matrix(&b.embd, &m.TokenEmbd); err != nil {
		return err
	}
	if !b.cfg.TiedEmbeddings {
		if err := s.matrix(&b.output, &m.Output); err != nil {
			return err
		}
	}
	s.vector(&b.outNorm, &m.OutputNorm)
	b.layers = make([]layerWeights, len(m.Layers))
	for i := range m.Layers {
		if err := s.layer(i, m, &b.layers[i]); err != nil {
			return err
		}
	}
	if err := s.upload(b); err != nil {
		return err
	}
	if b.cfg.TiedEmbeddings {
		b.output = b.embd
	}
	for i := range b.layers {
		b.layers[i].splitQKV(&b.cfg)
	}
	return nil
}

// layer stages layer i's weights.
func (s *weightStage) layer(i int, m *model.Model, dst *layerWeights) error {
	src := &m.Layers[i]
	s.optVector(&dst.attnNorm, &src.AttnNorm)
	s.optVector(&dst.ffnNorm, &src.FFNNorm)
	s.optVector(&dst.qNorm, src.QNorm)
	s.optVector(&dst.kNorm, src.KNorm)
	s.optVector(&dst.attnPost, src.AttnPostNorm)
	s.optVector(&dst.ffnPost, src.FFNPostNorm)
	if (src.AttnPostNorm == nil) != (src.FFNPostNorm == nil) {
		// recordStep's branch buffers take the two joins in turn.
		return fmt.Errorf("cuda: layer %d has one post-norm of two", i)
	}
	qkv, err := s.group(&src.Wq, &src.Wk, &src.Wv)
	if err != nil {
		return err
	}
	if qkv[0].Type == wtMix {
		s.put(&dst.wq, qkv[0])
		s.put(&dst.wk, qkv[1])
		s.put(&dst.wv, qkv[2])
	} else {
		// One matrix: the prefill multiplies it in one product; the decode
		// kernel's three parts are views of it (Backend.uploadWeights).
		h, err := stackRows(qkv...)
		if err != nil {
			return fmt.Errorf("cuda: %s…%s: %w", src.Wq.Name, src.Wv.Name, err)
		}
		s.put(&dst.qkv, h)
	}
	if src.Bq != nil {
		s.vector(&dst.bias, src.Bq, src.Bk, src.Bv)
	}
	if err := s.matrix(&dst.wo, &src.Wo); err != nil {
		return err
	}
	ffn, err := s.group(&src.Gate, &src.Up, &src.Down)
	if err != nil {
		return err
	}
	s.put(&dst.gate, ffn[0])
	s.put(&dst.up, ffn[1])
	s.put(&dst.down, ffn[2])
	return nil
}

// splitQKV sets the Q, K and V parts of a layer whose projections were
// stacked, as views of the uploaded matrix.
func (ly *layerWeights) splitQKV(c *model.Config) {
	if ly.qkv.Rows == 0 {
		return
	}
	q, kv := c.QDim(), c.KVDim()
	ly.wq = ly.qkv.rowsFrom(0, q)
	ly.wk = ly.qkv.rowsFrom(q, kv)
	ly.wv = ly.qkv.rowsFrom(q+kv, kv)
}

// KVElemBytes is the bytes of a key or value element in the KV cache: f16
// (kernels/kv.cuh), llama.cpp's default, half a float cache's bytes for
// the attention's reads at long contexts and for the cache's size.
const KVElemBytes = 2

func (b *Backend) allocState() error {
	c := &b.cfg
	// The KV cache in one allocation: 2·layers separate ones would each be
	// rounded up to the driver's granularity.
	kvBytes := KVElemBytes * c.NumKVHeads * b.ctxLen * c.HeadDim
	kv, err := b.alloc(2 * len(b.layers) * alignUp(kvBytes))
	if err != nil {
		return fmt.Errorf("cuda: KV cache: %w", err)
	}
	for i := range b.layers {
		b.layers[i].kCache = kv.Offset((2 * i) * alignUp(kvBytes))
		b.layers[i].vCache = kv.Offset((2*i + 1) * alignUp(kvBytes))
	}
	// The step's scratch, likewise: every word the kernels keep between
	// launches or steps.
	acc, ml := attnPartials(c.NumHeads, c.HeadDim)
	rope := refRopeTable(b.ctxLen, c.Rope.ForContext(b.ctxLen))
	var localRope []float32
	if slices.ContainsFunc(c.LayerAttn, func(la model.LayerAttention) bool { return la.LocalRope }) {
		localRope = refRopeTable(b.ctxLen, c.LocalRope)
	}
	temp := tempTable(&c.Block, b.ctxLen)
	branchWords := 0
	if c.Block.PostNorm {
		branchWords = 2 * c.Dim
	}
	parts := 16 * b.c.Info.SMCount // at least logitsBlocks
	bufs := []struct {
		p *cu.DevicePtr
		n int // 4-byte words
	}{
		{&b.res[0], 2 * c.Dim}, {&b.res[1], 2 * c.Dim}, {&b.q, c.QDim() + c.KVDim()}, {&b.logits, c.VocabSize}, {&b.ffnH, c.FFNDim}, {&b.heads, c.QDim()},
		{&b.heads8, h8Words(c.QDim())},
		{&b.partAcc, acc}, {&b.partML, ml}, {&b.partV, parts}, {&b.partI, parts}, {&b.x8, actF32Words(c.Dim)},
		{&b.ropeCS, len(rope)}, {&b.localRopeCS, len(localRope)}, {&b.temp, len(temp)},
		// Zeroed below: counters, the poison word, the penalty history and
		// the post-norms' branches (zero between steps: recordStep).
		{&b.pos, 1}, {&b.next, 2}, {&b.ticket, 1}, {&b.headKey, headKeyWords}, {&b.attnTickets, 2 * c.NumHeads}, {&b.poison, 1}, {&b.best, 1}, {&b.params, spWords},
		{&b.hist, 2 + b.ctxLen}, {&b.counts, c.VocabSize}, {&b.branch[0], branchWords}, {&b.branch[1], branchWords},
		// Zeroed too: the halves of its last block past FFNDim are never
		// written.
		{&b.ffnH8, h8Words(c.FFNDim)},
	}
	total, zeroFrom := 0, 0
	for _, a := range bufs {
		if a.p == &b.pos {
			zeroFrom = total
		}
		total += alignUp(4 * a.n)
	}
	base, err := b.alloc(total)
	if err != nil {
		return fmt.Errorf("cuda: scratch: %w", err)
	}
	off := 0
	for _, a := range bufs {
		if a.n > 0 {
			*a.p = base.Offset(off)
		}
		off += alignUp(4 * a.n)
	}
	if err := b.c.MemsetD32(base.Offset(zeroFrom), 0, (total-zeroFrom)/4); err != nil {
		return err
	}
	if err := b.c.CopyHtoD(b.ropeCS, f32Bytes(rope)); err != nil {
		return err
	}
	for _, t := range []struct {
		p cu.DevicePtr
		v []float32
	}{{b.localRopeCS, localRope}, {b.temp, temp}} {
		if t.v != nil {
			if err := b.c.CopyHtoD(t.p, f32Bytes(t.v)); err != nil {
				return err
			}
		}
	}
	if b.host, err = b.c.AllocHost(4 * ioWords); err != nil {
		return err
	}
	b.logitsHostByte = make([]byte, 4*c.VocabSize)
	return nil
}

// recordStep enqueues one decode step; it runs once per graph, under stream
// capture, or every step in debug mode, where afterLayer checks each layer's
// output. The greedy step ends in the output head's argmax; the sampled one
// applies the penalties there and runs the sampler chain after it.
//
// A llama layer is three kernels. The residual stream lives in two
// fixed-point buffers: layer i's QKV kernel reads res[i%2] and zeroes
// res[(i+1)%2], its attention adds the output projection into res[i%2]
// (nothing reads it meanwhile), and its FFN reads res[i%2] and sums it with
// the FFN's output into res[(i+1)%2], the next layer's input. The block's
// variations (model.Block) are arguments of those kernels, but for two:
//   - Q/K norms (qk_norm, between the QKV kernel, which then leaves Q and
//     K unrotated, and attention). Within the attention kernel they were
//     slower (backend/cuda/NOTES.md).
//   - Post-norms (Gemma 2/3, OLMo 2): attention sums its branch into
//     b.branch[0], the FFN into b.branch[1], and each joins the stream,
//     normalized, before the next kernel reads it: in act_q8_post, with
//     the int8 activations that kernel needs anyway (postArgs), or else in
//     postnorm's kernel. The FFN's joins in the next layer's, except after
//     the last layer, in debug mode (afterLayer checks each layer's
//     output) and with tuning.postApart. act_q8_post cannot zero the
//     branch it reads, so each join zeroes the other branch, whose reader
//     is done: branch[0] is zero before every attention and branch[1]
//     before every FFN, and since every step ends in postnorm's kernel,
//     which zeroes both, both are zero between steps.
func (b *Backend) recordStep(l *launcher, k stepKind, afterLayer func(i int) error) error {
	c := &b.cfg
	blk := &c.Block
	pos := b.pos
	in, nParams := b.host.Device, spWords
	if k == stepChained || k == stepSampledChained {
		in, nParams = b.next, 0 // the parameters stay the step before's (the draw's step advanced)
	}
	if err := l.embed(in, pos, b.params, nParams, &b.embd, blk.EmbedScale, b.res[0], b.poison); err != nil {
		return err
	}
	var ffnPost *postArgs // the previous layer's FFN branch, joining in this layer's QKV step
	for i := range b.layers {
		ly := &b.layers[i]
		cur, next := b.res[i%2], b.res[(i+1)%2]
		ropeCS, ropeDim := b.layerRope(i)
		qa := qkvArgs{res: cur, resNext: next, poison: b.poison, normW: ly.attnNorm, eps: c.RMSEps, wq: &ly.wq, wk: &ly.wk, wv: &ly.wv,
			bias: ly.bias, nHead: c.NumHeads, nKV: c.NumKVHeads, headDim: c.HeadDim, ropeCS: ropeCS, ropeDim: ropeDim,
			neox: c.Rope.Neox, temp: b.temp, pos: pos, q: b.q, kCache: ly.kCache, vCache: ly.vCache, ctxMax: b.ctxLen,
			post: ffnPost}
		if b.tune.act8 {
			qa.x8, qa.xf = b.x8, b.tune.qkvXF
		}
		if ly.qNorm != 0 {
			// qk_norm rotates and scales after the norms, and writes the
			// keys, staged after the queries, to the cache.
			qa.ropeDim, qa.temp, qa.kCache = 0, 0, 0
		}
		if err := l.qkvRope(qa); err != nil {
			return err
		}
		if ly.qNorm != 0 {
			err := l.qkNorm(qkNormArgs{q: b.q, kCache: ly.kCache, pos: pos, ctxMax: b.ctxLen, nHead: c.NumHeads,
				nKV: c.NumKVHeads, headDim: c.HeadDim, full: blk.QKNorm == model.QKNormFull, qw: ly.qNorm, kw: ly.kNorm,
				eps: c.RMSEps, ropeCS: ropeCS, ropeDim: ropeDim, neox: c.Rope.Neox, temp: b.temp})
			if err != nil {
				return err
			}
		}
		// The post-normed families sum each branch into its own buffer
		// (both or neither: weightStage.layer).
		post := ly.attnPost != 0
		attnOut, attnRS := cur, blk.ResidualScale
		if post {
			attnOut, attnRS = b.branch[0], 1
		}
		a := attnArgs{q: b.q, kCache: ly.kCache, vCache: ly.vCache, ctxMax: b.ctxLen, headDim: c.HeadDim,
			nHead: c.NumHeads, nKV: c.NumKVHeads, pos: pos, scale: blk.AttnScale, window: c.LayerAttn[i].Window,
			softcap: blk.AttnSoftcap, rs: attnRS, single: b.tune.attnSingle,
			minChunk: b.tune.attnMinChunk, splits: cmp.Or(b.tune.attnSplits, attnSplitsFor(c.NumHeads, c.NumKVHeads, l.sms)), oBlocks: b.tune.attnOBlocks, noSpin: b.tune.attnNoSpin, cluster: l.attnCluster,
			partAcc: b.partAcc, partML: b.partML, tickets: b.attnTickets, wo: &ly.wo, res: attnOut, poison: b.poison}
		if b.headsApart(l) {
			a.heads = b.heads
			if b.tune.attnHeads8 {
				a.heads8 = b.heads8
			}
		}
		if err := l.attention(a); err != nil {
			return err
		}
		fa := ffnArgs{res: cur, out: next, poison: b.poison, normW: ly.ffnNorm, eps: c.RMSEps,
			gate: &ly.gate, up: &ly.up, down: &ly.down, act: blk.Act, rs: blk.ResidualScale}
		if post {
			fa.post = &postArgs{branch: b.branch[0], base: cur, w: ly.attnPost, eps: c.RMSEps, rs: blk.ResidualScale,
				clear: b.branch[1], poison: b.poison}
			fa.out, fa.noCarry, fa.rs = b.branch[1], true, 1
		}
		if b.tune.postApart && fa.post != nil {
			if err := l.join(fa.post, cur, c.Dim); err != nil {
				return err
			}
			fa.post = nil
		}
		if b.tune.ffnSplit {
			fa.h, fa.h8 = b.ffnH, b.ffnH8
		}
		if b.tune.act8 {
			fa.x8 = b.x8
		}
		if err := l.ffn(fa); err != nil {
			return err
		}
		ffnPost = nil
		if post {
			p := &postArgs{branch: b.branch[1], base: cur, w: ly.ffnPost, eps: c.RMSEps, rs: blk.ResidualScale,
				clear: b.branch[0], poison: b.poison}
			// Deferred, p's base (cur) was last written by this layer's
			// attention join, two or more launches before the next QKV
			// step's act_q8_post (postArgs).
			if i+1 < len(b.layers) && afterLayer == nil && !b.tune.postApart {
				ffnPost = p
			} else if err := l.join(p, next, c.Dim); err != nil {
				return err
			}
		}
		if afterLayer != nil {
			if err := afterLayer(i); err != nil {
				return err
			}
		}
	}
	return b.recordHead(l, b.res[len(b.layers)%2], k == stepSampled || k == stepSampledChained)
}

// layerRope is layer i's rotation table and dimension (0: the layer does
// not rotate).
func (b *Backend) layerRope(i int) (cu.DevicePtr, int) {
	c := &b.cfg
	switch la := c.LayerAttn[i]; {
	case la.NoRope:
		return b.ropeCS, 0
	case la.LocalRope:
		return b.localRopeCS, c.LocalRope.Dim
	}
	return b.ropeCS, c.Rope.Dim
}

// recordHead enqueues the output head on the residual stream res and the
// sampling: the argmax to the host (slot pos&1) and to the next step's
// input, or (sampled) the penalties, the argmax and the sampler chain,
// whose token goes to the host.
func (b *Backend) recordHead(l *launcher, res cu.DevicePtr, sampled bool) error {
	c := &b.cfg
	result := b.host.Device.Offset(4 * ioResult)
	a := logitsArgs{res: res, poison: b.poison, normW: b.outNorm, eps: c.RMSEps, w: &b.output, scale: c.Block.LogitScale,
		softcap: c.Block.FinalSoftcap, logits: b.logits,
		partV: b.partV, partI: b.partI, ticket: b.ticket, best: b.best, result: result, pos: b.pos, next: b.next}
	if b.tune.logitsX8 && b.tune.act8 {
		a.x8, a.key = b.x8, b.headKey
	}
	if f := l.logitsPick(a); !l.k.int8X8[f] && !l.k.floatX[f] && l.logitsBlocks(&b.output) > 16*b.c.Info.SMCount {
		return fmt.Errorf("cuda: logits grid larger than its partials")
	}
	if !sampled {
		return l.logits(a)
	}
	a.pos, a.next = 0, 0
	a.counts, a.params, a.result = b.counts, b.params, 0
	if err := l.logits(a); err != nil {
		return err
	}
	return l.sample(sampleArgs{logits: b.logits, n: c.VocabSize, params: b.params, best: b.best, hist: b.hist,
		counts: b.counts, result: result, pos: b.pos, next: b.next})
}

// Name describes the device and the captured step.
func (b *Backend) Name() string {
	if b.c == nil {
		return "cuda (closed)"
	}
	return fmt.Sprintf("cuda (%v, %d kernels per token)", b.c.Info, b.launches)
}

// ContextLen is the KV cache length.
func (b *Backend) ContextLen() int { return b.ctxLen }

// Stats reports what the engine holds on the device.
type Stats struct {
	KernelsPerToken        int // greedy step
	SampledKernelsPerToken int // step with the sampler chain
	GraphNodes             int
	WeightBytes            int64
	KVBytes                int64
	DeviceBytes            int64 // device memory taken by New: weights, KV cache, scratch, modules, graphs
}

// Memory implements backend.MemoryReporter from Stats: what New took of
// the device's memory, the weights and the KV cache apart.
func (b *Backend) Memory() backend.Memory {
	st := b.Stats()
	return backend.Memory{Weights: st.WeightBytes, KV: st.KVBytes, Other: max(0, st.DeviceBytes-st.WeightBytes-st.KVBytes), Device: true}
}

// Stats returns the engine's launch and memory figures.
func (b *Backend) Stats() Stats {
	if b.c == nil {
		return Stats{} // closed
	}
	c := &b.cfg
	return Stats{KernelsPerToken: b.launches, SampledKernelsPerToken: b.sampleLaunches, GraphNodes: b.graphs[0][stepGreedy].Nodes,
		WeightBytes: b.weightBytes, KVBytes: int64(2 * KVElemBytes * len(b.layers) * c.NumKVHeads * b.ctxLen * c.HeadDim),
		DeviceBytes: b.deviceBytes}
}

func (b *Backend) check(tokens []int32, pos int) error {
	if b.c == nil {
		return fmt.Errorf("cuda: %w", backend.ErrClosed)
	}
	if err := backend.CheckInput(tokens, pos, b.ctxLen, b.cfg.VocabSize); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	return nil
}

// step runs the greedy graph for one token and returns the argmax (-1 when
// every logit is NaN).
func (b *Backend) step(token int32, pos int) (int32, error) {
	if err := b.settle(); err != nil {
		return 0, err
	}
	if b.debug != nil {
		w := b.host.Uint32s()
		w[ioToken], w[ioPos] = uint32(token), uint32(pos)
		return b.debugStep(token, pos)
	}
	return b.run(b.graphFor(pos, stepGreedy), token, pos, ioResult+pos&1)
}

// run replays g for one token and returns what it wrote to io word result.
func (b *Backend) run(g *cu.Graph, token int32, pos int, result int) (int32, error) {
	w := b.host.Uint32s()
	w[ioToken], w[ioPos] = uint32(token), uint32(pos)
	b.logitsPos = pos
	if err := g.Launch(b.stream); err != nil {
		return 0, err
	}
	if err := b.c.SyncStream(b.stream); err != nil {
		return 0, fmt.Errorf("cuda: decode step at position %d: %w", pos, err)
	}
	return int32(w[result]), nil
}

// decodeGreedy runs the greedy step for token at pos and returns its
// argmax, through decodeAhead.
func (b *Backend) decodeGreedy(token int32, pos int) (int32, error) {
	if b.debug != nil {
		return b.step(token, pos)
	}
	a := b.ahead
	queued := a.ok && !a.sampled && a.pos == pos && a.token == token
	if !queued {
		b.dropAhead()
	}
	return b.decodeAhead(queued, token, pos, stepGreedy)
}

// decodeAhead runs the step for token at pos and returns its token,
// keeping the GPU a step ahead of the host: it queues the step at pos+1,
// chained to this one (its token this step's, read on the device), before
// it waits for this one. When the caller then asks for that token at
// pos+1, as a generation loop does, the step is already running and the
// host's round trip (graph launch, wait, reading the id, and whatever the
// caller does with the token) overlaps it. Otherwise the queued step only
// wrote scratch, the cache row at pos+1 (which the step the caller asks
// for rewrites before anything reads it: a caller's history covers the
// positions before the one it decodes), the other result slot and, when
// sampled, the device's penalty history (dropAhead marks it for upload),
// and is left to finish.
//
// When queued is set the step at pos is b.ahead's, already running;
// otherwise it is launched here from a graph of kind fed, with io's token,
// position and (sampled) parameters.
func (b *Backend) decodeAhead(queued bool, token int32, pos int, fed stepKind) (int32, error) {
	w := b.host.Uint32s()
	if !queued {
		w[ioToken], w[ioPos] = uint32(token), uint32(pos)
		if err := b.launchStep(b.graphFor(pos, fed), pos); err != nil {
			return 0, err
		}
	}
	b.ahead.ok = false
	chain := pos+1 < b.ctxLen
	if chain {
		if err := b.launchStep(b.graphFor(pos+1, fed.chained()), pos+1); err != nil {
			return 0, err
		}
	}
	if err := b.c.SyncEvent(b.done[pos&1]); err != nil {
		return 0, fmt.Errorf("cuda: decode step at position %d: %w", pos, err)
	}
	tok := int32(w[ioResult+pos&1])
	b.ahead = runAhead{queued: chain, ok: chain && tok >= 0, pos: pos + 1, token: tok}
	return tok, nil
}

// launchStep queues graph g for the step at pos and marks its end.
func (b *Backend) launchStep(g *cu.Graph, pos int) error {
	b.ahead.queued = true
	b.logitsPos = pos
	if err := g.Launch(b.stream); err != nil {
		return fmt.Errorf("cuda: decode step at position %d: %w", pos, err)
	}
	return b.c.Record(b.done[pos&1], b.stream)
}

// dropAhead gives up the queued step, which still runs: a sampled one
// appends its token to the device's penalty history, which must then be
// uploaded again before the next sampled step (after the step has run).
func (b *Backend) dropAhead() {
	if b.ahead.sampled {
		b.hs.lastN = 0
	}
	b.ahead.ok, b.ahead.sampled = false, false
}

// settle waits for a step decodeAhead queued, before work that reads what
// it writes (the logits, the result slots) or that the stream does not
// order after it (synchronous copies).
func (b *Backend) settle() error {
	b.dropAhead()
	if !b.ahead.queued {
		return nil
	}
	b.ahead.queued = false
	if err := b.c.SyncStream(b.stream); err != nil {
		return fmt.Errorf("cuda: decode step queued ahead: %w", err)
	}
	return nil
}

// debugStep runs a step kernel by kernel and compares every layer's output
// with the float64 twin, printing the first divergence to standard error.
func (b *Backend) debugStep(token int32, pos int) (int32, error) {
	r := b.debug
	b.logitsPos = pos
	r.embed(token)
	buf := make([]byte, 8*b.cfg.Dim)
	err := b.recordStep(b.eager, stepGreedy, func(i int) error {
		if err := b.c.SyncStream(b.stream); err != nil {
			return err
		}
		if err := b.c.CopyDtoH(buf, b.res[(i+1)%2]); err != nil {
			return err
		}
		r.layer(i, pos)
		if err := r.compare(residualF32(buf), i, pos); err != nil {
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
	return int32(b.host.Uint32s()[ioResult+pos&1]), nil
}

// readLogits copies the logits of position pos to the host: what the step
// or prefill that ran last at pos left in b.logits. The copy is a
// synchronous one, which the non-blocking stream does not order after its
// own work, and a step decodeAhead queued writes the same buffer: so it
// waits for the stream first, and refuses when a later step has replaced
// pos's logits with its own. (Reading them while a queued step ran was the
// cause of wrong logits after a prefill in TestPrefillMatchesSteps.)
func (b *Backend) readLogits(pos int) ([]float32, error) {
	if err := b.settle(); err != nil {
		return nil, err
	}
	if b.logitsPos != pos {
		return nil, fmt.Errorf("cuda: the logits of position %d are gone: the step at %d has replaced them", pos, b.logitsPos)
	}
	if err := b.c.CopyDtoH(b.logitsHostByte, b.logits); err != nil {
		return nil, err
	}
	return bytesF32(b.logitsHostByte), nil
}

// deviceGreedy reports whether the device's argmax is the sampler's choice:
// greedy with no penalties (penalties change the logits first).
func deviceGreedy(s *sample.Sampler) bool {
	return s == nil || (s.Params().Greedy() && !penaltiesOn(s.Params()))
}

// Decode implements backend.Backend: one token at pos, then the next token,
// sampled on the device (sampling.go) so that only its id crosses to the
// host. Like the CPU engine it returns -1 when every logit is NaN.
func (b *Backend) Decode(ctx context.Context, token int32, pos int, s *sample.Sampler) (int32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := b.check([]int32{token}, pos); err != nil {
		return 0, err
	}
	if s == nil {
		return b.decodeGreedy(token, pos)
	}
	return b.decodeSampled(token, pos, s)
}

// Prefill implements backend.Backend. Models with Q4_0/Q8_0 weights run
// the prompt in batched chunks (prefill.go); others, debug mode and prompts
// of a token or two run it a token at a time through the decode graph. A
// prompt past the context is an error before any GPU work.
func (b *Backend) Prefill(ctx context.Context, tokens []int32, pos int, s *sample.Sampler) (int32, error) {
	if err := b.check(tokens, pos); err != nil {
		return 0, err
	}
	if err := b.settle(); err != nil {
		return 0, err
	}
	if !b.batchedPrefill(len(tokens)) {
		return b.prefillSteps(ctx, tokens, pos, s)
	}
	next, err := b.prefillBatched(ctx, tokens, pos)
	if err != nil || deviceGreedy(s) {
		return next, err
	}
	return b.sampleLogits(s, pos+len(tokens)-1)
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
	return b.readLogits(pos)
}

// Close frees everything on the device.
func (b *Backend) Close() error {
	if b.c == nil {
		return nil
	}
	errs := []error{b.settle(), b.destroyGraphs()}
	for _, e := range b.done {
		errs = append(errs, b.c.DestroyEvent(e))
	}
	if b.headWindow != nil {
		_, err := b.c.SetPersistingL2(0)
		errs = append(errs, err)
	}
	for _, p := range b.allocs {
		errs = append(errs, b.c.Free(p))
	}
	errs = append(errs, b.c.FreeHost(b.host), b.closePrefill(), b.closeBatch(), b.closeHeadRows())
	if b.k != nil {
		b.k.unload()
	}
	errs = append(errs, b.c.DestroyStream(b.stream), b.c.Close())
	b.c = nil
	return errors.Join(errs...)
}
