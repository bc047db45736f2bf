package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"gotok/backend/cpu"
	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/sample"
)

// prefillLogitsTol bounds the relative error between the logits after a
// batched prefill and after the same prompt a token at a time through the
// decode graph. The batched path multiplies f16 activations by weights
// dequantized to f16 and runs attention with f16 Q, K, V and P; the decode
// path keeps float32 but for the activations its int8 kernels round
// (kernels/decode.cuh, xq8: QKV, gate/up, the split FFN's down projection
// and the head, for Q8_0 and the typed Q4_K, Q5_K and Q6_K families): up
// to 1.7% on the tests' small random models where f16 alone was 0.2%.
const prefillLogitsTol = 3e-2

func randPrompt(r *rand.Rand, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(r.IntN(vocab))
	}
	return p
}

// prefillVsSteps prefills prompt (from position 0, in pieces at the given
// split points) both ways on g, batched whatever the length, and compares
// the logits at the last prompt position and, after one more token, at the
// next; it returns the two relative errors. The token-by-token reference
// runs each step alone (step), so no step is queued ahead while the
// logits are read; the path Prefill takes for short prompts (prefillSteps,
// which ends in a Decode that queues the next step) must give the same
// first token.
func prefillVsSteps(t *testing.T, g *Backend, prompt []int32, splits []int, probe int32) (last, next float64) {
	t.Helper()
	ctx := context.Background()
	n := len(prompt)
	bounds := append(append([]int{0}, splits...), n)
	var tok int32
	for i := 0; i+1 < len(bounds); i++ {
		var err error
		if tok, err = g.prefillBatched(ctx, prompt[bounds[i]:bounds[i+1]], bounds[i]); err != nil {
			t.Fatal(err)
		}
	}
	lastB, err := g.readLogits(n - 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := int32(refArgmax(lastB)); tok != want {
		t.Errorf("prompt of %d: the device sampled %d, the argmax of its logits is %d", n, tok, want)
	}
	nextB, err := g.Logits(ctx, probe, n)
	if err != nil {
		t.Fatal(err)
	}
	var tokS int32
	for i, p := range prompt {
		if tokS, err = g.step(p, i); err != nil {
			t.Fatal(err)
		}
	}
	lastS, err := g.readLogits(n - 1)
	if err != nil {
		t.Fatal(err)
	}
	if tokP, err := g.prefillSteps(ctx, prompt, 0, nil); err != nil || tokP != tokS {
		t.Errorf("prompt of %d: prefillSteps gave %d (%v), its steps one at a time %d", n, tokP, err, tokS)
	}
	if _, err := g.readLogits(n - 1); err == nil && n < g.ctxLen {
		t.Errorf("prompt of %d: logits read after a step was queued past them", n)
	}
	nextS, err := g.Logits(ctx, probe, n)
	if err != nil {
		t.Fatal(err)
	}
	last, next = relErr(lastB, f64s(lastS)), relErr(nextB, f64s(nextS))
	if !(last <= prefillLogitsTol) || !(next <= prefillLogitsTol) {
		t.Errorf("prompt of %d (pieces at %v): logits relative error %.3g at the last prompt position, %.3g after it (bound %.0e)",
			n, splits, last, next, prefillLogitsTol)
	} else {
		t.Logf("prompt of %d (pieces at %v): logits relative error %.3g at the last prompt position, %.3g after it; first token %d, token by token %d",
			n, splits, last, next, tok, tokS)
	}
	return last, next
}

// TestPrefillMatchesSteps runs the batched prefill against token-by-token
// decoding on small models: head dimensions 16 and 64, Q4_0 and Q8_0,
// tied and untied heads, prompts in several chunks and in several calls.
func TestPrefillMatchesSteps(t *testing.T) {
	skipWithoutGPU(t)
	r := rand.New(rand.NewPCG(21, 21))
	hd64 := synth.Shape{Layers: 2, Dim: 256, Heads: 4, KVHeads: 1, FFN: 320, Vocab: 512, Context: 1024, RopeBase: 10000}
	opts := func(s synth.Shape, typ quant.Type) synth.Options {
		return synth.Options{Shape: s, Type: typ, EmbedType: synth.DefaultEmbedType(typ), Seed: 7}
	}
	t256 := synth.Presets["test-256"]
	for _, tc := range []struct {
		name    string
		o       synth.Options
		chunk   int
		prompts []int
	}{
		{"tiny q4_0", opts(synth.Presets["tiny"], quant.Q4_0), 64, []int{1, 7, 100, 200}},
		{"tiny q8_0", opts(synth.Presets["tiny"], quant.Q8_0), 512, []int{1, 7, 200}},
		{"hd64 q4_0 untied", opts(hd64, quant.Q4_0), 512, []int{1, 7, 130, 600}},
		{"tiny f16", opts(synth.Presets["tiny"], quant.F16), 64, []int{1, 7, 100}},
		{"test-256 bf16", opts(t256, quant.BF16), 512, []int{7, 130}},
		{"test-256 q4_k_m-like", q4KMLike(t256, 7), 64, []int{1, 7, 130}},
		{"test-256 q5_k", opts(t256, quant.Q5_K), 512, []int{7, 130}},
		{"test-256 q4_0 + q6_k head", q4_0Like(t256, 7), 512, []int{7, 130}},
		{"test-256 iq4_xs", opts(t256, quant.IQ4_XS), 512, []int{7, 130}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := genModelWith(t, tc.o)
			g, err := New(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if g.pre == nil {
				t.Fatalf("no batched prefill: %s", g.prefillUnsupported())
			}
			g.pre.chunk = min(tc.chunk, g.pre.chunk)
			for _, n := range tc.prompts {
				prefillVsSteps(t, g, randPrompt(r, n, m.Config.VocabSize), nil, int32(r.IntN(m.Config.VocabSize)))
			}
			n := tc.prompts[len(tc.prompts)-1]
			prefillVsSteps(t, g, randPrompt(r, n, m.Config.VocabSize), []int{n / 3, n/3 + 1}, 5)
		})
	}
}

// TestPrefillDequantized checks the prefill whose products run through
// f16 copies of quantized weights (prefill_dequant.go) on a shape wide
// enough for wgmma's tile: against token-by-token steps; copies written
// ahead on the side stream against copies written in line (the same
// kernels on the same numbers: the same bits, over several rounds, which
// a missing wait between the streams would break); in slices of a small
// scratch, and over chunks, the earlier ones stopping at the last layer's
// keys and values.
func TestPrefillDequantized(t *testing.T) {
	skipWithoutGPU(t)
	r := rand.New(rand.NewPCG(23, 23))
	wide := synth.Shape{Layers: 2, Dim: 2048, Heads: 16, KVHeads: 4, FFN: 4096, Vocab: 512, Context: 1024, RopeBase: 10000}
	for _, tc := range []struct {
		name string
		o    synth.Options
	}{
		{"q4_k_m-like", q4KMLike(wide, 3)},
		{"q4_0", synth.Options{Shape: wide, Type: quant.Q4_0, EmbedType: quant.Q8_0, Seed: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := genModelWith(t, tc.o)
			g, err := New(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if g.pre == nil || g.pre.l.dq == nil {
				t.Skipf("no f16 copies here (batched prefill: %v; wgmma: %v)", g.pre != nil, g.k.pre.wgGemm)
			}
			if jobs := g.dequantPlan(&g.pre.l, 300, 1); len(jobs) == 0 {
				t.Fatal("no product of a 300-token prompt is planned through f16 copies")
			}
			ctx := context.Background()
			prompt := randPrompt(r, 300, m.Config.VocabSize)
			run := func() []float32 {
				t.Helper()
				if _, err := g.Prefill(ctx, prompt, 0, nil); err != nil {
					t.Fatal(err)
				}
				l, err := g.readLogits(len(prompt) - 1)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			dq, bytes, chunk := g.pre.l.dq, g.pre.l.dequantBytes, g.pre.chunk
			for _, v := range []struct {
				name         string
				bytes, chunk int
			}{{"whole", bytes, chunk}, {"slices", 4 << 20, chunk}, {"slices, chunks of 128", 4 << 20, 128}} {
				g.pre.l.dequantBytes, g.pre.chunk = v.bytes, v.chunk
				g.pre.l.dq = nil
				inline := run()
				g.pre.l.dq = dq
				for round := range 3 {
					if got := run(); !slices.Equal(got, inline) {
						t.Fatalf("%s, round %d: copies written ahead give other logits than copies written in line", v.name, round)
					}
				}
				last, next := prefillVsSteps(t, g, prompt, nil, 5)
				t.Logf("%s: against steps, relative error %.3g at the last position, %.3g after it", v.name, last, next)
			}
			g.pre.l.dequantBytes, g.pre.chunk = bytes, chunk
			if dq.missed != 0 {
				t.Errorf("%d planned slices were never taken: dequantPlan is out of step with the products", dq.missed)
			}
			// The quantized gemms themselves (no copies) agree too.
			g.pre.l.dequantMin = math.MaxInt
			want := run()
			g.pre.l.dequantMin = dequantMinRows
			if e := relErr(run(), f64s(want)); !(e <= prefillLogitsTol) {
				t.Errorf("f16 copies against the quantized gemms: relative error %.3g > %.1g", e, prefillLogitsTol)
			}
		})
	}
}

// TestPrefillBF16 checks the prefill of a BF16 model on a shape wide
// enough for wgmma's tile, whose BF16 products multiply by activations
// rounded to bf16 (prefill_bf16.go): against token-by-token steps, over
// chunks, and against gemm.cu's large tile, which reads the same weights
// against the f16 activations (the path taken when they do not fit the
// scratch).
func TestPrefillBF16(t *testing.T) {
	skipWithoutGPU(t)
	r := rand.New(rand.NewPCG(29, 29))
	wide := synth.Shape{Layers: 2, Dim: 2048, Heads: 16, KVHeads: 4, FFN: 4096, Vocab: 512, Context: 1024, RopeBase: 10000}
	m := genModelWith(t, synth.Options{Shape: wide, Type: quant.BF16, EmbedType: quant.BF16, Seed: 3})
	g, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.pre == nil || !g.pre.l.wgGemm {
		t.Skipf("no wgmma tile here (batched prefill: %v)", g.pre != nil)
	}
	const n = 300
	if g.pre.l.bf16ActBytes < 2*n*wide.FFN {
		t.Fatalf("bf16 activation scratch of %d bytes, want at least %d", g.pre.l.bf16ActBytes, 2*n*wide.FFN)
	}
	if ti := g.pre.l.gemmTileFor(n, wide.FFN, wide.Dim, gemmGLU); ti != gemmWG {
		t.Fatalf("gate/up of a %d-token prompt on tile %d, not wgmma's", n, ti)
	}
	prompt := randPrompt(r, n, m.Config.VocabSize)
	last, next := prefillVsSteps(t, g, prompt, nil, 5)
	t.Logf("against steps: relative error %.3g at the last position, %.3g after it", last, next)
	chunk := g.pre.chunk
	g.pre.chunk = 128
	prefillVsSteps(t, g, prompt, []int{100}, 7)
	g.pre.chunk = chunk

	logits := func() []float32 {
		t.Helper()
		if _, err := g.Prefill(context.Background(), prompt, 0, nil); err != nil {
			t.Fatal(err)
		}
		l, err := g.readLogits(n - 1)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	bf16 := logits()
	bytes := g.pre.l.bf16ActBytes
	g.pre.l.bf16ActBytes = 0
	f16 := logits()
	g.pre.l.bf16ActBytes = bytes
	if e := relErr(bf16, f64s(f16)); !(e <= prefillLogitsTol) {
		t.Errorf("bf16 activations against f16 ones: relative error %.3g > %.1g", e, prefillLogitsTol)
	} else {
		t.Logf("bf16 activations against f16 ones: relative error %.3g", e)
	}
}

// TestPrefillPaths checks which models take the batched path, and that a
// prompt past the context fails before any work on either path.
func TestPrefillPaths(t *testing.T) {
	skipWithoutGPU(t)
	ctx := context.Background()
	for _, tc := range []struct {
		typ     quant.Type
		batched bool
	}{{quant.Q4_0, true}, {quant.Q8_0, true}, {quant.F16, true}, {quant.BF16, true}, {quant.Q5_1, true}, {quant.F32, false}} {
		m := genModel(t, synth.Presets["tiny"], tc.typ, 8)
		g, err := New(m, Options{ContextLen: 32})
		if err != nil {
			t.Fatal(err)
		}
		if (g.pre != nil) != tc.batched {
			t.Errorf("%s: batched prefill %v, want %v (%s)", tc.typ, g.pre != nil, tc.batched, g.prefillUnsupported())
		}
		if g.batchedPrefill(prefillStepsMax) || g.batchedPrefill(prefillStepsMax+1) != tc.batched {
			t.Errorf("%s: prompts of %d tokens batched %v, of %d %v", tc.typ, prefillStepsMax, g.batchedPrefill(prefillStepsMax),
				prefillStepsMax+1, g.batchedPrefill(prefillStepsMax+1))
		}
		if _, err := g.Prefill(ctx, make([]int32, 33), 0, nil); err == nil {
			t.Errorf("%s: a prompt past the context was accepted", tc.typ)
		}
		if _, err := g.Prefill(ctx, make([]int32, 10), 23, nil); err == nil {
			t.Errorf("%s: a prompt ending past the context was accepted", tc.typ)
		}
		if _, err := g.Prefill(ctx, nil, 0, nil); err == nil {
			t.Errorf("%s: an empty prompt was accepted", tc.typ)
		}
		if _, err := g.Prefill(ctx, make([]int32, 32), 0, nil); err != nil {
			t.Errorf("%s: a prompt filling the context failed: %v", tc.typ, err)
		}
		g.Close()
	}
}

// TestPrefillSampled checks the host sampler after a batched prefill: the
// same seed draws the CPU engine's token from the same prompt (logits differ
// in the last bits, so a few seeds may land on a boundary; most must agree).
func TestPrefillSampled(t *testing.T) {
	skipWithoutGPU(t)
	m := genModel(t, synth.Presets["tiny"], quant.Q8_0, 9)
	ctx := context.Background()
	g, err := New(m, Options{ContextLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := cpu.New(m, cpu.Options{ContextLen: 128, KVType: quant.F16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(22, 22))
	same := 0
	const trials = 20
	for i := 0; i < trials; i++ {
		prompt := randPrompt(r, 1+r.IntN(100), m.Config.VocabSize)
		draw := func(be interface {
			Prefill(context.Context, []int32, int, *sample.Sampler) (int32, error)
		}) int32 {
			s, err := sample.New(sample.Params{Temperature: 0.9, TopK: 20, Seed: uint64(i)})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := be.Prefill(ctx, prompt, 0, s)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		if draw(g) == draw(c) {
			same++
		}
	}
	if same < trials*3/4 {
		t.Errorf("sampled first tokens agree with the CPU engine in %d of %d prompts", same, trials)
	}
	t.Logf("sampled first tokens agree in %d of %d prompts", same, trials)
}

// TestStories260KPrefillGreedy prefills a prompt and decodes greedily on
// both engines: stories260K is F32, so this is the token-by-token path,
// whose continuations must not change.
func TestStories260KPrefillGreedy(t *testing.T) {
	skipWithoutGPU(t)
	m := stories260K(t)
	ctx := context.Background()
	prompt := randPrompt(rand.New(rand.NewPCG(23, 23)), 20, m.Config.VocabSize)
	prompt[0] = 1
	greedy := func(be interface {
		Prefill(context.Context, []int32, int, *sample.Sampler) (int32, error)
		Decode(context.Context, int32, int, *sample.Sampler) (int32, error)
	}) []int32 {
		s, err := sample.New(sample.Params{Temperature: 0})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := be.Prefill(ctx, prompt, 0, s)
		if err != nil {
			t.Fatal(err)
		}
		out := []int32{tok}
		for pos := len(prompt); pos < len(prompt)+100; pos++ {
			if tok, err = be.Decode(ctx, tok, pos, s); err != nil {
				t.Fatal(err)
			}
			out = append(out, tok)
		}
		return out
	}
	g, err := New(m, Options{ContextLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := cpu.New(m, cpu.Options{ContextLen: 256, KVType: quant.F16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gt, ct := greedy(g), greedy(c)
	for i := range ct {
		if gt[i] != ct[i] {
			t.Fatalf("greedy continuations differ at %d: gpu %v… cpu %v…", i, gt[i:min(i+8, len(gt))], ct[i:min(i+8, len(ct))])
		}
	}
	t.Logf("101 greedy tokens after a 20-token prompt identical (batched prefill: %v)", g.pre != nil)
}

// benchModel loads $GOTOK_BENCH_MODEL: a file, or a synth preset generated
// as synthSpec reads it.
func benchModel(t *testing.T) *model.Model {
	t.Helper()
	path := os.Getenv("GOTOK_BENCH_MODEL")
	if path == "" {
		t.Skip("set GOTOK_BENCH_MODEL to a model file or a synth preset")
	}
	skipWithoutGPU(t)
	if m := synthSpec(t, path); m != nil {
		return m
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestPrefillBenchModel compares the batched prefill with token-by-token
// decoding on the benchmark model (SmolLM-135M-shaped) for prompts of 1, 7,
// 128, 512 and 2000 tokens.
func TestPrefillBenchModel(t *testing.T) {
	m := benchModel(t)
	g, err := New(m, Options{ContextLen: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.pre == nil {
		t.Fatalf("no batched prefill: %s", g.prefillUnsupported())
	}
	r := rand.New(rand.NewPCG(24, 24))
	for _, n := range []int{1, 7, 128, 512, 2000} {
		prefillVsSteps(t, g, randPrompt(r, n, m.Config.VocabSize), nil, int32(r.IntN(m.Config.VocabSize)))
	}
}

// TestPrefillSpeed times Prefill on the benchmark model: the wall clock of
// the whole call (chunks, output head, the sampled token back on the host)
// as `gotok bench` sees it, median of 10 after 2 warm-ups, and a per-kernel
// profile of pp512 from events between the launches.
func TestPrefillSpeed(t *testing.T) {
	m := benchModel(t)
	g, err := New(m, Options{ContextLen: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.pre == nil {
		t.Fatalf("no batched prefill: %s", g.prefillUnsupported())
	}
	t.Logf("%s; prefill chunk %d", g.Name(), g.pre.chunk)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(25, 25))
	for _, n := range []int{1, 3, 7, 128, 512, 2048, 4096} {
		prompt := randPrompt(r, n, m.Config.VocabSize)
		var times []time.Duration
		for i := 0; i < 12; i++ {
			start := time.Now()
			if _, err := g.Prefill(ctx, prompt, 0, nil); err != nil {
				t.Fatal(err)
			}
			if i >= 2 {
				times = append(times, time.Since(start))
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		med := times[len(times)/2]
		t.Logf("pp%d: %.0f tok/s (median %v, min %v, max %v)", n, float64(n)/med.Seconds(), med, times[0], times[len(times)-1])
	}
	profilePrefill(t, g, randPrompt(r, 512, m.Config.VocabSize))

	// Each gemm tile for every product, then the choice by shape again.
	for ti := range len(gemmTiles) + 1 {
		g.pre.l.gemmTile = (ti + 1) % (len(gemmTiles) + 1)
		what := "gemm tiles by shape"
		if g.pre.l.gemmTile > 0 {
			tile := gemmTiles[g.pre.l.gemmTile-1]
			if tile.wg && !g.k.pre.wgGemm {
				continue
			}
			what = fmt.Sprintf("gemm tile %d×%d%s", tile.m, tile.n, tile.suffix)
		}
		line := what + ":"
		for _, n := range []int{128, 512, 2048} {
			med := prefillMedian(t, g, randPrompt(r, n, m.Config.VocabSize))
			line += fmt.Sprintf(" pp%d %.0f tok/s;", n, float64(n)/med.Seconds())
		}
		t.Log(line)
		if os.Getenv("GOTOK_BENCH_QUICK") == "" || g.pre.l.gemmTile > 0 {
			profilePrefill(t, g, randPrompt(r, 512, m.Config.VocabSize))
		}
	}

	// Quantized weights dequantized to f16 first from 128 (the default),
	// 256 and 512 rows, and never; then in line instead of ahead on the
	// side stream.
	if g.pre.l.dequant != 0 {
		defer func(v int, dq *dequantAhead) { g.pre.l.dequantMin, g.pre.l.dq = v, dq }(g.pre.l.dequantMin, g.pre.l.dq)
		for i, dm := range []int{dequantMinRows, 256, 512, math.MaxInt, dequantMinRows} {
			g.pre.l.dequantMin = dm
			line := fmt.Sprintf("dequantized from %d rows:", dm)
			if i == 4 {
				g.pre.l.dq = nil
				line = "dequantized in line:"
			}
			for _, n := range []int{128, 256, 512, 2048} {
				med := prefillMedian(t, g, randPrompt(r, n, m.Config.VocabSize))
				line += fmt.Sprintf(" pp%d %.0f tok/s;", n, float64(n)/med.Seconds())
			}
			t.Log(line)
		}
	}

	// Programmatic dependent launch for short chunks only (the default), for
	// all, for none: Prefill's median wall time; and the host's side, the
	// time to enqueue one chunk's launches (no sync inside).
	defer func(v int) { g.pre.pdlMax = v }(g.pre.pdlMax)
	for _, pdlMax := range []int{prefillPDLMax, g.ctxLen, 0} {
		g.pre.pdlMax = pdlMax
		line := fmt.Sprintf("PDL up to %d tokens:", pdlMax)
		for _, n := range []int{3, 128, 512, 2048} {
			med := prefillMedian(t, g, randPrompt(r, n, m.Config.VocabSize))
			line += fmt.Sprintf(" pp%d %.0f tok/s (%v);", n, float64(n)/med.Seconds(), med.Round(time.Microsecond))
		}
		start := time.Now()
		if err := g.recordPrefill(&g.pre.l, g.pre.dtok, 512, 0, 1, nil); err != nil {
			t.Fatal(err)
		}
		enq := time.Since(start)
		if err := g.c.SyncStream(g.stream); err != nil {
			t.Fatal(err)
		}
		launches := 1 + 8*len(g.layers)
		t.Logf("%s enqueueing a 512-token chunk's %d launches %v (%.1f µs a launch)", line, launches,
			enq.Round(time.Microsecond), float64(enq.Microseconds())/float64(launches))
	}
}

// prefillMedian is the median wall time of eight Prefills of prompt.
func prefillMedian(t *testing.T, g *Backend, prompt []int32) time.Duration {
	t.Helper()
	var times []time.Duration
	for range 8 {
		start := time.Now()
		if _, err := g.Prefill(context.Background(), prompt, 0, nil); err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times[4]
}

// profilePrefill times each kernel of one prefill with events recorded
// between the launches (which also stops launches from overlapping) and
// sums the time by kernel name.
func profilePrefill(t *testing.T, g *Backend, prompt []int32) {
	var evs []cu.Event
	var names []string
	defer func() {
		for _, e := range evs {
			g.c.DestroyEvent(e)
		}
	}()
	record := func(name string) error {
		e, err := g.c.NewEvent()
		if err != nil {
			return err
		}
		evs, names = append(evs, e), append(names, name)
		return g.c.Record(e, g.stream)
	}
	saved := g.pre.l
	g.pre.l.after = func(f *cu.Function) error { return record(f.Name) }
	// Every kernel on the one stream, timed alone: f16 copies in line.
	g.pre.l.dq = nil
	defer func() { g.pre.l = saved }()
	if err := record("start"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.prefillBatched(context.Background(), prompt, 0); err != nil {
		t.Fatal(err)
	}
	sum := map[string]float64{}
	count := map[string]int{}
	var order []string
	total := 0.0
	for i := 1; i < len(evs); i++ {
		ms, err := g.c.Elapsed(evs[i-1], evs[i])
		if err != nil {
			t.Fatal(err)
		}
		if count[names[i]] == 0 {
			order = append(order, names[i])
		}
		sum[names[i]] += float64(ms) * 1000
		count[names[i]]++
		total += float64(ms) * 1000
	}
	t.Logf("profile of pp%d, kernel by kernel (%d launches, %.0f µs, pdl=%v):", len(prompt), len(evs)-1, total, g.pre.l.pdl && len(prompt) <= g.pre.pdlMax)
	for _, n := range order {
		t.Logf("  %-24s %4d× %8.1f µs (%.1f µs each)", n, count[n], sum[n], sum[n]/float64(count[n]))
	}
}
