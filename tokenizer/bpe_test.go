package tokenizer

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// naiveBPE merges the way the BPE papers describe it, on strings: find the
// adjacent pair with the lowest merge rank (leftmost on ties), merge it,
// repeat. It is the reference both encodeWord paths are checked against.
func naiveBPE(word string, ids map[string]int32, rank map[string]int) []int32 {
	var syms []string
	for i := 0; i < len(word); i++ {
		syms = append(syms, byteToUTF8s[word[i]])
	}
	for {
		best, bestRank := -1, math.MaxInt
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := rank[syms[i]+" "+syms[i+1]]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		syms = slices.Replace(syms, best, best+2, syms[best]+syms[best+1])
	}
	var out []int32
	for _, s := range syms {
		out = append(out, ids[s])
	}
	return out
}

// randomWord draws bytes from a small alphabet so that merges apply often.
func randomWord(rng *rand.Rand, alphabet string, maxLen int) string {
	n := 1 + rng.IntN(maxLen)
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func checkBPEPaths(t *testing.T, tok *Tokenizer, merges []string, alphabets []string) {
	t.Helper()
	rank := map[string]int{}
	for i, m := range merges {
		if _, dup := rank[m]; !dup {
			rank[m] = i
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	n := 4000
	if testing.Short() {
		n = 500
	}
	for i := range n {
		word := randomWord(rng, alphabets[i%len(alphabets)], 2*shortWord)
		want := naiveBPE(word, tok.ids, rank)
		heap := tok.bpe.encodeWordHeap(word, nil)
		fast := tok.bpe.encodeWord(word, nil)
		if !slices.Equal(heap, want) || !slices.Equal(fast, want) {
			t.Fatalf("word %q: encodeWord %v, encodeWordHeap %v, reference %v", word, fast, heap, want)
		}
	}
}

func TestBPEMergeOrder(t *testing.T) {
	v := testVocab("gpt-2")
	checkBPEPaths(t, mustTokenizer(t, v), v.Merges, []string{"the fox", "aeiou thr", "0123 ", "=-.!", " "})
}

func TestBPEMergeOrderGPT2Vocab(t *testing.T) {
	path := filepath.Join(sharedDir(t), "tokenizer-tests", "ggml-vocab-gpt-2.gguf")
	tok := loadGGUFTokenizer(t, path)
	f := loadMetadata(t, path)
	merges, _ := f.Strings(KeyMerges)
	checkBPEPaths(t, tok, merges, []string{"abcdefghijklmnopqrstuvwxyz", "etaoin shr", "  \n\t", "0123456789", "=-+*/.,;:!?"})
}

// A byte whose byte-level character is not a token is dropped, as in
// llama.cpp, and merges around it still apply.
func TestBPEMissingByte(t *testing.T) {
	v := testVocab("gpt-2")
	missing := byteToUTF8s['q']
	i := slices.Index(v.Tokens, missing)
	v.Tokens[i] = "[unused-q]"
	var merges []string
	for _, m := range v.Merges {
		if !strings.Contains(m, missing) {
			merges = append(merges, m)
		}
	}
	v.Merges = merges
	tok := mustTokenizer(t, v)
	got := tok.Encode("the quick", false, false)
	want := append(tok.Encode("the ", false, false), tok.Encode("uick", false, false)...)
	if !slices.Equal(got, want) {
		t.Errorf("Encode(the quick) = %v, want %v (q dropped)", got, want)
	}
}
