package cuda

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"gotok/backend/cuda/kernels"
	"gotok/quant"
	"gotok/quant/mix"
)

// TestQKVPairsCoverMixes checks that every layer llama-quantize writes
// (package quant/mix) whose Q and K are of a typed family and whose V is
// of another type has that family's QKV kernel for the pair
// (typedFamily.v), on Llama's head layouts (one, four and eight query
// heads a KV head) and layer counts, and that the committed PTX has each
// pair's kernels. Without one, the layer runs the untyped mixed kernel,
// ~3× slower (llama-8B IQ4_XS: 0.75× llama.cpp). Needs no GPU.
func TestQKVPairsCoverMixes(t *testing.T) {
	ptx, err := kernels.PTX("qkv_rope", "sm90", "")
	if err != nil {
		t.Fatal(err)
	}
	for q, fam := range typedQuants {
		for _, v := range fam.v {
			for _, n := range qkvVNames(fam, v) {
				if !bytes.Contains(ptx, []byte(".entry "+n+"(")) {
					t.Errorf("%v with V in %v: no kernel %s in qkv_rope's PTX", q, v, n)
				}
			}
		}
	}
	missing := map[[2]quant.Type]bool{}
	for _, m := range mix.Mixes {
		for _, md := range []mix.Model{
			{Arch: "llama", Layers: 16, Heads: 32, KVHeads: 8, Tied: true},
			{Arch: "llama", Layers: 32, Heads: 32, KVHeads: 8},
			{Arch: "llama", Layers: 28, Heads: 24, KVHeads: 8, Tied: true},
			{Arch: "llama", Layers: 32, Heads: 32, KVHeads: 32},
			{Arch: "llama", Layers: 80, Heads: 64, KVHeads: 8},
		} {
			for l := range md.Layers {
				name := func(role string) string { return "blk." + strconv.Itoa(l) + "." + role }
				tq := m.Type(name("attn_q.weight"), 4096, md)
				tk := m.Type(name("attn_k.weight"), 4096, md)
				tv := m.Type(name("attn_v.weight"), 4096, md)
				fam, typed := typedQuants[tq]
				if !typed || tk != tq || tv == tq {
					continue
				}
				if !slices.Contains(fam.v, tv) && !missing[[2]quant.Type{tq, tv}] {
					missing[[2]quant.Type{tq, tv}] = true
					t.Errorf("%s, %d layers, %d/%d heads: layer %d has Q and K in %v and V in %v: no QKV kernel for the pair",
						m.Name, md.Layers, md.Heads, md.KVHeads, l, tq, tv)
				}
			}
		}
	}
}
