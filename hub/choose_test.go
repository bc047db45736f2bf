package hub

import (
	"slices"
	"testing"
)

func TestChooseFile(t *testing.T) {
	files := []string{
		"README.md",
		"model-IQ4_XS.gguf",
		"model-Q4_K.gguf",
		"model-Q4_K_S.gguf",
		"model-q4_k_m.gguf",
		"mmproj-model-f16.gguf",
		"model-f16.gguf",
		"Q8_0/model-Q8_0-00002-of-00002.gguf",
		"Q8_0/model-Q8_0-00001-of-00002.gguf",
	}
	for quant, want := range map[string][]string{
		"Q4_K_M": {"model-q4_k_m.gguf"},
		"":       {"model-q4_k_m.gguf"},
		"q4_k":   {"model-Q4_K.gguf"},
		"Q4_K_S": {"model-Q4_K_S.gguf"},
		"IQ4_XS": {"model-IQ4_XS.gguf"},
		"F16":    {"model-f16.gguf"},
		"Q8_0":   {"Q8_0/model-Q8_0-00001-of-00002.gguf", "Q8_0/model-Q8_0-00002-of-00002.gguf"},
	} {
		got, err := chooseFile(files, quant, true)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("quant %q: %v, %v; want %v", quant, got, err, want)
		}
	}
	for _, quant := range []string{"Q4", "XS", "Q2_K", "mmproj"} {
		if got, err := chooseFile(files, quant, true); err == nil {
			t.Errorf("quant %q chose %v", quant, got)
		}
	}
	// No Q4_K_M: the first model file, or nothing without the fallback.
	other := []string{"b-Q8_0.gguf", "a-Q6_K.gguf", "mmproj-a.gguf"}
	if got, err := chooseFile(other, "", true); err != nil || got[0] != "a-Q6_K.gguf" {
		t.Errorf("fallback: %v, %v", got, err)
	}
	if _, err := chooseFile(other, "", false); err == nil {
		t.Error("no fallback: chose a file")
	}
	// A split set spelled .GGUF is a split set, as isModelFile takes it.
	upper := []string{"M-Q8_0-00002-of-00002.GGUF", "M-Q8_0-00001-of-00002.GGUF"}
	if got, err := chooseFile(upper, "Q8_0", true); err != nil || !slices.Equal(got, []string{upper[1], upper[0]}) {
		t.Errorf("upper-case split set: %v, %v", got, err)
	}
	if _, err := chooseFile([]string{"config.json"}, "", true); err == nil {
		t.Error("no GGUF: chose a file")
	}
}

func TestQuantOf(t *testing.T) {
	for name, want := range map[string]string{
		"Llama-3.2-1B-Instruct-Q4_K_M.gguf":        "Q4_K_M",
		"tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf":     "Q4_K_M",
		"qwen2.5-0.5b-instruct-q8_0.gguf":          "Q8_0",
		"Qwen3-0.6B-UD-Q4_K_XL.gguf":               "Q4_K_XL",
		"Model-IQ4_XS.gguf":                        "IQ4_XS",
		"gemma-3-1b-it-BF16.gguf":                  "BF16",
		"Q8_0/Big-Q8_0-00001-of-00003.gguf":        "Q8_0",
		"stories260K.gguf":                         "",
		"Meta-Llama-3.1-8B-Instruct-Q4_0_4_4.gguf": "Q4_0_4_4",
		"SmolLM2-135M-Instruct-f16.gguf":           "F16",
	} {
		if got := QuantOf(name); got != want {
			t.Errorf("QuantOf(%q) = %q, want %q", name, got, want)
		}
	}
}
