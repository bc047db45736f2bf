package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gotok/model/synth"
	"gotok/quant"
)

// TestArchsMatchCPU runs a small model of every family synth writes
// (Qwen2's biases, Qwen3's and Gemma 3's per-head Q/K norms, OLMo 2's
// post-norms without pre-norms and whole-projection Q/K norms, Granite's
// multipliers, Gemma 2's soft-caps, sliding windows and per-layer RoPE,
// Phi-3's LongRoPE, SmolLM3's layers without RoPE, Ministral 3's attention
// temperature, Mistral's window) on the GPU against the CPU engine: decode
// logits for 70 steps (past every window and LongRoPE's 32-position
// switch), and the batched prefill against the decode steps; then Phi-3
// and Gemma 3 with their real head dimensions (96, 256).
func TestArchsMatchCPU(t *testing.T) {
	skipWithoutGPU(t)
	r := rand.New(rand.NewPCG(31, 31))
	var shapes []synth.Shape
	var archs []string
	for a := range synth.Archs {
		archs = append(archs, a)
	}
	slices.Sort(archs)
	for _, arch := range archs {
		shape := synth.Presets["tiny"]
		shape.Arch, shape.Layers = arch, 4
		shapes = append(shapes, shape)
	}
	// The head dimensions of real Phi-3 (96) and Gemma 3 (256) files.
	shapes = append(shapes,
		synth.Shape{Arch: "phi3", Layers: 2, Dim: 192, Heads: 2, KVHeads: 2, HeadDim: 96, FFN: 256, Vocab: 320, Context: 256, RopeBase: 10000},
		synth.Shape{Arch: "gemma3", Layers: 2, Dim: 128, Heads: 2, KVHeads: 1, HeadDim: 256, FFN: 256, Vocab: 320, Context: 256, RopeBase: 10000, Tied: true})
	for _, shape := range shapes {
		arch := shape.Arch
		// F16 is multiplied in float on both engines; Q8_0 with
		// activations rounded to 8 bits, by each engine its own way (the
		// CPU every product's, the GPU's decode kernels those of QKV, the
		// FFN's gate and up and the head): up to 0.052 here (H200), where
		// the CPU's rounding alone gave 0.044. Ministral 3's attention temperature multiplies the
		// queries by up to 2.1 here (1 + 0.5·ln(70/8 + 1)), sharpening
		// the softmax and the rounding's effect with it: at position 30
		// (×1.78) the engines' Q8_0 logits part by 0.056 (H200), where
		// F16's agree to 3e-6.
		q8Tol := 6e-2
		if arch == "mistral3" {
			q8Tol = 8e-2
		}
		for _, tc := range []struct {
			typ quant.Type
			tol float64
		}{{quant.F16, 1e-3}, {quant.Q8_0, q8Tol}} {
			t.Run(fmt.Sprintf("%s/hd%d/%s", arch, shape.HeadDim, tc.typ), func(t *testing.T) {
				m := genModelWith(t, synth.Options{Shape: shape, Type: tc.typ, EmbedType: tc.typ, Seed: 11})
				worst := compareWithCPU(t, m, 70, tc.tol, 12)
				t.Logf("worst logits relative error over 70 steps %.3g (bound %.1g)", worst, tc.tol)
				g, err := New(m, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				if g.pre == nil {
					t.Fatalf("no batched prefill: %s", g.prefillUnsupported())
				}
				for _, n := range []int{7, 100} {
					prefillVsSteps(t, g, randPrompt(r, n, m.Config.VocabSize), nil, int32(r.IntN(m.Config.VocabSize)))
				}
				prefillVsSteps(t, g, randPrompt(r, 60, m.Config.VocabSize), []int{20, 21}, 5)
			})
		}
	}
}

// TestPostNormsInActQ8 checks the post-normed families, whose branches
// join the stream in act_q8_post on the wide models' shapes (act_q8; the
// FFN split, or fused, where it stages and the attention's branch joins in
// postnorm's kernel: recordStep), against the CPU engine on a model whose
// rows fit the K-quants, and against the same step with the post-norms in
// postnorm's kernel, which must give the same bits: act_q8_post computes
// what postnorm and act_q8 did, in the same order.
func TestPostNormsInActQ8(t *testing.T) {
	skipWithoutGPU(t)
	for _, split := range []bool{true, false} {
		wide := func(tu *tuning) {
			tu.ffnSplit, tu.ffn, tu.attnOBlocks, tu.attnWarpsLong = split, ffnShape{32, 2}, 8, 4
			tu.qkvWarps, tu.act8, tu.logitsPerSM, tu.logitsWide = 8, true, 3, true
		}
		testPostNormsInActQ8(t, split, wide)
	}
}

func testPostNormsInActQ8(t *testing.T, split bool, wide func(*tuning)) {
	for _, arch := range []string{"gemma2", "gemma3", "olmo2"} {
		shape := synth.Presets["test-256"]
		shape.Arch, shape.Layers = arch, 4
		for _, o := range []synth.Options{q4KMLike(shape, 7), {Shape: shape, Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 7},
			{Shape: shape, Type: quant.Q4_0, EmbedType: quant.Q8_0, Seed: 7}} {
			t.Run(fmt.Sprintf("%s/%s/split=%v", arch, o.Type, split), func(t *testing.T) {
				m := genModelWith(t, o)
				worst := compareWithCPU(t, m, 40, 6e-2, 13, wide)
				t.Logf("worst logits relative error over 40 steps %.3g", worst)
				g, err := New(m, Options{ContextLen: 256})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				wide(&g.tune)
				steps := func() [][]float32 {
					recapture(t, g)
					r := rand.New(rand.NewPCG(5, 5))
					var out [][]float32
					for pos := 0; pos < 140; pos++ { // past attSingle: the split kernel too
						got, err := g.Logits(context.Background(), int32(r.IntN(m.Config.VocabSize)), pos)
						if err != nil {
							t.Fatal(err)
						}
						out = append(out, got)
					}
					return out
				}
				within := steps()
				g.tune.postApart = true
				apart := steps()
				for pos := range within {
					if !sameBits(within[pos], apart[pos]) {
						t.Fatalf("position %d: the logits with the post-norms in act_q8_post differ from those with postnorm's kernel (relative %.3g)",
							pos, relErr(within[pos], f64s(apart[pos])))
					}
				}
			})
		}
	}
}
