package main

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"gotok"
	"gotok/gguf"
	"gotok/quant"
)

// gen --type f16 writes the file llama-quantize makes every type from; the
// test-256 preset's rows fit K-quants. It must load and run here too.
func TestGenTest256F16Runs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "test-256-f16.gguf")
	if _, _, err := cli(t, "gen", "-o", p, "--preset", "test-256", "--type", "f16"); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]quant.Type{}
	for _, ti := range f.Tensors {
		types[ti.Name] = ti.Type
	}
	f.Close()
	if types["token_embd.weight"] != quant.F16 || types["output.weight"] != quant.F16 || types["blk.3.ffn_down.weight"] != quant.F16 || types["blk.0.attn_norm.weight"] != quant.F32 {
		t.Errorf("tensor types %v", types)
	}

	m, err := gotok.Load(p, gotok.Options{Device: "cpu", Threads: 2, ContextLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if c := m.Config(); c.NumLayers != 4 || c.Dim != 256 || c.FFNDim != 768 || c.NumHeads != 4 || c.NumKVHeads != 2 || c.TiedEmbeddings {
		t.Errorf("config %+v", c)
	}
	be := m.Backend()
	ctx := context.Background()
	if _, err := be.Prefill(ctx, []int32{10, 20, 30}, 0, nil); err != nil {
		t.Fatal(err)
	}
	logits, err := be.Logits(ctx, 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi float32 = logits[0], logits[0]
	for _, l := range logits {
		if math.IsNaN(float64(l)) || math.IsInf(float64(l), 0) {
			t.Fatalf("logit %v", l)
		}
		lo, hi = min(lo, l), max(hi, l)
	}
	if len(logits) != 512 || hi-lo < 0.1 {
		t.Errorf("%d logits in [%v, %v]", len(logits), lo, hi)
	}
}
