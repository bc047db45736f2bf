package mix

import (
	"fmt"
	"slices"
	"testing"

	"gotok/gguf"
	"gotok/quant"
)

// TestQ4KM checks Q4_K_M on a Llama-3.2-1B-shaped model (16 layers, 32/8
// heads, tied embeddings): llama.cpp gives the V and down projections of
// layers 0, 1, 4, 7, 10, 13, 14 and 15 Q6_K (use_more_bits), the tied
// embedding Q6_K, everything else Q4_K.
func TestQ4KM(t *testing.T) {
	m, ok := Lookup("q4_k_m")
	if !ok || m.Base != quant.Q4_K || m.FileType != 15 {
		t.Fatalf("Lookup(q4_k_m) = %+v, %v", m, ok)
	}
	md := Model{Arch: "llama", Layers: 16, Heads: 32, KVHeads: 8, Tied: true}
	more := []int{0, 1, 4, 7, 10, 13, 14, 15}
	for l := 0; l < 16; l++ {
		want := quant.Q4_K
		if slices.Contains(more, l) {
			want = quant.Q6_K
		}
		for _, role := range []string{"attn_v", "ffn_down"} {
			if got := m.Type(fmt.Sprintf("blk.%d.%s.weight", l, role), 2048, md); got != want {
				t.Errorf("layer %d %s: %s, want %s", l, role, got, want)
			}
		}
		for _, role := range []string{"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"} {
			if got := m.Type(fmt.Sprintf("blk.%d.%s.weight", l, role), 2048, md); got != quant.Q4_K {
				t.Errorf("layer %d %s: %s, want Q4_K", l, role, got)
			}
		}
	}
	if got := m.Type("token_embd.weight", 2048, md); got != quant.Q6_K {
		t.Errorf("tied token_embd: %s, want Q6_K", got)
	}
	md.Tied = false
	if got := m.Type("token_embd.weight", 2048, md); got != quant.Q4_K {
		t.Errorf("untied token_embd: %s, want Q4_K", got)
	}
	if got := m.Type("output.weight", 2048, md); got != quant.Q6_K {
		t.Errorf("output: %s, want Q6_K", got)
	}
	if got := m.Type("blk.3.attn_qkv.weight", 2048, md); got != quant.Q5_K {
		t.Errorf("fused qkv: %s, want Q5_K", got)
	}
}

// TestRules checks the other presets' rules and the fallbacks for rows
// that do not fit 256-element blocks.
func TestRules(t *testing.T) {
	smol := Model{Arch: "llama", Layers: 30, Heads: 9, KVHeads: 3, Tied: true}
	l8b := Model{Arch: "llama", Layers: 32, Heads: 32, KVHeads: 8}
	l70b := Model{Arch: "llama", Layers: 80, Heads: 64, KVHeads: 8}
	for _, c := range []struct {
		mix, tensor string
		cols        int
		md          Model
		want        quant.Type
	}{
		// Q4_0: a Q6_K head, Q8_0 when its rows do not fit Q6_K.
		{"q4_0", "output.weight", 4096, l8b, quant.Q6_K},
		{"q4_0", "token_embd.weight", 576, smol, quant.Q8_0},
		{"q4_0", "token_embd.weight", 4096, l8b, quant.Q4_0},
		{"q4_0", "blk.0.ffn_down.weight", 14336, l8b, quant.Q4_0},
		{"q8_0", "output.weight", 4096, l8b, quant.Q8_0},
		// K-quant rows of 576: Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0.
		{"q4_k_m", "blk.5.attn_q.weight", 576, smol, quant.Q5_0},
		{"q4_k_m", "blk.0.attn_v.weight", 576, smol, quant.Q8_0},
		{"q5_k_s", "blk.5.attn_q.weight", 576, smol, quant.Q5_1},
		{"q4_k_m", "token_embd.weight", 576, smol, quant.Q8_0},
		// Q4_K_S: V of the first four layers and down of the first eighth Q5_K.
		{"q4_k_s", "blk.3.attn_v.weight", 4096, l8b, quant.Q5_K},
		{"q4_k_s", "blk.4.attn_v.weight", 4096, l8b, quant.Q4_K},
		{"q4_k_s", "blk.3.ffn_down.weight", 14336, l8b, quant.Q5_K},
		{"q4_k_s", "blk.4.ffn_down.weight", 14336, l8b, quant.Q4_K},
		// Q5_K_M: Q6_K where Q4_K_M has it; Q5_K_S: none.
		{"q5_k_m", "blk.31.ffn_down.weight", 14336, l8b, quant.Q6_K},
		{"q5_k_m", "blk.5.ffn_down.weight", 14336, l8b, quant.Q5_K},
		{"q5_k_s", "blk.31.ffn_down.weight", 14336, l8b, quant.Q5_K},
		{"q6_k", "blk.31.ffn_down.weight", 14336, l8b, quant.Q6_K},
		{"q6_k", "output.weight", 4096, l8b, quant.Q6_K},
		// IQ4_XS: V Q5_K with 4+ query heads a KV head, down Q5_K in the first eighth.
		{"iq4_xs", "blk.9.attn_v.weight", 4096, l8b, quant.Q5_K},
		{"iq4_xs", "blk.9.attn_v.weight", 576, smol, quant.IQ4_NL},
		{"iq4_xs", "blk.3.ffn_down.weight", 14336, l8b, quant.Q5_K},
		{"iq4_xs", "blk.4.ffn_down.weight", 14336, l8b, quant.IQ4_XS},
		{"iq4_nl", "blk.4.attn_q.weight", 4096, l8b, quant.IQ4_NL},
		// 70B: V Q5_K where Q4_K_M leaves it Q4_K.
		{"q4_k_m", "blk.13.attn_v.weight", 8192, l70b, quant.Q5_K},
		{"q4_k_m", "blk.12.attn_q.weight", 8192, l70b, quant.Q4_K},
		// Alias.
		{"q4_k", "blk.0.ffn_down.weight", 14336, l8b, quant.Q6_K},
		{"q3_k", "blk.9.attn_v.weight", 4096, l8b, quant.Q4_K},
		// Q2_K: V Q4_K with 4+ query heads a KV head (else Q3_K), down and
		// W_o Q3_K; Q2_K_S: V likewise, down Q4_K in the first eighth.
		{"q2_k", "blk.9.attn_v.weight", 4096, l8b, quant.Q4_K},
		{"q2_k", "blk.9.attn_v.weight", 576, smol, quant.Q4_0},
		{"q2_k", "blk.9.ffn_down.weight", 14336, l8b, quant.Q3_K},
		{"q2_k", "blk.9.attn_output.weight", 4096, l8b, quant.Q3_K},
		{"q2_k", "blk.9.attn_q.weight", 4096, l8b, quant.Q2_K},
		{"q2_k", "output.weight", 4096, l8b, quant.Q6_K},
		{"q2_k_s", "blk.3.ffn_down.weight", 14336, l8b, quant.Q4_K},
		{"q2_k_s", "blk.4.ffn_down.weight", 14336, l8b, quant.Q2_K},
		// Q3_K_M: V Q5_K in the first two layers, Q4_K after; down Q5_K in
		// the first sixteenth, Q4_K after; W_o Q4_K. Q3_K_L: all Q5_K.
		{"q3_k_m", "blk.1.attn_v.weight", 4096, l8b, quant.Q5_K},
		{"q3_k_m", "blk.2.attn_v.weight", 4096, l8b, quant.Q4_K},
		{"q3_k_m", "blk.1.ffn_down.weight", 14336, l8b, quant.Q5_K},
		{"q3_k_m", "blk.2.ffn_down.weight", 14336, l8b, quant.Q4_K},
		{"q3_k_m", "blk.2.attn_output.weight", 4096, l8b, quant.Q4_K},
		{"q3_k_m", "blk.2.ffn_up.weight", 4096, l8b, quant.Q3_K},
		{"q3_k_l", "blk.20.attn_v.weight", 4096, l8b, quant.Q5_K},
		{"q3_k_l", "blk.20.ffn_down.weight", 14336, l8b, quant.Q5_K},
		{"q3_k_l", "blk.20.attn_output.weight", 4096, l8b, quant.Q5_K},
		{"q3_k_s", "blk.20.attn_v.weight", 4096, l8b, quant.Q3_K},
		{"q3_k_s", "blk.20.ffn_down.weight", 14336, l8b, quant.Q3_K},
	} {
		m, ok := Lookup(c.mix)
		if !ok {
			t.Fatalf("Lookup(%q) failed", c.mix)
		}
		if got := m.Type(c.tensor, c.cols, c.md); got != c.want {
			t.Errorf("%s %s (%d columns): %s, want %s", c.mix, c.tensor, c.cols, got, c.want)
		}
	}
	if _, ok := Lookup("iq2_xs"); ok {
		t.Error("IQ2_XS found: gotok cannot encode it")
	}
}

// TestFileTypes checks each preset's general.file_type against the name
// package gguf gives it (llama_ftype).
func TestFileTypes(t *testing.T) {
	for _, m := range Mixes {
		if got := gguf.FileType(m.FileType).String(); got != m.Name {
			t.Errorf("%s: file type %d is %s in package gguf", m.Name, m.FileType, got)
		}
	}
}
