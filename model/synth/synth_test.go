package synth

import (
	"bytes"
	"testing"

	"gotok/gguf"
	"gotok/quant"
)

func write(t *testing.T, o Options) []byte {
	t.Helper()
	w, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDeterministic(t *testing.T) {
	o := Options{Shape: Presets["tiny"], Type: quant.Q4_0, EmbedType: quant.Q8_0, Seed: 9}
	a, b := write(t, o), write(t, o)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different files")
	}
	o.Seed = 10
	if bytes.Equal(a, write(t, o)) {
		t.Fatal("different seeds, same file")
	}
	f, err := gguf.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := f.Tensor("token_embd.weight"); e.Type != quant.Q8_0 {
		t.Errorf("token_embd is %s", e.Type)
	}
	if q, _ := f.Tensor("blk.1.attn_q.weight"); q.Type != quant.Q4_0 {
		t.Errorf("attn_q is %s", q.Type)
	}
}

func TestBadOptions(t *testing.T) {
	bad := []Options{
		{Shape: Shape{Layers: 1, Dim: 64, Heads: 3, KVHeads: 1, FFN: 64, Vocab: 300}, Type: quant.F32, EmbedType: quant.F32},
		{Shape: Shape{Layers: 1, Dim: 64, Heads: 4, KVHeads: 3, FFN: 64, Vocab: 300}, Type: quant.F32, EmbedType: quant.F32},
		{Shape: Shape{Layers: 1, Dim: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 100}, Type: quant.F32, EmbedType: quant.F32},
		{Shape: Presets["tiny"], Type: quant.IQ2_XXS, EmbedType: quant.Q8_0},
		{Shape: Shape{Layers: 1, Dim: 48, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300}, Type: quant.Q4_0, EmbedType: quant.Q8_0},
	}
	for i, o := range bad {
		w, err := Generate(o)
		if err == nil {
			var buf bytes.Buffer
			_, err = w.WriteTo(&buf)
		}
		if err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}
