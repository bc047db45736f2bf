package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestAddSpecialDefaults(t *testing.T) {
	text := "the fox"
	for _, c := range []struct {
		pre      string
		set      map[string]any // add_bos_token is absent unless set here
		bos, eos bool
	}{
		{pre: "gpt-2"},                // llama.cpp: no BOS for GPT-2-style files
		{pre: "llama-bpe", bos: true}, // the Llama 3 family defaults to BOS
		{pre: "smollm", set: map[string]any{KeyAddBOS: true, KeyAddEOS: true}, bos: true, eos: true},
		{pre: "llama-bpe", set: map[string]any{KeyAddBOS: false}},
	} {
		v := testVocab(c.pre)
		tok, err := FromGGUF(editedMetadata(t, v, KeyAddBOS, c.set))
		if err != nil {
			t.Fatal(err)
		}
		want := tok.Encode(text, false, false)
		if c.bos {
			want = append([]int32{v.BOS}, want...)
		}
		if c.eos {
			want = append(want, v.EOS)
		}
		if got := tok.Encode(text, true, false); !slices.Equal(got, want) || tok.AddBOS() != c.bos || tok.AddEOS() != c.eos {
			t.Errorf("pre %s %v: Encode(addSpecial) = %v, want %v", c.pre, c.set, got, want)
		}
	}
}

func TestLlamaCppVocabSpecials(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "tokenizer-tests")

	gpt2 := loadGGUFTokenizer(t, filepath.Join(dir, "ggml-vocab-gpt-2.gguf"))
	if gpt2.Model() != "gpt2" || gpt2.Pre() != "gpt-2" || gpt2.AddBOS() || gpt2.BOS() != 50256 || !gpt2.IsEOG(50256) || gpt2.IsEOG(11) {
		t.Errorf("gpt-2: model %s pre %s AddBOS %v BOS %d EOG %v", gpt2.Model(), gpt2.Pre(), gpt2.AddBOS(), gpt2.BOS(), gpt2.EOG())
	}
	if got := gpt2.Encode("<|endoftext|>", false, true); !slices.Equal(got, []int32{50256}) {
		t.Errorf("gpt-2 parses <|endoftext|> as %v", got)
	}

	spm := loadGGUFTokenizer(t, filepath.Join(dir, "ggml-vocab-llama-spm.gguf"))
	if got := spm.Encode("Hello world", true, false); !slices.Equal(got, []int32{1, 15043, 3186}) {
		t.Errorf("llama-spm Encode(addSpecial) = %v", got)
	}
	if !slices.Equal(spm.EOG(), []int32{2}) || spm.EOT() != -1 {
		t.Errorf("llama-spm EOG %v EOT %d", spm.EOG(), spm.EOT())
	}

	// Phi-3: <|end|> ends generation, and its special tokens eat the
	// whitespace after them (llama.cpp keys that on general.name).
	phi3 := loadGGUFTokenizer(t, filepath.Join(dir, "ggml-vocab-phi-3.gguf"))
	end, user := phi3.ids["<|end|>"], phi3.ids["<|user|>"]
	if !phi3.IsEOG(end) || !phi3.IsEOG(32000) || phi3.EOT() != end {
		t.Errorf("phi-3 EOG %v EOT %d", phi3.EOG(), phi3.EOT())
	}
	got := phi3.Encode("<|user|>\nHi<|end|>\n", true, true)
	// The newline after <|user|> is stripped; the text after a special token
	// gets the dummy space prefix: ▁Hi.
	want := []int32{1, user, phi3.ids["▁Hi"], end}
	if !slices.Equal(got, want) {
		t.Errorf("phi-3 chat: %v, want %v", got, want)
	}
	if phi3.attrs[phi3.ids["<s>"]]&attrRStrip != 0 || phi3.attrs[phi3.ids["</s>"]]&attrRStrip == 0 {
		t.Error("phi-3 rstrip attributes")
	}
	if s := phi3.Special(); !slices.Contains(s, end) || slices.Contains(s, phi3.ids["▁Hi"]) {
		t.Errorf("phi-3 Special() = %v", s)
	}
}

func TestEncodeConcurrent(t *testing.T) {
	tok := mustTokenizer(t, testVocab("smollm"))
	text := strings.Repeat("the quick brown fox 123 <|im_end|> ", 50)
	want := tok.Encode(text, true, true)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got := tok.Encode(text, true, true); !slices.Equal(got, want) {
					t.Error("concurrent Encode differs")
					return
				}
			}
		})
	}
	wg.Wait()
}

// Every pre-tokenizer keeps byte-level BPE lossless (up to llama.cpp's
// U+FFFD for invalid UTF-8) on any input.
func TestEveryPreTokenizerRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, pre := range []string{"default", "gpt-2", "smollm", "starcoder", "refact", "llama-bpe", "qwen2",
		"deepseek-llm", "deepseek-coder", "falcon", "mpt", "olmo", "phi-2", "stablelm2"} {
		tok := mustTokenizer(t, testVocab(pre))
		for range 300 {
			text := randomText(rng, 60, true)
			for _, parse := range []bool{false, true} {
				if got := tok.Decode(tok.Encode(text, false, parse)); got != normalizeUTF8(text) {
					t.Fatalf("%s: Decode(Encode(%q, parseSpecial=%v)) = %q", pre, text, parse, got)
				}
			}
		}
	}
}
