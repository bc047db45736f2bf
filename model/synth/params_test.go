package synth

import (
	"testing"

	"gotok/gguf"
	"gotok/quant"
)

// The published sizes of the models the presets copy.
func TestPresetParams(t *testing.T) {
	for _, c := range []struct {
		preset string
		want   int64
	}{
		{"llama-1b", 1_235_814_400},  // Llama-3.2-1B
		{"llama-8b", 8_030_261_248},  // Llama-3.1-8B
		{"smollm-135m", 134_515_008}, // SmolLM2-135M
	} {
		s := Presets[c.preset]
		if got := s.Params(s.Vocab); got != c.want {
			t.Errorf("%s: %d weights, want %d", c.preset, got, c.want)
		}
	}
}

// Params counts what Generate writes.
func TestParamsMatchGenerate(t *testing.T) {
	for _, name := range []string{"tiny", "test-256"} {
		s := Presets[name]
		f, err := gguf.Parse(write(t, Options{Shape: s, Type: quant.F16, EmbedType: quant.F16, Seed: 1}))
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, ti := range f.Tensors {
			n += int64(ti.Elements())
		}
		if got := s.Params(s.Vocab); got != n {
			t.Errorf("%s: Params says %d, the file holds %d", name, got, n)
		}
	}
}

// test-256's rows all fit a K-quant's 256-element super-blocks.
func TestTest256RowsFitKQuants(t *testing.T) {
	f, err := gguf.Parse(write(t, Options{Shape: Presets["test-256"], Type: quant.F16, EmbedType: quant.F16, Seed: 1}))
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors {
		if len(ti.Shape) == 2 && ti.Shape[0]%256 != 0 {
			t.Errorf("%s has rows of %d", ti.Name, ti.Shape[0])
		}
	}
	if _, ok := f.Tensor("output.weight"); !ok {
		t.Error("test-256 has no output.weight: llama-quantize's output rules go unexercised")
	}
}
