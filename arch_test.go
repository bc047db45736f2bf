package gotok

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"gotok/backend/cuda/cu"
	"gotok/gguf"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/tokenizer"
)

// archGolden is one line of ../shared/models/arch/golden.jsonl: llama.cpp's
// greedy continuation of prompt by model, as llama-completion printed it.
type archGolden struct {
	Model    string `json:"model"`
	Prompt   string `json:"prompt"`
	NPredict int    `json:"n_predict"`
	OutB64   string `json:"out_b64"`
}

// readArchGolden reads dir/golden.jsonl and, unless -short,
// testdata/arch_more_golden.jsonl (other prompts on the same files, from
// scripts/arch-synth-golden.sh).
func readArchGolden(t *testing.T, dir string) []archGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "golden.jsonl"))
	if err != nil {
		t.Skip(err)
	}
	if !testing.Short() {
		more, err := os.ReadFile(filepath.Join("testdata", "arch_more_golden.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		data = append(append(data, '\n'), more...)
	}
	var gs []archGolden
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var g archGolden
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatalf("golden.jsonl: %v", err)
		}
		gs = append(gs, g)
	}
	return gs
}

// TestArchGolden reproduces llama.cpp's greedy continuations of the tiny
// models of real architectures on the CPU and (where there is one) on the
// GPU: byte for byte, or up to a step where the two engines' choices are
// within rounding of a tie (tieMargin), after which the texts may part.
// llama.cpp multiplies these f16 weights by activations rounded to f16, so
// its logits carry relative errors near 1e-3; "def add(a, b):" on
// llama.gguf meets such a tie at its third token (margin 0.008 on logits
// near 14.6).
func TestArchGolden(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "models", "arch")
	golden := readArchGolden(t, dir)
	for _, device := range []string{"cpu", "cuda"} {
		t.Run(device, func(t *testing.T) {
			if device == "cuda" {
				if err := cu.Available(); err != nil {
					t.Skipf("no CUDA here: %v", err)
				}
			}
			models := map[string]*Model{}
			defer func() {
				for _, m := range models {
					if m != nil {
						m.Close()
					}
				}
			}()
			for _, g := range golden {
				m, ok := models[g.Model]
				if _, err := os.Stat(filepath.Join(dir, g.Model)); !ok && err != nil {
					t.Logf("%s: not here (%v)", g.Model, err)
					models[g.Model] = nil
					continue
				}
				if !ok {
					var err error
					m, err = Load(filepath.Join(dir, g.Model), Options{Device: device, ContextLen: 256})
					if err != nil {
						t.Fatalf("%s: %v", g.Model, err)
					}
					models[g.Model] = m
				}
				if m == nil {
					continue
				}
				checkGolden(t, m, g)
			}
		})
	}
}

// checkGolden compares gotok's greedy continuation with llama.cpp's.
func checkGolden(t *testing.T, m *Model, g archGolden) {
	t.Helper()
	out, err := base64.StdEncoding.DecodeString(g.OutB64)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		// llama-completion printed nothing: llama.cpp refused the file
		// (olmo2.gguf has tied embeddings, and llama.cpp's OLMo 2 graph
		// requires output.weight). There is nothing to compare here;
		// TestArchSynthGolden compares an untied OLMo 2.
		t.Logf("%s %q: llama.cpp gave no continuation (it refuses this file); not compared", g.Model, g.Prompt)
		return
	}
	// llama-completion ends its output with a blank line, and prints the
	// bytes of the tokens as they are (control tokens as nothing); gotok's
	// text is valid UTF-8, each byte of an invalid sequence one U+FFFD
	// (tokenizer.Decoder).
	raw := strings.TrimSuffix(string(out), "\n\n")
	want := replaceInvalidUTF8(raw)
	var sb strings.Builder
	_, err = m.Generate(context.Background(), g.Prompt, GenerateOptions{MaxTokens: g.NPredict},
		func(s string) error { sb.WriteString(s); return nil })
	if err != nil {
		t.Fatalf("%s %q: %v", g.Model, g.Prompt, err)
	}
	if got := sb.String(); got != want {
		checkNearTie(t, m, g, got, raw) // token pieces are raw bytes
	}
}

// TestArchSynthGolden reproduces llama.cpp's greedy continuations
// (testdata/arch_synth_golden.jsonl, written by
// scripts/arch-synth-golden.sh) on tiny synthetic models of each family,
// F32 weights with the SmolLM2 tokenizer, that the test writes again from
// the same seed: the families ../shared/models/arch lacks (Qwen2, Gemma 2,
// Phi-3 with LongRoPE, SmolLM3, Ministral 3 with temperature tuning), an
// OLMo 2 llama.cpp loads, and Gemma 3 with global layers. Byte for byte, or to a near-tie (checkNearTie), on
// the CPU and the GPU.
func TestArchSynthGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "arch_synth_golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(sharedDir(t), "tokenizer-tests", "smollm2-135m-instruct", "tokenizer.json")
	tokJSON, err := os.ReadFile(tokPath)
	if err != nil {
		t.Skip(err)
	}
	vocab, err := tokenizer.ImportHF(tokJSON)
	if err != nil {
		t.Fatal(err)
	}
	for _, device := range []string{"cpu", "cuda"} {
		t.Run(device, func(t *testing.T) {
			if device == "cuda" {
				if err := cu.Available(); err != nil {
					t.Skipf("no CUDA here: %v", err)
				}
			}
			checkSynthGolden(t, data, vocab, device)
		})
	}
}

// checkSynthGolden runs TestArchSynthGolden's lines on one device.
func checkSynthGolden(t *testing.T, data []byte, vocab *tokenizer.Vocab, device string) {
	models := map[string]*Model{}
	defer func() {
		for _, m := range models {
			m.Close()
		}
	}()
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var g archGolden
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatalf("arch_synth_golden.jsonl: %v", err)
		}
		m, ok := models[g.Model]
		if !ok {
			// As `gotok gen --preset tiny --layers 4 --arch A --type f32
			// --tokenizer …`.
			shape := synth.Presets["tiny"]
			shape.Arch, shape.Layers = g.Model, 4
			w, err := synth.Generate(synth.Options{Shape: shape, Name: "tiny", Type: quant.F32, EmbedType: quant.F32, Seed: 1,
				Tokenizer: func(w *gguf.Writer) (int, error) { vocab.SetMetadata(w); return len(vocab.Tokens), nil }})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), g.Model+".gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			if m, err = Load(path, Options{Device: device, ContextLen: 256}); err != nil {
				t.Fatalf("%s: %v", g.Model, err)
			}
			models[g.Model] = m
		}
		checkGolden(t, m, g)
	}
}

// tieMargin bounds, relative to the largest logit, the gap between two
// engines' choices that rounding alone explains.
const tieMargin = 2e-3

// checkNearTie replays a greedy continuation that differs from llama.cpp's
// want, step by step with the full logits, to the first token whose text
// leaves want. There llama.cpp chose another token whose text continues
// want: the test passes when that token's logit is within tieMargin of the
// one gotok chose, and fails otherwise.
func checkNearTie(t *testing.T, m *Model, g archGolden, got, want string) {
	t.Helper()
	ctx := context.Background()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s %q: differs from llama.cpp after %d bytes: %s\n got %q\nwant %q", g.Model, g.Prompt,
			commonPrefixString(got, want), fmt.Sprintf(format, args...), got, want)
	}
	prompt := m.PromptTokens(g.Prompt, GenerateOptions{})
	b := m.Backend()
	n := len(prompt)
	if n > 1 {
		if _, err := b.Prefill(ctx, prompt[:n-1], 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	logits, err := b.Logits(ctx, prompt[n-1], n-1)
	if err != nil {
		t.Fatal(err)
	}
	rest := want
	for step := 0; step < g.NPredict; step++ {
		best := argmax(logits)
		piece := m.tok.OutputPiece(best, false)
		if piece != "" && strings.HasPrefix(rest, piece) {
			rest = rest[len(piece):]
			if logits, err = b.Logits(ctx, best, n+step); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// llama.cpp's token: the likeliest whose text continues want.
		theirs, top := int32(-1), math.Inf(-1)
		for id, l := range logits {
			if p := m.tok.OutputPiece(int32(id), false); p != "" && strings.HasPrefix(rest, p) && float64(l) > top {
				theirs, top = int32(id), float64(l)
			}
		}
		gap, scale := float64(logits[best])-top, math.Abs(float64(logits[best]))
		if piece == "" && !m.tok.IsEOG(best) && (theirs < 0 || gap > tieMargin*scale) {
			// A control token prints nothing, in llama-completion as in
			// Generate; no text token comes near it, so llama.cpp took
			// it too.
			if logits, err = b.Logits(ctx, best, n+step); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if theirs < 0 {
			fail("at step %d no token continues llama.cpp's text", step)
			return
		}
		if gap > tieMargin*scale {
			fail("at step %d gotok chose %q (logit %.5f), llama.cpp %q (%.5f)", step, piece, logits[best], m.tok.Piece(theirs), top)
			return
		}
		t.Logf("%s %q: near-tie at step %d: gotok %q %.5f, llama.cpp %q %.5f (gap %.2g of %.3g)", g.Model, g.Prompt, step,
			piece, logits[best], m.tok.Piece(theirs), top, gap, scale)
		return
	}
	fail("the step-by-step replay did not reproduce Generate's text")
}

// replaceInvalidUTF8 replaces each byte of s that is not part of a valid
// UTF-8 sequence with U+FFFD.
func replaceInvalidUTF8(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n <= 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
