package cuda

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gotok/backend"
	"gotok/backend/cpu"
	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/quant/mix"
	"gotok/sample"
)

var _ backend.Backend = (*Backend)(nil)

func skipWithoutGPU(t *testing.T) {
	t.Helper()
	if err := cu.Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
}

func genModel(t *testing.T, shape synth.Shape, typ quant.Type, seed uint64) *model.Model {
	t.Helper()
	return genModelWith(t, synth.Options{Shape: shape, Type: typ, EmbedType: synth.DefaultEmbedType(typ), Seed: seed})
}

// q4KMLike is a Q4_K_M-shaped mix (llama.cpp's per-tensor choices, in
// short): Q4_K weights and embedding, a Q6_K output head, and Q6_K V and
// down projections in every other layer, so layers of both kinds run.
func q4KMLike(shape synth.Shape, seed uint64) synth.Options {
	return synth.Options{Shape: shape, Type: quant.Q4_K, EmbedType: quant.Q4_K, Seed: seed,
		TypeOf: func(name string) (quant.Type, bool) {
			if name == "output.weight" {
				return quant.Q6_K, true
			}
			var layer int
			var what string
			if _, err := fmt.Sscanf(name, "blk.%d.%s", &layer, &what); err == nil && layer%2 == 0 &&
				(what == "attn_v.weight" || what == "ffn_down.weight") {
				return quant.Q6_K, true
			}
			return 0, false
		}}
}

// q4_0Like is llama.cpp's Q4_0 file: Q4_0 weights and embedding, a Q6_K
// output head.
func q4_0Like(shape synth.Shape, seed uint64) synth.Options {
	return synth.Options{Shape: shape, Type: quant.Q4_0, EmbedType: quant.Q4_0, Seed: seed,
		TypeOf: func(name string) (quant.Type, bool) { return quant.Q6_K, name == "output.weight" }}
}

// mixLike is shape quantized as llama-quantize's mix m would (package
// quant/mix's per-tensor rules): Q2_K's or IQ4_XS's V and down
// projections of other types, a Q6_K head.
func mixLike(shape synth.Shape, m mix.Mix, seed uint64) synth.Options {
	md := mix.Model{Arch: "llama", Layers: shape.Layers, Heads: shape.Heads, KVHeads: shape.KVHeads, Tied: shape.Tied}
	hd := shape.HeadDim
	if hd == 0 {
		hd = shape.Dim / shape.Heads
	}
	return synth.Options{Shape: shape, Type: m.Base, EmbedType: m.Base, Seed: seed,
		TypeOf: func(name string) (quant.Type, bool) {
			cols := shape.Dim // a 2-D tensor's row length by its role
			switch {
			case strings.HasSuffix(name, "ffn_down.weight"):
				cols = shape.FFN
			case strings.HasSuffix(name, "attn_output.weight"):
				cols = shape.Heads * hd
			}
			return m.Type(name, cols, md), true
		}}
}

// synthSpec generates the model a benchmark's spec names, nil when it is
// not a synth preset: "PRESET" as `gotok gen --preset` writes it (Q4_0,
// token_embd Q8_0, seed 1), "PRESET:ARCH" with another family's block (as
// --arch), "PRESET:q4_k_m" or ":q5_k_m" in llama.cpp's mixes (q4KMLike),
// "PRESET:mix-NAME" in any of them as package quant/mix writes it
// (mixLike: mix-iq4_xs, mix-q3_k_m, …), "PRESET:TYPE" (q8_0, f16, …)
// with every matrix of one type, and
// "PRESET:ARCH:TYPE" both. "PRESET/L" keeps the first L layers (the 8B
// shape's kernels in a fraction of the time to make it).
func synthSpec(t *testing.T, spec string) *model.Model {
	t.Helper()
	preset, suffix, _ := strings.Cut(spec, ":")
	preset, layers, cut := strings.Cut(preset, "/")
	shape, ok := synth.Presets[preset]
	if !ok {
		return nil
	}
	if cut {
		n, err := strconv.Atoi(layers)
		if err != nil || n < 1 {
			t.Fatalf("benchmark model %q: bad layer count %q", spec, layers)
		}
		shape.Layers = min(n, shape.Layers)
	}
	if arch, typ, ok := strings.Cut(suffix, ":"); ok {
		shape.Arch, suffix = arch, typ
	}
	switch suffix {
	case "q4_k_m":
		return genModelWith(t, q4KMLike(shape, 1))
	case "q5_k_m":
		o := q4KMLike(shape, 1)
		o.Type, o.EmbedType = quant.Q5_K, quant.Q5_K
		return genModelWith(t, o)
	}
	if name, ok := strings.CutPrefix(suffix, "mix-"); ok {
		m, ok := mix.Lookup(name)
		if !ok {
			t.Fatalf("benchmark model %q: no mix %q (%s)", spec, name, strings.Join(mix.Names(), ", "))
		}
		return genModelWith(t, mixLike(shape, m, 1))
	}
	if typ, err := quant.ParseType(suffix); err == nil {
		return genModelWith(t, synth.Options{Shape: shape, Type: typ, EmbedType: typ, Seed: 1})
	}
	if shape.Arch != "" {
		t.Fatalf("benchmark model %q: %q is not a weight type", spec, suffix)
	}
	shape.Arch = suffix
	return genModel(t, shape, quant.Q4_0, 1)
}

func genModelWith(t *testing.T, o synth.Options) *model.Model {
	t.Helper()
	w, err := synth.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func f64s(f []float32) []float64 {
	d := make([]float64, len(f))
	for i, v := range f {
		d[i] = float64(v)
	}
	return d
}

// compareWithCPU feeds the same tokens to both engines and checks every
// step's logits; it returns the worst relative error.
func compareWithCPU(t *testing.T, m *model.Model, steps int, tol float64, seed uint64, tune ...func(*tuning)) float64 {
	t.Helper()
	ctx := context.Background()
	g, err := New(m, Options{ContextLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(tune) > 0 {
		for _, f := range tune {
			f(&g.tune)
		}
		recapture(t, g)
	}
	c, err := cpu.New(m, cpu.Options{ContextLen: 256, KVType: quant.F16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(seed, seed))
	worst := 0.0
	for pos := 0; pos < steps; pos++ {
		tok := int32(r.IntN(m.Config.VocabSize))
		want, err := c.Logits(ctx, tok, pos)
		if err != nil {
			t.Fatal(err)
		}
		got, err := g.Logits(ctx, tok, pos)
		if err != nil {
			t.Fatal(err)
		}
		e := relErr(got, f64s(want))
		worst = max(worst, e)
		if !(e <= tol) {
			t.Fatalf("position %d: logits relative error %.3g > %.1g", pos, e, tol)
		}
	}
	return worst
}

func TestEngineMatchesCPU(t *testing.T) {
	skipWithoutGPU(t)
	tiny := synth.Presets["tiny"]
	// The CPU engine multiplies Q4_0/Q8_0 weights by activations rounded
	// to Q8_0; the GPU's decode kernels round Q8_0's to int8 their own
	// way (QKV, gate/up and the head; kernels/decode.cuh, xq8) and keep
	// Q4_0's in float32: hence the looser bound there. Both engines keep
	// f16 caches; this tiny random model amplifies the cache's rounding
	// where activations are rounded to 8 bits (on the CPU alone, an f32
	// cache against an f16 one: F32 weights 7.6e-4, Q8_0 0.020, Q4_0
	// 0.032), and the engines' caches, which round values a few ulps of
	// float32 apart, can land a half apart: the Q4_0 bound sits above
	// that (0.030 seen, 0.022 on f32 caches).
	for _, tc := range []struct {
		typ quant.Type
		tol float64
	}{{quant.F32, 1e-4}, {quant.F16, 1e-4}, {quant.Q8_0, 3e-2}, {quant.Q4_0, 4e-2}} {
		m := genModel(t, tiny, tc.typ, 3)
		worst := compareWithCPU(t, m, 40, tc.tol, 9)
		t.Logf("%s: worst logits relative error over 40 steps %.3g (bound %.1g)", tc.typ, worst, tc.tol)
	}
	// Every other type on a shape whose rows fit the K-quants, and the mixes
	// llama.cpp writes. The CPU engine rounds activations to Q8_0 for Q4_1,
	// Q5_0, Q5_1 and IQ4_NL and to Q8_K for the K-quants and IQ4_XS: a few
	// percent, as the stress test bounds them (5e-2). BF16 is multiplied in
	// float on the GPU; the CPU rounds the activations to bfloat16 where it
	// has AVX512_BF16 (quant.DotBF16Pairs): 4.4e-3 on the H200's host.
	t256 := synth.Presets["test-256"]
	bf16Tol := 1e-4
	if quant.MatMulBF16Fast() {
		bf16Tol = 1e-2
	}
	for _, tc := range []struct {
		name string
		o    synth.Options
		tol  float64
	}{
		{"bf16", synth.Options{Shape: t256, Type: quant.BF16, EmbedType: quant.BF16, Seed: 3}, bf16Tol},
		{"q4_1", synth.Options{Shape: t256, Type: quant.Q4_1, EmbedType: quant.Q8_0, Seed: 3}, 5e-2},
		{"q5_0", synth.Options{Shape: t256, Type: quant.Q5_0, EmbedType: quant.Q5_0, Seed: 3}, 5e-2},
		{"q5_1", synth.Options{Shape: t256, Type: quant.Q5_1, EmbedType: quant.Q8_0, Seed: 3}, 5e-2},
		{"iq4_nl", synth.Options{Shape: t256, Type: quant.IQ4_NL, EmbedType: quant.Q8_0, Seed: 3}, 5e-2},
		{"iq4_xs", synth.Options{Shape: t256, Type: quant.IQ4_XS, EmbedType: quant.Q8_0, Seed: 3}, 5e-2},
		{"q4_k", synth.Options{Shape: t256, Type: quant.Q4_K, EmbedType: quant.Q8_0, Seed: 3}, 5e-2},
		{"q5_k", synth.Options{Shape: t256, Type: quant.Q5_K, EmbedType: quant.Q5_K, Seed: 3}, 5e-2},
		{"q6_k", synth.Options{Shape: t256, Type: quant.Q6_K, EmbedType: quant.Q6_K, Seed: 3}, 5e-2},
		{"q4_k_m-like", q4KMLike(t256, 3), 5e-2},
		{"q4_0 with a q6_k head", q4_0Like(t256, 3), 5e-2},
	} {
		worst := compareWithCPU(t, genModelWith(t, tc.o), 40, tc.tol, 9)
		t.Logf("%s: worst logits relative error over 40 steps %.3g (bound %.1g)", tc.name, worst, tc.tol)
	}
	// Wide models' shapes (tuningFor) on the small one: the FFN split in
	// two kernels, 32 units a block, QKV blocks of 8 warps, the heads'
	// outputs projected by matvec_add, the int8 activations from act_q8
	// (Q4_K_M's layers with V in Q6_K: qkv_rope's _v<type> kernels) and F16's
	// and BF16's float row from act_f32 (glu, qkv_rope_xf, logits_xf), the
	// heads on them (logits_x8, logits_xf), three head blocks an SM.
	wide := func(tu *tuning) {
		tu.ffnSplit, tu.ffn, tu.attnOBlocks, tu.attnWarpsLong = true, ffnShape{32, 2}, 8, 4
		tu.qkvWarps, tu.attnHeads, tu.act8, tu.logitsPerSM, tu.logitsWide = 8, true, true, 3, true
		tu.logitsX8, tu.qkvXF, tu.attnHeads8 = true, true, true
	}
	for _, o := range []synth.Options{q4KMLike(t256, 5), {Shape: t256, Type: quant.Q4_0, EmbedType: quant.Q8_0, Seed: 5},
		{Shape: t256, Type: quant.F16, EmbedType: quant.F16, Seed: 5}, {Shape: t256, Type: quant.BF16, EmbedType: quant.BF16, Seed: 5},
		{Shape: t256, Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 5}} {
		worst := compareWithCPU(t, genModelWith(t, o), 40, 5e-2, 9, wide)
		t.Logf("%s, wide shapes: worst logits relative error over 40 steps %.3g", o.Type, worst)
	}
	// llama-quantize's mixes whose layers pair Q and K of one type with V
	// of another (typedFamily.v), on wide shapes: four query heads a KV
	// head, as Llama 3's, where IQ4 and Q2_K give V more bits.
	gqa4 := t256
	gqa4.Heads, gqa4.KVHeads = 8, 2
	for _, name := range []string{"Q2_K", "Q3_K_M", "IQ4_XS", "IQ4_NL", "Q4_K_S", "Q5_K_M"} {
		m, _ := mix.Lookup(name)
		worst := compareWithCPU(t, genModelWith(t, mixLike(gqa4, m, 7)), 40, 5e-2, 9, wide)
		t.Logf("%s mix, wide shapes: worst logits relative error over 40 steps %.3g", name, worst)
	}
	untied := tiny
	untied.Tied = false
	// Past attSingle positions the step runs in the graphs of longer
	// contexts: here on clusters of 8 up to 144, then the split kernel.
	worst := compareWithCPU(t, genModel(t, untied, quant.Q4_0, 4), 160, 3e-2, 10, func(tu *tuning) { tu.attnMidSingle = 144 })
	t.Logf("untied Q4_0: worst %.3g over 160 steps", worst)
}

// TestDecodeRepeatable decodes the same tokens at the same positions twice:
// the residual stream's atomic sums land in another order each time, and
// the logits must still be the same bits. Then a NaN in one layer's norm
// weight must make every logit NaN and the token -1 (the poison word), and
// the step after the weight is restored must be clean again.
func TestDecodeRepeatable(t *testing.T) {
	skipWithoutGPU(t)
	// Q4_0's decode kernels multiply float activations, Q8_0's int8 ones
	// (kernels/decode.cuh, xq8), whose rounding must carry the NaN too.
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0} {
		t.Run(typ.String(), func(t *testing.T) { decodeRepeatable(t, typ) })
	}
}

func decodeRepeatable(t *testing.T, typ quant.Type) {
	m := genModel(t, synth.Presets["tiny"], typ, 7)
	ctx := context.Background()
	g, err := New(m, Options{ContextLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := rand.New(rand.NewPCG(11, 11))
	toks := make([]int32, 40)
	for i := range toks {
		toks[i] = int32(r.IntN(m.Config.VocabSize))
	}
	var first [][]float32
	for run := 0; run < 2; run++ {
		for pos, tok := range toks {
			got, err := g.Logits(ctx, tok, pos)
			if err != nil {
				t.Fatal(err)
			}
			if run == 0 {
				first = append(first, got)
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(first[pos][i]) {
					t.Fatalf("position %d: logit %d is %v, the first run's %v", pos, i, got[i], first[pos][i])
				}
			}
		}
	}
	t.Logf("%d steps: the same logits, bit for bit", len(toks))

	norm := bytesF32(m.Layers[1].FFNNorm.Data)
	bad := slices.Clone(norm)
	bad[3] = float32(math.NaN())
	if err := g.c.CopyHtoD(g.layers[1].ffnNorm, f32Bytes(bad)); err != nil {
		t.Fatal(err)
	}
	got, err := g.Logits(ctx, toks[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(got, func(v float32) bool { return v == v }); i >= 0 {
		t.Errorf("a NaN norm weight: logit %d is %v, want NaN", i, got[i])
	}
	if tok, err := g.Decode(ctx, toks[0], 0, nil); err != nil || tok != -1 {
		t.Errorf("a NaN norm weight: Decode gave %d (%v), want -1", tok, err)
	}
	if err := g.c.CopyHtoD(g.layers[1].ffnNorm, f32Bytes(norm)); err != nil {
		t.Fatal(err)
	}
	// Position 0 again: its cache rows are rewritten, nothing else is read.
	if got, err = g.Logits(ctx, toks[0], 0); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(first[0][i]) {
			t.Fatalf("after the weight is restored: logit %d is %v, want %v", i, got[i], first[0][i])
		}
	}
}

// TestDecodeRunAhead checks greedy decoding with the step after queued
// ahead (decodeGreedy) against a second engine that runs the same steps one
// at a time through Logits: first a generation loop feeding each token
// back, across the switch to the long-context graph and up to the last
// position (where nothing may be queued past the cache); then callers that
// do not take the queued step (another token, an earlier position, a
// prompt in between), whose steps must be what they would have been
// without it, bit for bit, as both engines run the same kernels.
func TestDecodeRunAhead(t *testing.T) {
	skipWithoutGPU(t)
	m := genModel(t, synth.Presets["tiny"], quant.Q4_0, 12)
	ctx := context.Background()
	const ctxLen = 160 // past attSingle: the long-context graph too
	var g, ref *Backend
	for _, e := range []**Backend{&g, &ref} {
		var err error
		if *e, err = New(m, Options{ContextLen: ctxLen}); err != nil {
			t.Fatal(err)
		}
		defer (*e).Close()
	}
	step := func(what string, tok int32, pos int) int32 {
		t.Helper()
		got, err := g.Decode(ctx, tok, pos, nil)
		if err != nil {
			t.Fatal(err)
		}
		logits, err := ref.Logits(ctx, tok, pos)
		if err != nil {
			t.Fatal(err)
		}
		if want := int32(refArgmax(logits)); got != want {
			t.Fatalf("%s: token %d at position %d gave %d, one step at a time %d", what, tok, pos, got, want)
		}
		return got
	}
	tok := int32(5)
	for pos := range ctxLen {
		tok = step("generation", tok, pos)
	}
	if g.ahead.queued {
		t.Errorf("a step is queued past the last position")
	}

	r := rand.New(rand.NewPCG(12, 12))
	vocab := m.Config.VocabSize
	pos, took := 0, 0
	for range 400 {
		what := "fed back"
		switch r.IntN(6) {
		case 0:
			what, tok = "another token", (tok+1+int32(r.IntN(vocab-1)))%int32(vocab)
		case 1:
			what, pos, tok = "an earlier position", r.IntN(pos+1), int32(r.IntN(vocab))
		case 2:
			n := 1 + r.IntN(3)
			if pos+n >= ctxLen {
				break
			}
			prompt := make([]int32, n)
			for i := range prompt {
				prompt[i] = int32(r.IntN(vocab))
			}
			got, err := g.Prefill(ctx, prompt, pos, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Prefill(ctx, prompt, pos, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("prompt of %d at %d: %d, the other engine %d", n, pos, got, want)
			}
			what, pos, tok = "after a prompt", pos+n, got
		}
		if pos >= ctxLen {
			what, pos = "an earlier position", r.IntN(ctxLen)
		}
		if what == "fed back" && g.ahead.ok {
			took++
		}
		tok = step(what, tok, pos)
		pos++
	}
	t.Logf("%d steps taken over from the queue ahead, every token as one step at a time", took)
}

// TestDebugMode runs the per-layer check against the float64 twin: a
// correct engine reports no divergence, and a corrupted weight is found in
// the layer that holds it.
func TestDebugMode(t *testing.T) {
	skipWithoutGPU(t)
	t.Setenv(debugEnv, "1")
	m := genModel(t, synth.Presets["tiny"], quant.Q8_0, 6)
	ctx := context.Background()
	g, err := New(m, Options{ContextLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	for pos := 0; pos < 8; pos++ {
		if _, err := g.Logits(ctx, int32(pos*7), pos); err != nil {
			t.Fatal(err)
		}
	}
	if g.debug.diverged != "" {
		t.Errorf("a correct engine diverged: %s", g.debug.diverged)
	}
	g.Close()

	// Scale layer 1's FFN norm on the device only: the twin keeps the original.
	g, err = New(m, Options{ContextLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	norm := bytesF32(m.Layers[1].FFNNorm.Data)
	for i := range norm {
		norm[i] *= 1.5
	}
	if err := g.c.CopyHtoD(g.layers[1].ffnNorm, f32Bytes(norm)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Logits(ctx, 3, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.debug.diverged, "layer 1") {
		t.Errorf("divergence report %q does not name layer 1", g.debug.diverged)
	}
	t.Logf("reported: %s", g.debug.diverged)
}

// stories260K finds the real test model: $GOTOK_STORIES260K, or ../shared
// beside the checkout.
func stories260K(t *testing.T) *model.Model {
	t.Helper()
	path := os.Getenv("GOTOK_STORIES260K")
	if path == "" {
		path = filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("stories260K.gguf not found (%v)", err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestStories260KGreedy decodes 200 tokens greedily from BOS on both engines:
// the tokens must be identical and the logits close.
func TestStories260KGreedy(t *testing.T) {
	skipWithoutGPU(t)
	m := stories260K(t)
	// 5e-4: the engines' f16 caches round values a few ulps of float32
	// apart, and now and then to neighbouring halves (2^-11 of the value):
	// 1e-4 seen at position 48, where f32 caches agreed to 5.8e-7. An f32
	// cache against an f16 one moves these logits by 1.8e-3 (CPU alone),
	// so the bound still tells a cache rounded otherwise.
	worst := compareWithCPU(t, m, 60, 5e-4, 1)
	t.Logf("stories260K: worst logits relative error over 60 steps %.3g", worst)

	ctx := context.Background()
	greedy := func(be backend.Backend) []int32 {
		s, err := sample.New(sample.Params{Temperature: 0})
		if err != nil {
			t.Fatal(err)
		}
		toks := []int32{1}
		for pos := 0; pos < 200; pos++ {
			next, err := be.Decode(ctx, toks[pos], pos, s)
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, next)
		}
		return toks
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
			t.Fatalf("greedy tokens differ at %d: gpu %v… cpu %v…", i, gt[i:min(i+8, len(gt))], ct[i:min(i+8, len(ct))])
		}
	}
	t.Logf("200 greedy tokens identical; %s", g.Name())
}

// TestSampledDecodeMatchesCPU checks the device's sampler chain against the
// CPU engine: the same parameters and seed give the CPU engine's tokens.
func TestSampledDecodeMatchesCPU(t *testing.T) {
	skipWithoutGPU(t)
	m := stories260K(t)
	ctx := context.Background()
	run := func(be backend.Backend) []int32 {
		s, err := sample.New(sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 42, RepeatPenalty: 1.1, PenaltyLastN: 64})
		if err != nil {
			t.Fatal(err)
		}
		toks := []int32{1}
		s.Accept(1)
		for pos := 0; pos < 100; pos++ {
			next, err := be.Decode(ctx, toks[pos], pos, s)
			if err != nil {
				t.Fatal(err)
			}
			s.Accept(next)
			toks = append(toks, next)
		}
		return toks
	}
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
	gt, ct := run(g), run(c)
	same := 0
	for same < len(ct) && gt[same] == ct[same] {
		same++
	}
	// Logits differ in the last bits, so a draw that lands on a boundary
	// between candidates may go the other way; that should be rare.
	if same < 50 {
		t.Errorf("sampled tokens diverge at %d of %d", same, len(ct))
	}
	t.Logf("sampled tokens agree for %d of %d", same, len(ct))
}

func TestErrors(t *testing.T) {
	skipWithoutGPU(t)
	m := genModel(t, synth.Presets["tiny"], quant.Q4_0, 5)
	g, err := New(m, Options{ContextLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	if _, err := g.Decode(ctx, int32(m.Config.VocabSize), 0, nil); err == nil {
		t.Error("an out-of-range token was accepted")
	}
	if _, err := g.Decode(ctx, 1, 16, nil); err == nil {
		t.Error("a position past the context was accepted")
	}
	if _, err := g.Prefill(ctx, make([]int32, 17), 0, nil); err == nil {
		t.Error("a prompt longer than the context was accepted")
	}
}

// TestDecodeSpeed measures decode on the model at $GOTOK_BENCH_MODEL: a
// file, or a synth spec (synthSpec: smollm-135m, smollm-135m:gemma3,
// llama-1b:q5_k_m). It reports tok/s
// at tg128 from an empty cache and after a 2048-token context, greedy and
// sampled on the device, kernels per token, device memory (and fails past
// weights + KV cache + workspaceBound), each kernel kind's time, and a sweep of
// launch shapes; with $GOTOK_BENCH_QUICK set, no sweep and no check against
// the CPU engine. $GOTOK_BENCH_BASELINE_PTX names directories of other
// kernels (as $GOTOK_CUDA_PTX_DIR; several joined by commas) timed first
// on the same model: an A/B in one process, without making the model
// again.
// workspaceBound is the device memory New may take past the weights and
// the KV cache: the batched prefill's scratch (43 MB at the Llama-8B
// shape's width, chunks of 512 tokens), the step's (~3 MB, the rotation
// table most of it), the kernel modules and graphs (the 8B shape took
// 66 MB in all, F16, H200), and for quantized weights the prefill's two
// buffers of f16 copies of a layer's products (dequantScratchMax each).
const workspaceBound = 80<<20 + 2*dequantScratchMax

func TestDecodeSpeed(t *testing.T) {
	m := benchModel(t)
	if dirs := os.Getenv("GOTOK_BENCH_BASELINE_PTX"); dirs != "" {
		for _, dir := range strings.Split(dirs, ",") {
			baselineDecode(t, m, dir)
		}
	}
	g, err := New(m, Options{ContextLen: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	st := g.Stats()
	t.Logf("%s", g.Name())
	budget := st.WeightBytes + st.KVBytes + workspaceBound
	t.Logf("kernels per token %d (sampled %d), graph nodes %d, weights %.1f MB + KV cache %.1f MB + %d MiB = %.1f MB; device memory taken %.1f MB",
		st.KernelsPerToken, st.SampledKernelsPerToken, st.GraphNodes, float64(st.WeightBytes)/1e6, float64(st.KVBytes)/1e6,
		workspaceBound>>20, float64(budget)/1e6, float64(st.DeviceBytes)/1e6)
	if st.DeviceBytes > budget {
		t.Errorf("device memory %d bytes exceeds weights + KV cache + %d MiB = %d", st.DeviceBytes, workspaceBound>>20, budget)
	}
	if w := g.headWindow; w != nil {
		t.Logf("output head kept in L2: %.1f MB window, hit ratio %.2f (device: up to %.1f MB persisting)",
			float64(w.Bytes)/1e6, w.HitRatio, float64(g.c.Info.MaxPersistingL2)/1e6)
	}

	quick := os.Getenv("GOTOK_BENCH_QUICK") != ""
	// 64 decode steps against the CPU engine on the real shapes first:
	// the same quantized weights; each engine rounds the activations of
	// quantized matrices to 8 bits its own way (the CPU's Q8_0 and Q8_K
	// blocks, the GPU decode kernels' int8 with a float scale, or none),
	// which is most of the difference.
	if c, err := cpu.New(m, cpu.Options{ContextLen: 64, KVType: quant.F16}); err == nil && !quick {
		ctx := context.Background()
		const bound = 5e-2
		r := rand.New(rand.NewPCG(64, 64))
		worst := 0.0
		for pos := 0; pos < 64; pos++ {
			tok := int32(r.IntN(m.Config.VocabSize))
			want, err := c.Logits(ctx, tok, pos)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Logits(ctx, tok, pos)
			if err != nil {
				t.Fatal(err)
			}
			e := relErr(got, f64s(want))
			worst = max(worst, e)
			if !(e <= bound) {
				t.Errorf("position %d: logits relative error vs CPU %.3g > %.0e", pos, e, bound)
			}
		}
		t.Logf("64 decode steps: worst logits relative error vs the CPU engine %.3g (bound %.0e)", worst, bound)
		c.Close()
	}

	run := func(start, n int) (tokPerSec float64, median time.Duration) {
		tok := int32(1)
		times := make([]time.Duration, n)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			s := time.Now()
			next, err := g.Decode(context.Background(), tok, start+i, nil)
			if err != nil {
				t.Fatal(err)
			}
			times[i] = time.Since(s)
			tok = next
		}
		total := time.Since(t0)
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		return float64(n) / total.Seconds(), times[n/2]
	}
	run(0, 32) // warm up
	for rep := 0; rep < 3; rep++ {
		tps, med := run(0, 128)
		t.Logf("tg128 @ depth 0: %.0f tok/s (median step %v)", tps, med)
	}
	run(0, 2048) // fill the cache
	for rep := 0; rep < 3; rep++ {
		tps, med := run(2048, 128)
		t.Logf("tg128 @ depth 2048: %.0f tok/s (median step %v)", tps, med)
	}
	// Sampled decoding (llama.cpp's default chain with a repeat penalty),
	// the token drawn on the device.
	sp := sample.DefaultParams()
	sp.RepeatPenalty = 1.1
	for rep := 0; rep < 3; rep++ {
		s, err := sample.New(sp)
		if err != nil {
			t.Fatal(err)
		}
		tok := int32(1)
		s.Accept(tok)
		t0 := time.Now()
		for i := 0; i < 128; i++ {
			if tok, err = g.Decode(context.Background(), tok, i, s); err != nil {
				t.Fatal(err)
			}
			s.Accept(tok)
		}
		t.Logf("tg128 @ depth 0, sampled on the device (%+v): %.0f tok/s", sp, 128/time.Since(t0).Seconds())
	}
	// Device time alone: back-to-back replays timed with events.
	start, _ := g.c.NewEvent()
	end, _ := g.c.NewEvent()
	defer g.c.DestroyEvent(start)
	defer g.c.DestroyEvent(end)
	for _, tc := range []struct {
		what    string
		kernels int
		sampled bool
	}{{"greedy", st.KernelsPerToken, false}, {"sampled", st.SampledKernelsPerToken, true}} {
		for _, depth := range []int{0, 2048} {
			kind := stepGreedy
			if tc.sampled {
				kind = stepSampled
			}
			graph := g.graphFor(depth+100, kind)
			encodeParams(g.host.Uint32s()[ioParams:], sp, 0, g.cfg.VocabSize)
			us := replayTime(t, g, graph, depth+100)
			t.Logf("%s graph replay @ depth %d: %.1f µs/token on the device (%.0f tok/s), %.2f µs per kernel",
				tc.what, depth+100, us, 1e6/us, us/float64(tc.kernels))
		}
	}
	// The chained step, as decodeGreedy runs it ahead: each replay's token
	// and position are the one before's argmax and position+1, so the
	// replays walk the positions (short contexts: 0…119 in the graph of
	// contexts up to 128).
	for _, run := range []struct{ from, n int }{{0, 120}, {2148, 200}} {
		if err := g.c.CopyHtoD(g.next, u32Bytes([]uint32{1, uint32(run.from)})); err != nil {
			t.Fatal(err)
		}
		graph := g.graphFor(run.from, stepChained)
		g.c.Record(start, g.stream)
		for i := 0; i < run.n; i++ {
			if err := graph.Launch(g.stream); err != nil {
				t.Fatal(err)
			}
		}
		g.c.Record(end, g.stream)
		if err := g.c.SyncEvent(end); err != nil {
			t.Fatal(err)
		}
		ms, _ := g.c.Elapsed(start, end)
		us := 1000 * float64(ms) / float64(run.n)
		t.Logf("chained graph replay @ positions %d…%d: %.1f µs/token on the device (%.0f tok/s)", run.from, run.from+run.n-1, us, 1e6/us)
	}
	profileStep(t, g, 100)
	profileStep(t, g, 2148)
	profileStep(t, g, 4000)
	if only := os.Getenv("GOTOK_BENCH_SWEEP"); only != "" {
		sweepShapes(t, g, strings.Split(only, ";")) // in place of the whole sweep
	} else if !quick {
		sweepShapes(t, g, nil)
	}
	if quick {
		return
	}
	sweepSingle(t, g)
}

// sweepSingle times the greedy step at positions across the context with
// the contexts run on clusters varied: up to attnSingle on clusters of
// attnCluster, then up to attnMidSingle on clusters of attnMidCluster,
// then the split kernel.
func sweepSingle(t *testing.T, g *Backend) {
	def := g.tune
	positions := []int{64, 200, 400, 600, 800, 1600}
	t.Logf("contexts on clusters (µs per token on the device at positions %v):", positions)
	var ref []float32
	tol := sweepTol(g)
	for _, v := range []struct{ single, cluster, mid, midCluster int }{
		{128, 4, 512, 8}, {128, 4, 0, 0}, {128, 4, 256, 8}, {128, 4, 1024, 8}, {128, 4, 512, 4}, {256, 8, 512, 8},
	} {
		g.tune = def
		g.tune.attnSingle, g.tune.attnCluster, g.tune.attnMidSingle, g.tune.attnMidCluster = v.single, v.cluster, v.mid, v.midCluster
		recapture(t, g)
		line := fmt.Sprintf("  ≤%d on clusters of %d, ≤%d of %d:", v.single, v.cluster, v.mid, v.midCluster)
		for _, pos := range positions {
			line += fmt.Sprintf(" %6.1f", replayTime(t, g, g.graphFor(pos, stepGreedy), pos))
		}
		t.Log(line)
		got, err := g.Logits(context.Background(), 7, 900)
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = got
		} else if e := relErr(got, f64s(ref)); !(e < tol) {
			t.Errorf("%s: logits at 900 differ from the default's by %.3g", line, e)
		}
	}
	g.tune = def
	recapture(t, g)
}

// replayTime is the device time of one replay of graph at pos, from n
// back-to-back replays between two events.
func replayTime(t *testing.T, g *Backend, graph *cu.Graph, pos int) float64 {
	start, _ := g.c.NewEvent()
	end, _ := g.c.NewEvent()
	defer g.c.DestroyEvent(start)
	defer g.c.DestroyEvent(end)
	w := g.host.Uint32s()
	w[ioToken], w[ioPos] = 1, uint32(pos)
	const n = 200
	graph.Launch(g.stream)
	g.c.Record(start, g.stream)
	for i := 0; i < n; i++ {
		if err := graph.Launch(g.stream); err != nil {
			t.Fatal(err)
		}
	}
	g.c.Record(end, g.stream)
	if err := g.c.SyncEvent(end); err != nil {
		t.Fatal(err)
	}
	ms, _ := g.c.Elapsed(start, end)
	return 1000 * float64(ms) / n
}

// sweepShapes re-captures the step with other launch shapes, one choice at
// a time, checks that each computes the default's logits and times it at
// two depths (the cache holds 2048+ positions by now); with only set, the
// default and the variants named there (GOTOK_BENCH_SWEEP: names joined by
// semicolons, since some hold commas; for a quick A/B).
func sweepShapes(t *testing.T, g *Backend, only []string) {
	type variant struct {
		name               string
		tune               tuning
		warps, logitsPerSM int
		rows, logitsRows   int
		ffn                ffnShape
		attnWarps          int
		noPDL              bool
		untyped            bool
	}
	def := g.tune
	with := func(f func(t *tuning)) tuning {
		t := def
		f(&t)
		return t
	}
	variants := []variant{
		{name: "default", tune: def},
		{name: "head not kept in L2", tune: with(func(t *tuning) { t.noL2Head = true })},
		{name: "default again", tune: def},
		{name: "attention never one split", tune: with(func(t *tuning) { t.attnSingle = 0 })},
		{name: "never one, 32 share", tune: with(func(t *tuning) { t.attnSingle, t.attnOBlocks = 0, 32 })},
		{name: "attention one split ≤ 256", tune: with(func(t *tuning) { t.attnSingle = 256 })},
		{name: "attention min chunk 64", tune: with(func(t *tuning) { t.attnMinChunk = 64 })},
		{name: "long: 32 splits", tune: with(func(t *tuning) { t.attnSplits = 32 })},
		{name: "long: 24 splits", tune: with(func(t *tuning) { t.attnSplits = 24 })},
		{name: "long: 12 splits", tune: with(func(t *tuning) { t.attnSplits = 12 })},
		{name: "attention no spin", tune: with(func(t *tuning) { t.attnNoSpin = true })},
		{name: "attention 4 blocks share", tune: with(func(t *tuning) { t.attnOBlocks = 4 })},
		{name: "attention 8 blocks share", tune: with(func(t *tuning) { t.attnOBlocks = 8 })},
		{name: "attention 32 blocks share", tune: with(func(t *tuning) { t.attnOBlocks = 32 })},
		{name: "attention 24 blocks share", tune: with(func(t *tuning) { t.attnOBlocks = 24 })},
		{name: "attention split kernel", tune: with(func(t *tuning) { t.attnCluster = 0 })},
		{name: "split kernel, 2 warps a head", tune: with(func(t *tuning) { t.attnCluster = 0 }), attnWarps: 2},
		{name: "attention clusters of 8", tune: with(func(t *tuning) { t.attnCluster = 8 })},
		{name: "attention clusters of 2", tune: with(func(t *tuning) { t.attnCluster = 2 })},
		{name: "clusters of 8, 24 blocks", tune: with(func(t *tuning) { t.attnCluster, t.attnOBlocks = 8, 24 })},
		{name: "attention 3 warps a head", tune: def, attnWarps: 3},
		{name: "attention 5 warps a head", tune: def, attnWarps: 5},
		{name: "long: 4 warps a head", tune: with(func(t *tuning) { t.attnWarpsLong = 0 })},
		{name: "long: 1 warp a head", tune: with(func(t *tuning) { t.attnWarpsLong = 1 })},
		{name: "long: 3 warps a head", tune: with(func(t *tuning) { t.attnWarpsLong = 3 })},
		{name: "attention 2 warps a head", tune: def, attnWarps: 2},
		{name: "heads projected apart", tune: with(func(t *tuning) { t.attnHeads = true })},
		{name: "heads apart when long", tune: with(func(t *tuning) { t.attnHeads, t.attnHeadsLong = false, true })},
		{name: "heads never apart", tune: with(func(t *tuning) { t.attnHeads, t.attnHeadsLong = false, false })},
		{name: "heads apart as float", tune: with(func(t *tuning) { t.attnHeads8 = false })},
		{name: "heads apart when long, float", tune: with(func(t *tuning) { t.attnHeads, t.attnHeadsLong, t.attnHeads8 = false, true, false })},
		{name: "heads apart, int8", tune: with(func(t *tuning) { t.attnHeads, t.attnHeads8 = true, true })},
		{name: "ffn fused", tune: with(func(t *tuning) { t.ffnSplit = false })},
		{name: "ffn split", tune: with(func(t *tuning) { t.ffnSplit = true })},
		{name: "ffn 16 units, 1 a warp", tune: def, ffn: ffnShape{16, 1}},
		{name: "ffn 16 units, 2 a warp", tune: def, ffn: ffnShape{16, 2}},
		{name: "ffn 32 units, 2 a warp", tune: def, ffn: ffnShape{32, 2}},
		{name: "ffn 32 units, 4 a warp", tune: def, ffn: ffnShape{32, 4}},
		{name: "qkv four rows per warp", tune: def, rows: 4},
		{name: "carveout 25%", tune: with(func(t *tuning) { t.carveout = 25 })},
		{name: "carveout 50%", tune: with(func(t *tuning) { t.carveout = 50 })},
		{name: "carveout 75%", tune: with(func(t *tuning) { t.carveout = 75 })},
		{name: "carveout 100%", tune: with(func(t *tuning) { t.carveout = 100 })},
		{name: "qkv 2 warps per block", tune: def, warps: 2},
		{name: "qkv 8 warps per block", tune: def, warps: 8},
		{name: "qkv 4 warps per block", tune: def, warps: 4},
		{name: "qkv 8 warps, 4 rows", tune: def, warps: 8, rows: 4},
		{name: "logits 2 blocks/SM", tune: def, logitsPerSM: 2},
		{name: "logits 3 blocks/SM", tune: def, logitsPerSM: 3},
		{name: "logits 4 blocks/SM", tune: def, logitsPerSM: 4},
		{name: "logits 6 blocks/SM", tune: def, logitsPerSM: 6},
		{name: "logits 8 blocks/SM", tune: def, logitsPerSM: 8},
		{name: "logits two rows, 12/SM", tune: def, logitsRows: 2, logitsPerSM: 12},
		{name: "no PDL", tune: def, noPDL: true},
		{name: "mixed kernels untyped", tune: def, untyped: true},
		{name: "activations staged", tune: with(func(t *tuning) { t.act8 = false })},
		{name: "head one group ahead", tune: with(func(t *tuning) { t.logitsWide = false })},
		{name: "head wide", tune: with(func(t *tuning) { t.logitsWide = true })},
		{name: "activations from act_q8", tune: with(func(t *tuning) { t.act8 = true })},
		{name: "post-norms apart", tune: with(func(t *tuning) { t.postApart = true })},
		{name: "head staged", tune: with(func(t *tuning) { t.logitsX8 = false })},
		{name: "qkv staged", tune: with(func(t *tuning) { t.qkvXF = false })},
		{name: "qkv on act_f32", tune: with(func(t *tuning) { t.qkvXF = true })},
		{name: "head on act_q8", tune: with(func(t *tuning) { t.logitsX8 = true })},
		{name: "attention single-split kernel", tune: with(func(t *tuning) { t.attnCluster, t.attnMidCluster = 0, 0 })},
	}
	if only != nil {
		for _, name := range only {
			if !slices.ContainsFunc(variants, func(v variant) bool { return v.name == name }) {
				t.Errorf("GOTOK_BENCH_SWEEP: no launch shape %q", name)
			}
		}
		// The default first: the others' logits are checked against it.
		variants = slices.DeleteFunc(variants, func(v variant) bool { return v.name != "default" && !slices.Contains(only, v.name) })
	}
	ctx := context.Background()
	var ref []float32
	tol := sweepTol(g)
	t.Logf("launch shapes (greedy graph, µs per token on the device):")
	for _, v := range variants {
		g.tune = v.tune
		// Lines marked persisting stay so until the room is released:
		// without a window, release it, so that they stream again.
		if err := setHeadL2(g, !v.tune.noL2Head); err != nil {
			t.Fatal(err)
		}
		ffn, ffnMix := def.ffn, def.ffnMix
		if v.ffn != (ffnShape{}) {
			ffn, ffnMix = v.ffn, v.ffn
		}
		if v.attnWarps == 0 {
			v.attnWarps = def.attnWarps
		}
		if v.warps == 0 {
			v.warps = def.qkvWarps
		}
		if v.logitsPerSM == 0 {
			v.logitsPerSM = def.logitsPerSM
		}
		l := &launcher{c: g.c, k: g.k, stream: g.stream, sms: g.c.Info.SMCount, pdl: g.c.Info.Major >= 9 && !v.noPDL, largeGemm: g.c.Info.Major >= 9, wgGemm: g.k.pre.wgGemm,
			warpsPerBlock: v.warps, logitsPerSM: v.logitsPerSM, rows: v.rows, logitsRows: v.logitsRows, ffnShape: ffn,
			ffnMixShape: ffnMix, attnWarpsPerHead: v.attnWarps, untyped: v.untyped, logitsWide: v.tune.logitsWide}
		if err := g.k.setCarveout(g.c, cmp.Or(v.tune.carveout, decodeCarveout)); err != nil {
			t.Fatal(err)
		}
		if err := g.capture(l); err != nil {
			t.Fatal(err)
		}
		// Timed first: the replays rewrite the cache rows at 100, 2148 and 4000,
		// which the check at 2100 then reads, alike for every shape.
		t100, t2148 := replayTime(t, g, g.graphFor(100, stepGreedy), 100), replayTime(t, g, g.graphFor(2148, stepGreedy), 2148)
		t4000 := replayTime(t, g, g.graphFor(4000, stepGreedy), 4000)
		got, err := g.Logits(ctx, 7, 2100)
		if err != nil {
			t.Fatal(err)
		}
		e := 0.0
		if ref == nil {
			ref = got
		} else if e = relErr(got, f64s(ref)); !(e < tol) {
			t.Errorf("%s: logits differ from the default shape's by %.3g", v.name, e)
		}
		t.Logf("  %-26s @100 %6.1f   @2148 %6.1f   @4000 %6.1f   (logits vs default %.1g)", v.name, t100, t2148, t4000, e)
	}
	g.tune = def
	if err := g.k.setCarveout(g.c, cmp.Or(def.carveout, decodeCarveout)); err != nil {
		t.Fatal(err)
	}
	recapture(t, g)
}

// sweepTol is how far the logits of another launch shape may be from the
// default's: 1e-5 (sums in another order), or 5e-2, the bound beside the
// CPU engine, where the step rounds activations to int8 (kernelSet.int8;
// the head's too): there a difference in the last bit of a layer's input
// can move a value across a rounding boundary, and the step carries it on
// (Llama-8B shape, 4 layers, Q4_K_M: up to 0.0098), and the shapes that
// take other kernels round in other places (the fused FFN, staged
// activations: 0.023). The looser bound holds for every shape of such a
// model.
func sweepTol(g *Backend) float64 {
	l := g.newLauncher(false)
	if g.k.int8[l.logitsPick(logitsArgs{res: g.res[0], w: &g.output})] {
		return 5e-2
	}
	for i := range g.layers {
		if attn, ffn, down, heads := g.layerInt8(l, i); attn || ffn || down || heads {
			return 5e-2
		}
	}
	return 1e-5
}

// recapture captures g's step again with the default launch shapes and
// g.tune.
func recapture(t *testing.T, g *Backend) {
	t.Helper()
	if err := g.capture(g.newLauncher(g.c.Info.Major >= 9)); err != nil {
		t.Fatal(err)
	}
}

// setHeadL2 sets aside L2 for g's output head window, or releases it.
func setHeadL2(g *Backend, on bool) error {
	if g.headWindow == nil {
		return nil
	}
	n := 0
	if on {
		n = g.headWindow.Bytes
	}
	_, err := g.c.SetPersistingL2(n)
	return err
}

// profileStep times each kind of kernel on its own: for every kernel name,
// a graph of the step's launches of that kernel alone (on the state the real
// steps left), replayed back to back between two events. Kernels of one kind
// then run without their neighbours' overlap, so the sum is an upper bound.
func profileStep(t *testing.T, g *Backend, pos int) {
	counts := map[string]int{}
	var order []string
	cluster := 0 // as Backend.capture chooses for pos
	if pos+1 <= g.tune.attnSingle && g.tune.attnWarpsLong > 0 {
		cluster = g.tune.attnCluster
	}
	// The launcher as Backend.capture makes it for pos's graph.
	launcherAt := func() *launcher {
		l := g.newLauncher(g.c.Info.Major >= 9)
		l.attnCluster = cluster
		if pos+1 > g.tune.attnSingle && g.tune.attnWarpsLong > 0 {
			l.attnWarpsPerHead = g.tune.attnWarpsLong
		}
		return l
	}
	l := launcherAt()
	l.keep = func(f *cu.Function) bool {
		if counts[f.Name] == 0 {
			order = append(order, f.Name)
		}
		counts[f.Name]++
		return false
	}
	if err := g.recordStep(l, stepGreedy, nil); err != nil { // only counts: nothing is launched
		t.Fatal(err)
	}
	g.c.SyncStream(g.stream)
	w := g.host.Uint32s()
	w[ioToken], w[ioPos] = 1, uint32(pos)
	total := 0.0
	t.Logf("profile at position %d, each kernel kind alone:", pos)
	for _, name := range order {
		l := launcherAt()
		l.keep = func(f *cu.Function) bool { return f.Name == name }
		us := graphMicros(t, g.c, g.stream, func() error { return g.recordStep(l, stepGreedy, nil) })
		total += us
		t.Logf("  %-16s %3d× %7.1f µs per step (%.2f µs each, with one graph launch)", name, counts[name], us, us/float64(counts[name]))
	}
	t.Logf("  sum %.1f µs", total)
}

// baselineDecode logs the greedy step's device time on m with the kernels
// in dir, for TestDecodeSpeed's A/B: kernels with every entry point this
// commit's host code loads (an older set may lack some; then compare test
// binaries instead).
func baselineDecode(t *testing.T, m *model.Model, dir string) {
	t.Helper()
	// The kernels load in New; "" is the embedded ones.
	cur := os.Getenv(ptxDirEnv)
	t.Setenv(ptxDirEnv, dir)
	g, err := New(m, Options{ContextLen: 4096})
	t.Setenv(ptxDirEnv, cur)
	if err != nil {
		t.Fatalf("baseline kernels %s: %v", dir, err)
	}
	defer g.Close()
	for _, depth := range []int{100, 2148} {
		us := replayTime(t, g, g.graphFor(depth, stepGreedy), depth)
		t.Logf("baseline %s greedy graph replay @ depth %d: %.1f µs/token on the device (%.0f tok/s)", dir, depth, us, 1e6/us)
	}
}

// graphMicros captures what record enqueues as a graph and returns the
// device µs of one replay: 50 back to back between two events, after one
// that warms up.
func graphMicros(t *testing.T, c *cu.Context, s cu.Stream, record func() error) float64 {
	t.Helper()
	graph, err := c.Capture(s, record)
	if err != nil {
		t.Fatal(err)
	}
	defer graph.Destroy()
	start, _ := c.NewEvent()
	end, _ := c.NewEvent()
	defer c.DestroyEvent(start)
	defer c.DestroyEvent(end)
	const reps = 50
	graph.Launch(s)
	c.Record(start, s)
	for range reps {
		graph.Launch(s)
	}
	c.Record(end, s)
	if err := c.SyncEvent(end); err != nil {
		t.Fatal(err)
	}
	ms, _ := c.Elapsed(start, end)
	return 1000 * float64(ms) / reps
}

// TestCheckConfig: shapes the decode kernels cannot run are refused by
// New with the reason, before anything is uploaded (no GPU needed).
func TestCheckConfig(t *testing.T) {
	ok := model.Config{Arch: "llama", NumLayers: 30, Dim: 576, NumHeads: 9, NumKVHeads: 3, HeadDim: 64, FFNDim: 1536,
		VocabSize: 49152, ContextLen: 2048, RMSEps: 1e-5, Rope: model.Rope{Dim: 64, Base: 1e5, FreqScale: 1, AttnFactor: 1}, TiedEmbeddings: true,
		Block: model.LlamaBlock(64), LayerAttn: make([]model.LayerAttention, 30)}
	if err := (&Backend{cfg: ok}).checkConfig(); err != nil {
		t.Fatalf("SmolLM-135M refused: %v", err)
	}
	// Every block feature of model.Block runs (TestArchsMatchCPU).
	all := ok
	all.Block = model.Block{NoPreNorm: true, PostNorm: true, QKNorm: model.QKNormFull, Act: model.GELUTanh, EmbedScale: 2,
		ResidualScale: 0.5, AttnScale: 0.1, LogitScale: 2, AttnSoftcap: 50, FinalSoftcap: 30, AttnTempScale: 0.1, AttnTempFloor: 8192}
	all.LayerAttn = make([]model.LayerAttention, 30)
	all.LayerAttn[3] = model.LayerAttention{Window: 512, LocalRope: true}
	all.LayerAttn[4].NoRope = true
	all.Rope.LongFactors = make([]float32, 32)
	if err := (&Backend{cfg: all}).checkConfig(); err != nil {
		t.Errorf("every block feature at once refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(c *model.Config)
		want string
	}{
		{"heads do not group", func(c *model.Config) { c.NumKVHeads = 4 }, "do not group"},
		{"head dimension", func(c *model.Config) { c.HeadDim = 66 }, "multiple of 4"},
		{"too wide to stage", func(c *model.Config) { c.Dim = 8192 }, "shared memory"},
	} {
		c := ok
		tc.edit(&c)
		err := (&Backend{cfg: c}).checkConfig()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}
