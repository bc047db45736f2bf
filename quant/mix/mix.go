// Package mix holds llama.cpp's quantization mixes (its llama_ftype
// presets): which type each tensor of a model gets when the model is
// quantized to Q4_K_M, Q5_K_S, IQ4_XS, … A mix is a base type and rules
// that give some tensors more bits: the output head Q6_K, the V and down
// projections of some layers Q5_K or Q6_K, rows that do not fit a K-quant's
// 256-element blocks a 32-element type. The rules are those of llama.cpp's
// llama-quant.cpp (d32676d) for dense models, so gotok quantize writes the
// per-tensor types llama-quantize writes.
package mix

import (
	"fmt"
	"strings"

	"gotok/quant"
)

// A Mix is one preset: its name (as llama-quantize spells it), its base
// type and its llama_ftype (general.file_type).
type Mix struct {
	Name     string
	Base     quant.Type
	FileType uint32
}

// Mixes are the presets gotok can write: those whose types package quant
// encodes (llama.cpp's IQ1–IQ3 ones need encoders it lacks).
var Mixes = []Mix{
	{"Q4_0", quant.Q4_0, 2}, {"Q4_1", quant.Q4_1, 3}, {"Q8_0", quant.Q8_0, 7},
	{"Q5_0", quant.Q5_0, 8}, {"Q5_1", quant.Q5_1, 9},
	{"Q2_K", quant.Q2_K, 10}, {"Q2_K_S", quant.Q2_K, 21},
	{"Q3_K_S", quant.Q3_K, 11}, {"Q3_K_M", quant.Q3_K, 12}, {"Q3_K_L", quant.Q3_K, 13},
	{"Q4_K_S", quant.Q4_K, 14}, {"Q4_K_M", quant.Q4_K, 15}, {"Q5_K_S", quant.Q5_K, 16},
	{"Q5_K_M", quant.Q5_K, 17}, {"Q6_K", quant.Q6_K, 18},
	{"IQ4_NL", quant.IQ4_NL, 25}, {"IQ4_XS", quant.IQ4_XS, 30},
}

// aliases are llama-quantize's other names for a preset.
var aliases = map[string]string{"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}

// Lookup finds a preset by name, in any case.
func Lookup(name string) (Mix, bool) {
	n := strings.ToUpper(name)
	if a, ok := aliases[n]; ok {
		n = a
	}
	for _, m := range Mixes {
		if m.Name == n {
			return m, true
		}
	}
	return Mix{}, false
}

// Names lists the presets, for help and errors.
func Names() []string {
	var ns []string
	for _, m := range Mixes {
		ns = append(ns, strings.ToLower(m.Name))
	}
	return ns
}

// Model is what the rules read of a model: its layers and heads, its
// architecture, and whether the token embedding is also the output head
// (no output.weight).
type Model struct {
	Arch           string
	Layers         int
	Heads, KVHeads int
	Tied           bool
}

// Type is the type a 2-D weight tensor named name, with rows of cols
// elements, gets in m. Tensors that llama.cpp never quantizes (norms, 1-D
// tensors) are not its concern: callers keep them.
func (m Mix) Type(name string, cols int, md Model) quant.Type {
	t := m.Base
	layer, role := splitName(name)
	moreBits := func() bool { return useMoreBits(layer, md.Layers) }
	switch {
	case role == "output.weight" || (md.Tied && role == "token_embd.weight"):
		// The head: Q6_K unless the base is Q8_0 (or its rows do not fit
		// the base's blocks: Q8_0).
		if cols%t.BlockSize() != 0 {
			t = quant.Q8_0
		} else if t != quant.Q8_0 {
			t = quant.Q6_K
		}
	case role == "token_embd.weight":
		// The base type.
	case role == "attn_v.weight":
		gqa := md.KVHeads > 0 && md.Heads/md.KVHeads >= 4
		switch {
		case m.Name == "Q2_K" && gqa, m.Name == "Q2_K_S" && gqa:
			t = quant.Q4_K
		case m.Name == "Q2_K":
			t = quant.Q3_K
		case m.Name == "Q3_K_M" && layer < 2:
			t = quant.Q5_K
		case m.Name == "Q3_K_M":
			t = quant.Q4_K
		case m.Name == "Q3_K_L":
			t = quant.Q5_K
		case (m.Name == "IQ4_NL" || m.Name == "IQ4_XS") && gqa:
			t = quant.Q5_K
		case (m.Name == "Q4_K_M" || m.Name == "Q5_K_M") && moreBits():
			t = quant.Q6_K
		case m.Name == "Q4_K_S" && layer < 4:
			t = quant.Q5_K
		}
		if is70B(md) && (t == quant.Q3_K || t == quant.Q4_K) {
			// 70B's V projection is 8× smaller than its Q: more bits
			// cost little.
			t = quant.Q5_K
		}
	case role == "ffn_down.weight":
		switch {
		case m.Name == "Q2_K":
			t = quant.Q3_K
		case m.Name == "Q2_K_S" && layer < md.Layers/8:
			t = quant.Q4_K
		case m.Name == "Q3_K_M" && layer < md.Layers/16:
			t = quant.Q5_K
		case m.Name == "Q3_K_M":
			t = quant.Q4_K // Falcon alone keeps Q3_K outside use_more_bits
		case m.Name == "Q3_K_L":
			t = quant.Q5_K
		case m.Name == "Q4_K_M" && moreBits(), m.Name == "Q5_K_M" && moreBits():
			t = quant.Q6_K
		case (m.Name == "IQ4_NL" || m.Name == "IQ4_XS") && layer < md.Layers/8:
			t = quant.Q5_K // without an importance matrix, as gotok writes
		case m.Name == "Q4_K_S" && layer < md.Layers/8:
			t = quant.Q5_K
		}
	case role == "attn_output.weight":
		switch m.Name {
		case "Q2_K":
			t = quant.Q3_K
		case "Q3_K_M":
			t = quant.Q4_K
		case "Q3_K_L":
			t = quant.Q5_K
		}
	case role == "attn_qkv.weight":
		switch m.Name {
		case "Q3_K_M", "Q3_K_L":
			t = quant.Q4_K
		case "Q4_K_M":
			t = quant.Q5_K
		case "Q5_K_M":
			t = quant.Q6_K
		}
	}
	return fallback(t, cols)
}

// useMoreBits is llama.cpp's choice of the layers that get more bits: the
// first and last eighth, and every third one between.
func useMoreBits(layer, layers int) bool {
	return layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2
}

// is70B is llama.cpp's LLM_TYPE_70B for the mixes' purpose: an 80-layer
// llama.
func is70B(md Model) bool { return md.Arch == "llama" && md.Layers == 80 }

// fallback is the type a row of cols elements takes when it does not fit
// t's blocks (llama.cpp's tensor_type_fallback); it returns t itself when
// no fallback fits either (callers keep such tensors as they are).
func fallback(t quant.Type, cols int) quant.Type {
	if cols%t.BlockSize() == 0 {
		return t
	}
	f, ok := map[quant.Type]quant.Type{
		quant.IQ4_XS: quant.IQ4_NL, quant.Q2_K: quant.Q4_0, quant.Q3_K: quant.Q4_0,
		quant.Q4_K: quant.Q5_0, quant.Q5_K: quant.Q5_1, quant.Q6_K: quant.Q8_0,
	}[t]
	if !ok || cols%f.BlockSize() != 0 {
		return t
	}
	return f
}

// splitName returns the layer of "blk.N.role" (0 for other tensors) and
// the role: the name without its "blk.N." prefix.
func splitName(name string) (int, string) {
	var layer int
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 {
			if _, err := fmt.Sscanf(rest[:i], "%d", &layer); err == nil {
				return layer, rest[i+1:]
			}
		}
	}
	return 0, name
}
