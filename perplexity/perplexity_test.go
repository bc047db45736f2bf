package perplexity

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gotok"
	"gotok/backend"
	"gotok/gguf"
	"gotok/internal/sharedtest"
	"gotok/quant"
)

// sharedDir is the project's shared/ folder with stories260K, or skips.
func sharedDir(t *testing.T) string {
	t.Helper()
	return sharedtest.Dir(t, "models/stories260K.gguf")
}

// storyText is karpathy's greedy sample of stories260K and the sampled
// story after it, from the README beside the model: text in the model's
// domain, some of it its own greedy output.
func storyText(t *testing.T, shared string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(shared, "models", "llama2c", "stories260K.README.md"))
	if err != nil {
		t.Skip(err)
	}
	var parts []string
	for _, m := range regexp.MustCompile("(?s)```\n\\$ ./run [^\n]*\n(.*?)\n```").FindAllSubmatch(data, -1) {
		parts = append(parts, string(m[1]))
	}
	if len(parts) == 0 {
		t.Fatal("no samples found in stories260K.README.md")
	}
	return strings.Join(parts, "\n")
}

func loadStories(t *testing.T, path string) *gotok.Model {
	t.Helper()
	m, err := gotok.Load(path, gotok.Options{Device: "cpu", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// referencePPL recomputes the perplexity independently: every position of
// every chunk run a token at a time from position 0, the log-softmax all
// in float64.
func referencePPL(t *testing.T, m *gotok.Model, text string, nCtx, maxChunks int) (ppl float64, count int) {
	t.Helper()
	tok := m.Tokenizer()
	tokens := tok.Encode(text, true, false)
	n := len(tokens) / nCtx
	if maxChunks > 0 {
		n = min(n, maxChunks)
	}
	be := m.Backend()
	var nll float64
	for c := 0; c < n; c++ {
		chunk := slices.Clone(tokens[c*nCtx : (c+1)*nCtx])
		if tok.AddBOS() {
			chunk[0] = tok.BOS()
		}
		for p := 0; p < nCtx-1; p++ {
			logits, err := be.Logits(context.Background(), chunk[p], p)
			if err != nil {
				t.Fatal(err)
			}
			if p < nCtx/2 {
				continue
			}
			mx := math.Inf(-1)
			for _, l := range logits {
				mx = math.Max(mx, float64(l))
			}
			var sum float64
			for _, l := range logits {
				sum += math.Exp(float64(l) - mx)
			}
			nll -= float64(logits[chunk[p+1]]) - mx - math.Log(sum)
			count++
		}
	}
	return math.Exp(nll / float64(count)), count
}

func TestRunMatchesReference(t *testing.T) {
	shared := sharedDir(t)
	m := loadStories(t, filepath.Join(shared, "models", "stories260K.gguf"))
	text := storyText(t, shared)
	const nCtx = 64
	var progress []Progress
	r, err := Run(context.Background(), m, text, Options{Context: nCtx, Progress: func(p Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	want, count := referencePPL(t, m, text, nCtx, 0)
	t.Logf("%d tokens, %d chunks, %d scored: PPL %.4f ± %.4f (reference %.4f)", r.Tokens, r.Chunks, r.Count, r.PPL, r.Uncertainty, want)
	if r.Chunks < 2 || r.Count != count || r.Count != r.Chunks*(nCtx-1-nCtx/2) {
		t.Fatalf("%d chunks, %d scored; the reference scored %d", r.Chunks, r.Count, count)
	}
	if math.Abs(r.PPL-want) > 1e-4*want {
		t.Errorf("PPL %.6f, reference %.6f", r.PPL, want)
	}
	if !(r.PPL > 1 && r.PPL < 512) || !(r.Uncertainty > 0 && r.Uncertainty < r.PPL) {
		t.Errorf("PPL %v ± %v is not plausible for a 512-token vocabulary", r.PPL, r.Uncertainty)
	}
	if len(progress) != r.Chunks || len(r.Estimates) != r.Chunks || progress[r.Chunks-1].PPL != r.PPL || r.Estimates[r.Chunks-1] != r.PPL {
		t.Errorf("progress %v, estimates %v, final %v", progress, r.Estimates, r.PPL)
	}

	// --chunks caps the chunks; the reference agrees there too.
	r2, err := Run(context.Background(), m, text, Options{Context: nCtx, Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	want2, _ := referencePPL(t, m, text, nCtx, 2)
	if r2.Chunks != 2 || math.Abs(r2.PPL-want2) > 1e-4*want2 || r2.PPL != r.Estimates[1] {
		t.Errorf("2 chunks: PPL %v, reference %v, running estimate %v", r2.PPL, want2, r.Estimates[1])
	}
}

func TestSplit(t *testing.T) {
	seq := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(100 + i)
		}
		return s
	}
	for _, c := range []struct {
		tokens, nCtx, maxChunks int
		addBOS                  bool
		chunks                  int // -1: an error
	}{
		{tokens: 7, nCtx: 4, chunks: -1}, // less than 2*n_ctx
		{tokens: 8, nCtx: 4, chunks: 2},  // exactly two chunks
		{tokens: 11, nCtx: 4, chunks: 2}, // the remainder is dropped
		{tokens: 12, nCtx: 4, chunks: 3}, //
		{tokens: 100, nCtx: 8, chunks: 12, addBOS: true},
		{tokens: 100, nCtx: 8, maxChunks: 5, chunks: 5, addBOS: true},
		{tokens: 100, nCtx: 8, maxChunks: 50, chunks: 12},
		{tokens: 100, nCtx: 3, chunks: -1}, // too small a context
		{tokens: 0, nCtx: 4, chunks: -1},
	} {
		tokens := seq(c.tokens)
		chunks, err := Split(tokens, c.nCtx, c.maxChunks, 1, c.addBOS)
		if c.chunks < 0 {
			if err == nil {
				t.Errorf("%+v: no error", c)
			}
			continue
		}
		if err != nil || len(chunks) != c.chunks {
			t.Errorf("%+v: %d chunks, %v", c, len(chunks), err)
			continue
		}
		for i, ch := range chunks {
			want := slices.Clone(tokens[i*c.nCtx : (i+1)*c.nCtx])
			if c.addBOS {
				want[0] = 1
			}
			if !slices.Equal(ch, want) {
				t.Errorf("%+v: chunk %d is %v, want %v", c, i, ch, want)
			}
		}
		if tokens[0] != 100 {
			t.Errorf("%+v: Split changed its input", c)
		}
	}
}

// writeQ8 writes a copy of the F32 model at src with its 2-D weights in
// Q8_0.
func writeQ8(t *testing.T, src, dst string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	w.CopyMetadata(&f.Metadata)
	converted := 0
	for _, ti := range f.Tensors {
		if ti.Type != quant.F32 || len(ti.Shape) != 2 || ti.Shape[0]%32 != 0 {
			w.AddTensor(ti.Name, ti.Type, ti.Shape, ti.Data)
			continue
		}
		x := make([]float32, ti.Elements())
		if err := quant.Dequantize(ti.Type, ti.Data, x); err != nil {
			t.Fatal(err)
		}
		size, err := quant.Q8_0.RowBytes(ti.Elements())
		if err != nil {
			t.Fatal(err)
		}
		q := make([]byte, size)
		if err := quant.Quantize(quant.Q8_0, x, q); err != nil {
			t.Fatal(err)
		}
		w.AddTensor(ti.Name, quant.Q8_0, ti.Shape, q)
		converted++
	}
	if converted == 0 {
		t.Fatal("no tensor converted to Q8_0")
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

func TestKLDivergence(t *testing.T) {
	shared := sharedDir(t)
	path := filepath.Join(shared, "models", "stories260K.gguf")
	m := loadStories(t, path)
	text := storyText(t, shared)
	const nCtx = 64
	var base bytes.Buffer
	r, err := Run(context.Background(), m, text, Options{Context: nCtx, Base: &base})
	if err != nil {
		t.Fatal(err)
	}
	// Header, tokens, and one row per scored position.
	vocab := m.Config().VocabSize
	if want := 8 + 12 + 4*r.Chunks*nCtx + 2*r.Count*baseRowLen(vocab); base.Len() != want {
		t.Fatalf("base file of %d bytes, want %d", base.Len(), want)
	}
	baseBytes := slices.Clone(base.Bytes())

	// Against itself: no divergence, the same top token everywhere, the
	// same perplexity (up to the 16-bit storage of the base).
	self, err := KLDivergence(context.Background(), m, bytes.NewReader(baseBytes), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := self.Stats
	kld, _ := s.KLD()
	ppl, _ := s.PPL()
	basePPL, _ := s.BasePPL()
	ratio, _ := s.PPLRatio()
	t.Logf("self: KLD %.3g, same top %d/%d, PPL %.4f, base %.4f", kld, s.SameTop, s.Count, ppl, basePPL)
	if s.Count != r.Count || self.Chunks != r.Chunks || self.Context != nCtx {
		t.Errorf("compared %d positions in %d chunks of %d, want %d in %d of %d", s.Count, self.Chunks, self.Context, r.Count, r.Chunks, nCtx)
	}
	if math.Abs(kld) > 1e-4 || s.SameTop != s.Count {
		t.Errorf("against itself: KLD %g, same top %d of %d", kld, s.SameTop, s.Count)
	}
	if math.Abs(ppl-r.PPL) > 1e-4*r.PPL || math.Abs(basePPL-r.PPL) > 1e-3*r.PPL || math.Abs(ratio-1) > 1e-3 {
		t.Errorf("PPL %v, base %v, ratio %v; Run gave %v", ppl, basePPL, ratio, r.PPL)
	}

	// Against a Q8_0 copy: a small, real divergence.
	q8 := filepath.Join(t.TempDir(), "stories-q8_0.gguf")
	writeQ8(t, path, q8)
	mq := loadStories(t, q8)
	other, err := KLDivergence(context.Background(), mq, bytes.NewReader(baseBytes), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s = other.Stats
	kld, kldErr := s.KLD()
	top, _ := s.SameTopFraction()
	ratio, _ = s.PPLRatio()
	t.Logf("Q8_0: KLD %.3g ± %.2g, same top %.2f%%, PPL ratio %.5f, median KLD %.3g, max %.3g",
		kld, kldErr, 100*top, ratio, s.KLDPercentile(0.5), s.KLDPercentile(1))
	if !(kld > 1e-7) || math.IsInf(kld, 0) || kld > 0.1 {
		t.Errorf("Q8_0 against F32: KLD %g, want small and positive", kld)
	}
	if !(ratio > 0.9 && ratio < 1.1) || top < 0.8 {
		t.Errorf("Q8_0 against F32: PPL ratio %v, same top %v", ratio, top)
	}
}

func TestErrors(t *testing.T) {
	shared := sharedDir(t)
	m := loadStories(t, filepath.Join(shared, "models", "stories260K.gguf"))
	text := storyText(t, shared)
	ctx := context.Background()
	n := len(m.Tokenizer().Encode(text, true, false))

	check := func(name string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, want)
		}
	}
	_, err := Run(ctx, m, "Once upon a time", Options{Context: 64})
	check("short text", err, "you need at least 128 tokens")
	_, err = Run(ctx, m, text, Options{Context: n/2 + 1})
	check("text just short of two chunks", err, "tokenizes to only")
	_, err = Run(ctx, m, text, Options{Context: m.Config().ContextLen * 2})
	check("context beyond training", err, "exceeds the")
	_, err = Run(ctx, m, text, Options{Context: 2})
	check("tiny context", err, "too small")

	var base bytes.Buffer
	if _, err := Run(ctx, m, text, Options{Context: 32, Chunks: 2, Base: &base}); err != nil {
		t.Fatal(err)
	}
	good := base.Bytes()
	_, err = KLDivergence(ctx, m, strings.NewReader("not a base file at all"), Options{})
	check("not a base file", err, "does not look like")
	_, err = KLDivergence(ctx, m, bytes.NewReader(good[:len(good)-10]), Options{})
	check("truncated base file", err, "reading the base file's log-probabilities")
	_, err = KLDivergence(ctx, m, bytes.NewReader(good[:30]), Options{})
	check("truncated tokens", err, "reading the base file's tokens")
	bad := slices.Clone(good)
	bad[12]++ // n_vocab
	_, err = KLDivergence(ctx, m, bytes.NewReader(bad), Options{})
	check("other vocabulary", err, "vocabulary")
	bad = slices.Clone(good)
	bad[16] = 0 // n_chunk
	_, err = KLDivergence(ctx, m, bytes.NewReader(bad), Options{})
	check("no chunks", err, "header is not valid")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Run(cctx, m, text, Options{Context: 32})
	if err == nil {
		t.Error("a cancelled run returned no error")
	}
}

// TestScoreChunkPaths scores one chunk through the CPU engine's every-
// token logits (backend.AllLogits, in pieces of scorePiece) and through a
// backend without them (a token at a time): the same positions, the same
// logits up to summation order.
func TestScoreChunkPaths(t *testing.T) {
	shared := sharedDir(t)
	// An f32 KV cache, for the bound below: on the f16 cache the two
	// paths' K and V round to neighbouring float16 values now and then
	// (backend/cpu's TestPrefillMatchesTokenByToken bounds that).
	m, err := gotok.Load(filepath.Join(shared, "models", "stories260K.gguf"), gotok.Options{Device: "cpu", Threads: 2, KVType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	be := m.Backend()
	if _, ok := be.(backend.AllLogits); !ok {
		t.Fatalf("the CPU backend %T does not give every token's logits", be)
	}
	tokens := m.Tokenizer().Encode(storyText(t, shared), true, false)
	chunk := tokens[:2*scorePiece+40] // two pieces and a part
	vocab := m.Config().VocabSize
	collect := func(be backend.Backend) map[int][]float32 {
		got := map[int][]float32{}
		sc := &chunkScorer{be: be, vocab: vocab}
		err := sc.score(context.Background(), chunk, func(p int, logits []float32) error {
			got[p] = slices.Clone(logits)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	batched := collect(be)
	single := collect(struct{ backend.Backend }{be}) // ForwardAll hidden
	if want := len(chunk) - 1 - len(chunk)/2; len(batched) != want || len(single) != want {
		t.Fatalf("%d positions batched, %d a token at a time; want %d", len(batched), len(single), want)
	}
	for p, s := range single {
		b := batched[p]
		for i := range s {
			if d := math.Abs(float64(b[i] - s[i])); d > 1e-4*(1+math.Abs(float64(s[i]))) {
				t.Fatalf("position %d, logit %d: %v batched, %v a token at a time", p, i, b[i], s[i])
			}
		}
	}
}
