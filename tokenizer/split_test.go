package tokenizer

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// piecesOf returns the pieces the steps split text into.
func piecesOf(text string, steps []splitStep) []string {
	var out []string
	start := 0
	for _, end := range splitPieces(text, steps) {
		out = append(out, text[start:end])
		start = end
	}
	return out
}

func mustRegexpStep(t *testing.T, pattern string) splitStep {
	t.Helper()
	step, err := regexpStep(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return step
}

func TestSplitExamples(t *testing.T) {
	for _, c := range []struct {
		steps []splitStep
		text  string
		want  []string
	}{
		{[]splitStep{splitGPT2}, "Hello world's  x", []string{"Hello", " world", "'s", " ", " x"}},
		{[]splitStep{splitGPT2}, "a\t\tb  ", []string{"a", "\t", "\t", "b", "  "}},
		{[]splitStep{splitGPT2}, "x 123!? 'LL", []string{"x", " 123", "!?", " '", "LL"}},
		{[]splitStep{splitNumbers, splitGPT2}, "a 123", []string{"a", " ", "1", "2", "3"}},
		{[]splitStep{llama3Step}, "I'LL pay 1234567 now!\n\n  ok", []string{"I", "'LL", " pay", " ", "123", "456", "7", " now", "!\n\n", " ", " ok"}},
		{[]splitStep{qwen2Step}, "x=12\r\n", []string{"x", "=", "1", "2", "\r\n"}},
		{[]splitStep{llama3Step}, "end  \n  ", []string{"end", "  \n", "  "}},
	} {
		if got := piecesOf(c.text, c.steps); !slices.Equal(got, c.want) {
			t.Errorf("split %q = %q, want %q", c.text, got, c.want)
		}
	}
}

// The hand-written splitters must split exactly as llama.cpp's regexes do.
func TestSplitMatchesRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name     string
		fast     []splitStep
		patterns []string
	}{
		{"gpt2", []splitStep{splitGPT2}, []string{regexGPT2}},
		{"llama3", []splitStep{llama3Step}, []string{regexLlama3}},
		{"qwen2", []splitStep{qwen2Step}, []string{regexQwen2}},
		{"numbers", []splitStep{splitNumbers}, []string{regexNumber}},
		{"starcoder", []splitStep{splitNumbers, splitGPT2}, []string{regexNumber, regexGPT2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ref []splitStep
			for _, p := range c.patterns {
				ref = append(ref, mustRegexpStep(t, p))
			}
			n := 3000
			if testing.Short() {
				n = 500
			}
			for range n {
				text := normalizeUTF8(randomText(rng, 60, true))
				got, want := piecesOf(text, c.fast), piecesOf(text, ref)
				if !slices.Equal(got, want) {
					t.Fatalf("split %q\n got %q\nwant %q", text, got, want)
				}
			}
		})
	}
}

// Splitting must respect the piece a previous step produced: a piece's end is
// the end of the text for lookahead.
func TestSplitWithinPiece(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ref := mustRegexpStep(t, regexLlama3)
	for range 1000 {
		text := normalizeUTF8(randomText(rng, 40, true))
		runes, offs := decodeRunes(text)
		if len(runes) == 0 {
			continue
		}
		i := rng.IntN(len(runes))
		j := i + 1 + rng.IntN(len(runes)-i)
		start, end := offs[i], offs[j]
		got := llama3Step(text, start, end, nil)
		want := ref(text, start, end, nil)
		if !slices.Equal(got, want) || got[len(got)-1] != end {
			t.Fatalf("split %q [%d:%d] = %v, want %v", text, start, end, got, want)
		}
	}
}

func TestPreTokenizerNames(t *testing.T) {
	for _, name := range []string{"default", "gpt-2", "smollm", "starcoder", "refact", "llama3", "llama-bpe",
		"qwen2", "deepseek-llm", "deepseek-coder", "falcon", "mpt", "olmo", "gpt-neox", "phi-2", "stablelm2", "dbrx"} {
		p, err := newPreTokenizer(name)
		if err != nil || len(p.steps) == 0 {
			t.Errorf("newPreTokenizer(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := newPreTokenizer("no-such-pre"); err == nil {
		t.Error("unknown pre-tokenizer name accepted")
	}
}

// The regexp2-driven pre-tokenizers split as their llama.cpp regex lists say.
func TestRegexpPreTokenizers(t *testing.T) {
	for _, c := range []struct {
		pre  string
		text string
		want []string
	}{
		{"default", "Hi, you 12345!!", []string{"Hi", ",", " you", " ", "123", "45", "!!"}},
		{"falcon", "a+b=1234", []string{"a", "+", "b", "=", "123", "4"}},
		{"deepseek-coder", "def f(x):\n  return 12", []string{"def", " f", "(", "x", "):", "\n", " ", " return", " ", "1", "2"}},
		{"deepseek-llm", "Hello, 世界 123 \n", []string{"Hello", ",", " ", "世界", " ", "123", " ", "\n"}},
	} {
		p, err := newPreTokenizer(c.pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := piecesOf(c.text, p.steps); !slices.Equal(got, c.want) {
			t.Errorf("%s: split %q = %q, want %q", c.pre, c.text, got, c.want)
		}
	}
}
