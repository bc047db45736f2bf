package constrain

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gotok/internal/sharedtest"
	"gotok/tokenizer"
)

// sharedDir is the project's shared/ folder with the tokenizer tests, or
// skips.
func sharedDir(t testing.TB) string {
	t.Helper()
	return sharedtest.Dir(t, "tokenizer-tests")
}

var smolLM2 struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	v    *Vocab
	err  error
}

// smolLM2Vocab is the SmolLM2 tokenizer's vocabulary (49152 tokens).
func smolLM2Vocab(t testing.TB) (*tokenizer.Tokenizer, *Vocab) {
	t.Helper()
	path := filepath.Join(sharedDir(t), "tokenizer-tests", "smollm2-135m-instruct", "tokenizer.json")
	smolLM2.once.Do(func() {
		js, err := os.ReadFile(path)
		if err != nil {
			smolLM2.err = err
			return
		}
		hf, err := tokenizer.ImportHF(js)
		if err != nil {
			smolLM2.err = err
			return
		}
		if smolLM2.tok, smolLM2.err = hf.Tokenizer(); smolLM2.err == nil {
			smolLM2.v = NewVocab(smolLM2.tok)
		}
	})
	if smolLM2.err != nil {
		t.Fatal(smolLM2.err)
	}
	return smolLM2.tok, smolLM2.v
}

func TestVocabTrie(t *testing.T) {
	pieces := [][]byte{[]byte("ab"), nil, []byte("a"), []byte("abc"), []byte("b"), []byte("ab"), []byte(""), []byte("x")}
	v := newVocab(pieces, []int32{7})
	// Nodes in preorder: a, ab, abc, b.
	if got := string(v.label); got != "abcb" {
		t.Fatalf("labels %q", got)
	}
	wantEnds := map[int][]int32{0: {2}, 1: {0, 5}, 2: {3}, 3: {4}}
	for i := range v.label {
		got := v.endIDs[v.ends[i]:v.ends[i+1]]
		if !equalIDs(got, wantEnds[i]) {
			t.Errorf("node %d ends %v, want %v", i, got, wantEnds[i])
		}
	}
	if want := []int32{3, 3, 3, 4}; !equalIDs(v.skip, want) {
		t.Errorf("skip %v, want %v", v.skip, want)
	}
	if !v.IsEOG(7) || v.Bytes(7) != nil || v.Bytes(1) != nil {
		t.Error("EOG token 7 or empty token 1 has bytes")
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bruteAllowed decides each token on its own, byte by byte.
func bruteAllowed(v *Vocab, ts []thread, id int32) bool {
	if v.IsEOG(id) {
		return complete(ts)
	}
	p := v.Bytes(id)
	if len(p) == 0 {
		return false
	}
	for _, b := range p {
		if ts = stepAll(nil, ts, b, nil); len(ts) == 0 {
			return false
		}
	}
	return true
}

// closerBias favours tokens that close strings, objects and arrays, so that
// random walks end within a few hundred tokens.
func closerBias(v *Vocab) []float32 {
	bias := make([]float32, v.Size())
	for id := range bias {
		if strings.ContainsAny(string(v.Bytes(int32(id))), `"}]`) {
			bias[id] = 1
		}
		if v.IsEOG(int32(id)) {
			bias[id] = 1
		}
	}
	return bias
}

// TestRandomTokenWalks generates with random logits over the SmolLM2
// vocabulary: every masked step leaves some token, every chosen token is
// accepted, and every text that ends is valid JSON that validates. The
// first steps of each walk check the trie walk's mask against deciding
// every token on its own.
func TestRandomTokenWalks(t *testing.T) {
	_, v := smolLM2Vocab(t)
	bias := closerBias(v)
	r := rand.New(rand.NewPCG(11, 12))
	// Not "open": its required key is seldom among random names.
	names := []string{"person", "defs", "nested", "mixed", "any"}
	walks := 3
	if testing.Short() {
		walks = 1
	}
	// Random logits: a window of a long table of normal noise per step.
	noise := make([]float32, 2*v.Size())
	for i := range noise {
		noise[i] = float32(r.NormFloat64())
	}
	for _, name := range names {
		g, err := CompileSchema([]byte(testSchemas[name]))
		if err != nil {
			t.Fatal(err)
		}
		val := validator(t, testSchemas[name])
		ended := 0
		for w := range walks {
			strength := float32(4) / float32(1+w) // deeper texts in later walks
			c := NewConstraint(g, v)
			logits := make([]float32, v.Size())
			var text []byte
			for step := 0; step < 400 && !c.Done(); step++ {
				off := r.IntN(v.Size())
				for i := range logits {
					logits[i] = noise[off+i] + bias[i]*strength
				}
				if err := c.Mask(logits); err != nil {
					t.Fatalf("%s: %v after %q", name, err, text)
				}
				if w == 0 && (step < 4 || step%16 == 0) {
					for id := range int32(v.Size()) {
						masked := math.IsInf(float64(logits[id]), -1)
						if masked == bruteAllowed(v, c.ts, id) {
							t.Fatalf("%s after %q: token %d %q masked %v", name, text, id, v.Bytes(id), masked)
						}
					}
				}
				id := argmax(logits)
				if err := c.Accept(id); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				text = append(text, v.Bytes(id)...)
			}
			if c.Done() || c.Complete() {
				ended++
				checkValid(t, val, string(text))
			}
		}
		if ended == 0 {
			t.Errorf("%s: no walk ended", name)
		}
	}
}

func argmax(l []float32) int32 {
	best := int32(0)
	for i, x := range l {
		if x > l[best] {
			best = int32(i)
		}
	}
	return best
}

func TestAnyObjectOverVocab(t *testing.T) {
	_, v := smolLM2Vocab(t)
	c := NewConstraint(AnyObject(), v)
	for _, piece := range []string{"{", "\"", "a", "\":", " [", "1", ",", "2", "]}"} {
		id := findToken(t, v, piece)
		if !c.Allowed(id) {
			t.Fatalf("%q not allowed", piece)
		}
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Done() || !c.Complete() || !c.Allowed(v.eog[0]) {
		t.Error("a closed object is not done")
	}
	c = NewConstraint(AnyObject(), v)
	if c.Allowed(findToken(t, v, "[")) || c.Allowed(v.eog[0]) || c.Allowed(findToken(t, v, "1")) {
		t.Error("a non-object or the end allowed at the start")
	}
	if err := c.Accept(findToken(t, v, "[")); err == nil {
		t.Error("accepted a disallowed token")
	}
	if err := c.Accept(v.eog[0]); err == nil {
		t.Error("accepted the end of generation too early")
	}
	if err := c.Mask(make([]float32, 3)); err == nil {
		t.Error("masked logits of the wrong length")
	}
}

func findToken(t *testing.T, v *Vocab, piece string) int32 {
	t.Helper()
	for id := range int32(v.Size()) {
		if string(v.Bytes(id)) == piece {
			return id
		}
	}
	t.Fatalf("no token %q", piece)
	return -1
}

// maskStates are states of the person schema in which the mask is
// measured: at the start, before a key, inside a string value (the
// costliest: most tokens can continue a string), inside a number.
var maskStates = []struct{ name, prefix string }{
	{"start", ``},
	{"key", `{"name": "Al", `},
	{"string", `{"name": "Al`},
	{"free-string", `{"tags": ["`},
	{"number", `{"age": 4`},
}

// TestMaskTime reports the time of one mask on the SmolLM2 vocabulary.
func TestMaskTime(t *testing.T) {
	_, v := smolLM2Vocab(t)
	g, err := CompileSchema([]byte(testSchemas["person"]))
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, v.Size())
	for _, s := range maskStates {
		c := NewConstraint(g, v)
		for i := range len(s.prefix) {
			c.ts = stepAll(nil, c.ts, s.prefix[i], nil)
		}
		if len(c.ts) == 0 {
			t.Fatalf("%s: prefix %q refused", s.name, s.prefix)
		}
		best := time.Duration(math.MaxInt64)
		for range 5 {
			c.fresh, c.maskKey = false, nil // a full walk, not the cached mask
			t0 := time.Now()
			if err := c.Mask(logits); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(t0))
		}
		n := 0
		for id := range int32(v.Size()) {
			if c.Allowed(id) {
				n++
			}
		}
		t.Logf("%-12s %6d tokens allowed, mask %v (trie of %d nodes)", s.name, n, best, v.Nodes())
	}
}

func BenchmarkMask(b *testing.B) {
	_, v := smolLM2Vocab(b)
	g, err := CompileSchema([]byte(testSchemas["person"]))
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, v.Size())
	for _, s := range maskStates {
		b.Run(s.name, func(b *testing.B) {
			c := NewConstraint(g, v)
			for i := range len(s.prefix) {
				c.ts = stepAll(nil, c.ts, s.prefix[i], nil)
			}
			for b.Loop() {
				c.fresh, c.maskKey = false, nil // a full walk, not the cached mask
				if err := c.Mask(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNewVocab(b *testing.B) {
	tok, _ := smolLM2Vocab(b)
	for b.Loop() {
		NewVocab(tok)
	}
}

// TestMaskReusedInsideStrings: inside a long string the mask is computed
// once and reused, and stays right, up to a maximum length.
func TestMaskReusedInsideStrings(t *testing.T) {
	_, v := smolLM2Vocab(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, schema := range []string{`{"type": "string", "minLength": 3}`, `{"type": "string", "maxLength": 1000}`} {
		g, err := CompileSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		c := NewConstraint(g, v)
		logits := make([]float32, v.Size())
		var text []byte
		steps := 0
		for ; steps < 40 && !c.Done(); steps++ {
			for i := range logits {
				logits[i] = float32(r.NormFloat64())
				if strings.Contains(string(v.Bytes(int32(i))), `"`) || v.IsEOG(int32(i)) {
					logits[i] -= 20 // stay inside the string
				}
			}
			if err := c.Mask(logits); err != nil {
				t.Fatal(err)
			}
			if steps%10 == 0 {
				for id := range int32(v.Size()) {
					if math.IsInf(float64(logits[id]), -1) == bruteAllowed(v, c.ts, id) {
						t.Fatalf("%s after %q: token %d %q wrongly masked", schema, text, id, v.Bytes(id))
					}
				}
			}
			id := argmax(logits)
			if err := c.Accept(id); err != nil {
				t.Fatal(err)
			}
			text = append(text, v.Bytes(id)...)
		}
		if c.walks > steps/2 {
			t.Errorf("%s: %d walks for %d masks: %q", schema, c.walks, steps, text)
		}
		t.Logf("%s: %d walks for %d masks", schema, c.walks, steps)
	}
}

// TestConcurrentConstraints: a grammar and a vocabulary serve concurrent
// generations, each with its own constraint.
func TestConcurrentConstraints(t *testing.T) {
	_, v := smolLM2Vocab(t)
	g, err := CompileSchema([]byte(testSchemas["person"]))
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 4)
	var wg sync.WaitGroup
	for i := range texts {
		wg.Go(func() {
			c := NewConstraint(g, v)
			logits := make([]float32, v.Size())
			r := rand.New(rand.NewPCG(uint64(i), 99))
			var text []byte
			for range 30 {
				for j := range logits {
					logits[j] = float32(r.NormFloat64())
				}
				if c.Mask(logits) != nil {
					return
				}
				id := argmax(logits)
				if c.Accept(id) != nil {
					return
				}
				text = append(text, v.Bytes(id)...)
			}
			texts[i] = string(text)
		})
	}
	wg.Wait()
	for i, text := range texts {
		if text == "" || !strings.HasPrefix(strings.TrimLeft(text, " \n\t"), "{") {
			t.Errorf("generation %d: %q", i, text)
		}
	}
}

// BenchmarkMaskManyReadings: a union of 64 string schemas keeps 64
// readings inside a string, the costliest mask a schema can ask for.
func BenchmarkMaskManyReadings(b *testing.B) {
	_, v := smolLM2Vocab(b)
	var alts []string
	for i := range maxThreads {
		alts = append(alts, fmt.Sprintf(`{"type": "string", "maxLength": %d}`, 5000+i))
	}
	g, err := CompileSchema([]byte(`{"anyOf": [` + strings.Join(alts, ",") + `]}`))
	if err != nil {
		b.Fatal(err)
	}
	c := NewConstraint(g, v)
	c.ts = stepAll(nil, c.ts, '"', nil)
	if len(c.ts) != maxThreads {
		b.Fatalf("%d readings", len(c.ts))
	}
	logits := make([]float32, v.Size())
	for b.Loop() {
		c.fresh, c.maskKey = false, nil
		if err := c.Mask(logits); err != nil {
			b.Fatal(err)
		}
	}
}
