// Package synth writes seeded, deterministic llama models with random
// weights, for tests and benchmarks: the shapes of a real model without its
// download.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"

	"gotok/gguf"
	"gotok/quant"
)

// Shape is the architecture of a generated model.
type Shape struct {
	// Arch is general.architecture: "" or "llama", or one of Archs.
	Arch                             string
	Layers, Dim, Heads, KVHeads, FFN int
	HeadDim                          int // 0: Dim/Heads
	Vocab                            int // used when no tokenizer is given
	Context                          int
	RopeBase                         float32
	Tied                             bool
}

// Presets are the named shapes `gotok gen` knows.
var Presets = map[string]Shape{
	// SmolLM-135M / SmolLM2-135M.
	"smollm-135m": {Layers: 30, Dim: 576, Heads: 9, KVHeads: 3, FFN: 1536, Vocab: 49152, Context: 2048, RopeBase: 100000, Tied: true},
	// Llama-3.2-1B (1,235,814,400 weights with Llama 3's 128256-token
	// vocabulary). Llama 3's rope scaling is not written: the rotary
	// frequencies are plain, which random weights do not mind.
	"llama-1b": {Layers: 16, Dim: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, Context: 131072, RopeBase: 500000, Tied: true},
	// Llama-3.1-8B (8,030,261,248 weights with the 128256-token vocabulary).
	"llama-8b": {Layers: 32, Dim: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, Context: 131072, RopeBase: 500000},
	// A small model whose every row length is a multiple of 256, so
	// llama-quantize can make K-quants of it (from gen --type f16).
	"test-256": {Layers: 4, Dim: 256, Heads: 4, KVHeads: 2, FFN: 768, Vocab: 512, Context: 2048, RopeBase: 10000},
	// A tiny model for unit tests: every code path, milliseconds a token.
	"tiny": {Layers: 2, Dim: 64, Heads: 4, KVHeads: 2, FFN: 192, Vocab: 320, Context: 256, RopeBase: 10000, Tied: true},
}

// family is what synth writes for an architecture: the tensors its block
// binds (as model.FromFile expects them) and metadata that switches on its
// features, with values chosen to make each one matter in a tiny model.
type family struct {
	noPreNorm, postNorm, qkvBias bool
	qkNorm                       string // "", "head" or "full"
	// fused: attn_qkv.weight for Q, K and V, and ffn_up.weight for the gate
	// and up rows (Phi-3); longRope: rope_factors_short/long.weight.
	fused, longRope bool
	// untied: output.weight whatever the shape says (llama.cpp's OLMo 2
	// graph requires it).
	untied   bool
	metadata map[string]any
}

// Archs are the architectures synth writes.
var Archs = map[string]family{
	"llama": {},
	"qwen2": {qkvBias: true},
	"qwen3": {qkNorm: "head"},
	"granite": {metadata: map[string]any{
		"embedding_scale": float32(2), "residual_scale": float32(0.5),
		"attention.scale": float32(0.1), "logit_scale": float32(0.5),
	}},
	"olmo2": {noPreNorm: true, postNorm: true, qkNorm: "full", untied: true},
	// LongRoPE's long factors apply past 32 positions of context.
	"phi3": {fused: true, longRope: true, metadata: map[string]any{
		"rope.scaling.original_context_length": uint32(32), "rope.scaling.attn_factor": float32(1.2),
		"attention.sliding_window": uint32(8), // read and not applied, as llama.cpp does
	}},
	"smollm3": {},
	// Ministral 3's temperature tuning, in steps of 8 positions.
	"mistral3": {metadata: map[string]any{
		"attention.temperature_scale": float32(0.5), "rope.scaling.original_context_length": uint32(8),
	}},
	// Mistral with its sliding window set (4 positions).
	"mistral": {metadata: map[string]any{"attention.sliding_window": uint32(4)}},
	// Windows of 4 positions on every other layer, local layers rotating
	// with base 10000 and global ones with the file's; soft-caps small
	// enough to bend the values they cap.
	"gemma2": {postNorm: true, metadata: map[string]any{
		"attention.sliding_window": uint32(4), "attn_logit_softcapping": float32(1.5), "final_logit_softcapping": float32(8),
	}},
	"gemma3": {postNorm: true, qkNorm: "head", metadata: map[string]any{
		"attention.sliding_window": uint32(4), "attention.sliding_window_pattern": uint32(2),
		"rope.freq_base_swa": float32(10000), "final_logit_softcapping": float32(8),
	}},
}

// PresetNames lists the presets in order.
func PresetNames() []string {
	var names []string
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Options says what to generate.
type Options struct {
	Shape Shape
	Name  string     // general.name
	Type  quant.Type // linear weights
	// EmbedType is token_embd's type; DefaultEmbedType gives llama.cpp's
	// choice.
	EmbedType quant.Type
	// TypeOf, when set, gives the type of the tensors it answers for (by
	// GGUF name, e.g. blk.3.ffn_down.weight), as llama.cpp's mixes (Q4_K_M:
	// Q6_K for the output head and some V and down projections) do.
	TypeOf func(tensor string) (quant.Type, bool)
	Seed   uint64
	// Tokenizer sets the tokenizer.* metadata; nil writes a plain byte-level
	// vocabulary of Shape.Vocab tokens. It must report the vocabulary size.
	Tokenizer func(w *gguf.Writer) (vocab int, err error)
}

type tensorJob struct {
	name  string
	typ   quant.Type
	shape []uint64
	std   float32 // random normal weights with this deviation around gain
	gain  float32 // or, when std is 0, a constant (norm gains)
	data  []byte
}

// Generate builds the model in a writer ready to WriteFile.
func Generate(o Options) (*gguf.Writer, error) {
	s := o.Shape
	headDim := s.HeadDim
	if headDim == 0 && s.Heads > 0 {
		headDim = s.Dim / s.Heads
	}
	if s.Layers <= 0 || s.Dim <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.FFN <= 0 || headDim <= 0 || headDim%2 != 0 ||
		(s.HeadDim == 0 && s.Dim%s.Heads != 0) || s.Heads%s.KVHeads != 0 {
		return nil, fmt.Errorf("synth: bad shape %+v", s)
	}
	a := s.Arch
	if a == "" {
		a = "llama"
	}
	fam, ok := Archs[a]
	if !ok {
		return nil, fmt.Errorf("synth: architecture %q is not one synth writes", a)
	}
	for _, t := range []quant.Type{o.Type, o.EmbedType} {
		if !quant.QuantizedSupported(t) {
			return nil, fmt.Errorf("synth: cannot write weights of type %s", t)
		}
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", a)
	w.Set("general.name", o.Name)
	if ft, ok := gguf.FileTypeOf(o.Type); ok {
		w.Set("general.file_type", uint32(ft))
	}
	w.Set("general.quantization_version", uint32(2))
	w.Set(a+".block_count", uint32(s.Layers))
	w.Set(a+".context_length", uint32(s.Context))
	w.Set(a+".embedding_length", uint32(s.Dim))
	w.Set(a+".feed_forward_length", uint32(s.FFN))
	w.Set(a+".attention.head_count", uint32(s.Heads))
	w.Set(a+".attention.head_count_kv", uint32(s.KVHeads))
	if s.HeadDim != 0 {
		w.Set(a+".attention.key_length", uint32(headDim))
		w.Set(a+".attention.value_length", uint32(headDim))
	}
	w.Set(a+".rope.freq_base", s.RopeBase)
	w.Set(a+".rope.dimension_count", uint32(headDim))
	w.Set(a+".attention.layer_norm_rms_epsilon", float32(1e-5))
	for k, v := range fam.metadata {
		w.Set(a+"."+k, v)
	}
	vocab := s.Vocab
	if o.Tokenizer != nil {
		v, err := o.Tokenizer(w)
		if err != nil {
			return nil, err
		}
		vocab = v
	} else {
		if vocab < minByteVocab {
			return nil, fmt.Errorf("synth: a vocabulary of %d is too small for the built-in byte-level tokenizer (at least %d)", vocab, minByteVocab)
		}
		setByteVocab(w, vocab)
	}
	w.Set(a+".vocab_size", uint32(vocab))

	u := func(n int) uint64 { return uint64(n) }
	// Residual branches are scaled down so the stream stays O(1) through
	// the layers; the embedding is small and the output norm gain large so
	// the logits are peaked (greedy stable under rounding) but not one-hot.
	inStd := func(fanIn int) float32 { return float32(1 / math.Sqrt(float64(fanIn))) }
	outStd := func(fanIn int) float32 { return inStd(fanIn) / float32(math.Sqrt(float64(2*s.Layers))) }
	jobs := []*tensorJob{
		{name: "token_embd.weight", typ: o.EmbedType, shape: []uint64{u(s.Dim), u(vocab)}, std: 0.05},
		{name: "output_norm.weight", typ: quant.F32, shape: []uint64{u(s.Dim)}, gain: 2.5},
	}
	if !s.Tied || fam.untied {
		jobs = append(jobs, &tensorJob{name: "output.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(vocab)}, std: 0.05})
	}
	qd, kvd := s.Heads*headDim, s.KVHeads*headDim
	// The norm gains of the other families' extra norms vary around 1, so
	// a gain applied to the wrong element shows.
	norm := func(name string, n int) *tensorJob {
		return &tensorJob{name: name, typ: quant.F32, shape: []uint64{u(n)}, gain: 1, std: 0.2}
	}
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if !fam.noPreNorm {
			jobs = append(jobs, &tensorJob{name: p + "attn_norm.weight", typ: quant.F32, shape: []uint64{u(s.Dim)}, gain: 1})
		}
		if fam.fused {
			jobs = append(jobs, &tensorJob{name: p + "attn_qkv.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(qd + 2*kvd)}, std: inStd(s.Dim)})
		} else {
			jobs = append(jobs,
				&tensorJob{name: p + "attn_q.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(qd)}, std: inStd(s.Dim)},
				&tensorJob{name: p + "attn_k.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(kvd)}, std: inStd(s.Dim)},
				&tensorJob{name: p + "attn_v.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(kvd)}, std: inStd(s.Dim)},
			)
		}
		jobs = append(jobs, &tensorJob{name: p + "attn_output.weight", typ: o.Type, shape: []uint64{u(qd), u(s.Dim)}, std: outStd(qd)})
		if !fam.noPreNorm {
			jobs = append(jobs, &tensorJob{name: p + "ffn_norm.weight", typ: quant.F32, shape: []uint64{u(s.Dim)}, gain: 1})
		}
		if fam.fused {
			jobs = append(jobs, &tensorJob{name: p + "ffn_up.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(2 * s.FFN)}, std: inStd(s.Dim)})
		} else {
			jobs = append(jobs,
				&tensorJob{name: p + "ffn_gate.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(s.FFN)}, std: inStd(s.Dim)},
				&tensorJob{name: p + "ffn_up.weight", typ: o.Type, shape: []uint64{u(s.Dim), u(s.FFN)}, std: inStd(s.Dim)},
			)
		}
		jobs = append(jobs, &tensorJob{name: p + "ffn_down.weight", typ: o.Type, shape: []uint64{u(s.FFN), u(s.Dim)}, std: outStd(s.FFN)})
		switch fam.qkNorm {
		case "head":
			jobs = append(jobs, norm(p+"attn_q_norm.weight", headDim), norm(p+"attn_k_norm.weight", headDim))
		case "full":
			jobs = append(jobs, norm(p+"attn_q_norm.weight", qd), norm(p+"attn_k_norm.weight", kvd))
		}
		if fam.postNorm {
			jobs = append(jobs, norm(p+"post_attention_norm.weight", s.Dim), norm(p+"post_ffw_norm.weight", s.Dim))
		}
		if fam.qkvBias {
			jobs = append(jobs,
				&tensorJob{name: p + "attn_q.bias", typ: quant.F32, shape: []uint64{u(qd)}, std: 0.1},
				&tensorJob{name: p + "attn_k.bias", typ: quant.F32, shape: []uint64{u(kvd)}, std: 0.1},
				&tensorJob{name: p + "attn_v.bias", typ: quant.F32, shape: []uint64{u(kvd)}, std: 0.1},
			)
		}
	}
	if fam.longRope {
		// Divisors from 1 to 8 across the pairs, the long ones twice the
		// short ones.
		pairs := headDim / 2
		jobs = append(jobs,
			&tensorJob{name: "rope_factors_short.weight", typ: quant.F32, shape: []uint64{u(pairs)}, gain: 2, std: 0.5},
			&tensorJob{name: "rope_factors_long.weight", typ: quant.F32, shape: []uint64{u(pairs)}, gain: 6, std: 1},
		)
	}
	if o.TypeOf != nil {
		for _, j := range jobs {
			if t, ok := o.TypeOf(j.name); ok && len(j.shape) == 2 {
				if !quant.QuantizedSupported(t) {
					return nil, fmt.Errorf("synth: %s: cannot write weights of type %s", j.name, t)
				}
				j.typ = t
			}
		}
	}
	if err := fill(jobs, o.Seed); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		w.AddTensor(j.name, j.typ, j.shape, j.data)
	}
	return w, nil
}

// fill makes every tensor's bytes in parallel. Each tensor draws from its own
// generator seeded by (seed, index), so the result is the same on any number
// of cores.
func fill(jobs []*tensorJob, seed uint64) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fillOne(jobs[i], seed, uint64(i)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func fillOne(j *tensorJob, seed, index uint64) error {
	n := 1
	for _, d := range j.shape {
		n *= int(d)
	}
	x := make([]float32, n)
	if j.std == 0 {
		for i := range x {
			x[i] = j.gain
		}
	} else {
		rng := rand.New(rand.NewPCG(seed, index*0x9e3779b97f4a7c15+1))
		for i := range x {
			x[i] = j.gain + float32(rng.NormFloat64())*j.std
		}
	}
	size, err := j.typ.RowBytes(uint64(n))
	if err != nil {
		return fmt.Errorf("synth: %s: %w", j.name, err)
	}
	j.data = make([]byte, size)
	if err := quant.Quantize(j.typ, x, j.data); err != nil {
		return fmt.Errorf("synth: %s: %w", j.name, err)
	}
	return nil
}

// minByteVocab is the size of the built-in vocabulary before padding: 256
// bytes, 6 merges, BOS and EOS.
const minByteVocab = 264

// setByteVocab writes a minimal byte-level BPE vocabulary: one token per byte
// (GPT-2's byte-to-unicode mapping), BOS/EOS specials, and a handful of
// merges so BPE merging is exercised. Vocab sizes above 258 are padded with
// unused tokens.
func setByteVocab(w *gguf.Writer, vocab int) {
	tokens := make([]string, 0, vocab)
	types := make([]int32, 0, vocab)
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(byteRune(byte(b))))
		types = append(types, 1) // normal
	}
	merges := []string{"Ġ t", "h e", "Ġt he", "Ġ a", "i n", "o n"}
	for _, m := range merges {
		var l, r string
		fmt.Sscan(m, &l, &r)
		tokens = append(tokens, l+r)
		types = append(types, 1)
	}
	bos := len(tokens)
	tokens = append(tokens, "<s>", "</s>")
	types = append(types, 3, 3) // control
	for len(tokens) < vocab {
		tokens = append(tokens, fmt.Sprintf("<unused%d>", len(tokens)))
		types = append(types, 5) // unused
	}
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", "gpt-2")
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.merges", merges)
	w.Set("tokenizer.ggml.bos_token_id", uint32(bos))
	w.Set("tokenizer.ggml.eos_token_id", uint32(bos+1))
	w.Set("tokenizer.ggml.add_bos_token", false)
}

// byteRune is GPT-2's reversible byte → printable rune mapping.
func byteRune(b byte) rune {
	switch {
	case b >= '!' && b <= '~', b >= 0xa1 && b <= 0xac, b >= 0xae:
		return rune(b)
	}
	// The remaining 68 bytes map to 256, 257, … in byte order.
	n := 0
	for c := 0; c < int(b); c++ {
		cb := byte(c)
		if !(cb >= '!' && cb <= '~' || cb >= 0xa1 && cb <= 0xac || cb >= 0xae) {
			n++
		}
	}
	return rune(256 + n)
}

// DefaultEmbedType is token_embd's type in llama.cpp's files whose linear
// weights are t: Q8_0 for quantized models, t itself for float ones.
func DefaultEmbedType(t quant.Type) quant.Type {
	switch t {
	case quant.F32, quant.F16, quant.BF16:
		return t
	}
	return quant.Q8_0
}
