package tokenizer

import "fmt"

// preTokenizer is what a tokenizer.ggml.pre name selects for byte-level BPE:
// the splitting steps and llama.cpp's per-name defaults.
type preTokenizer struct {
	name  string
	steps []splitStep
	// ignoreMerges: a piece that is a token as a whole is emitted as that
	// token without merging (Llama 3).
	ignoreMerges bool
	// addBOS is llama.cpp's default for add_bos_token when the metadata lacks it.
	addBOS bool
}

func llama3Step(text string, start, end int, out []int) []int {
	return splitLlama3(text, start, end, out, 3)
}

func qwen2Step(text string, start, end int, out []int) []int {
	return splitLlama3(text, start, end, out, 1)
}

// newPreTokenizer returns the pre-tokenizer llama.cpp uses for name (its
// llama_vocab::impl::load and llm_tokenizer_bpe). Names llama.cpp does not
// know are an error, never a guess.
func newPreTokenizer(name string) (*preTokenizer, error) {
	p := &preTokenizer{name: name}
	var patterns []string // regexp2 steps, for the rarer pre-tokenizers
	switch name {
	case "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4",
		// GPT-NeoX's tokenizer is the plain GPT-2 byte-level pre-tokenizer
		// (OLMo reuses it); llama.cpp files it under "olmo".
		"gpt-neox":
		p.steps = []splitStep{splitGPT2}
	case "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b":
		p.steps = []splitStep{splitNumbers, splitGPT2}
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2":
		p.steps = []splitStep{llama3Step}
		p.ignoreMerges = true
		p.addBOS = true
	case "dbrx", "smaug-bpe":
		p.steps = []splitStep{llama3Step}
	case "qwen2", "deepseek-r1-qwen", "megrez", "stablelm2":
		p.steps = []splitStep{qwen2Step}
	case "default":
		patterns = []string{`[\p{P}\$\+<=>\^~\|]+`, "gpt2", `\p{N}+`, `[0-9][0-9][0-9]`}
	case "falcon":
		patterns = []string{"[\\p{P}\\$\\+<=>\\^~\\|`]+", "gpt2", `[0-9][0-9][0-9]`}
	case "deepseek-llm":
		patterns = []string{"[\r\n]", regexDeepSeekLLMLetters, regexDeepSeekLLMPunct, `\s+\z`, regexCJK, `\p{N}+`}
	case "deepseek-coder":
		patterns = []string{"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, regexCJK, `\p{N}`}
	default:
		return nil, fmt.Errorf("tokenizer: unknown pre-tokenizer %q (tokenizer.ggml.pre)", name)
	}
	for _, pat := range patterns {
		if pat == "gpt2" { // llama.cpp too runs its hand-written GPT-2 splitter here
			p.steps = append(p.steps, splitGPT2)
			continue
		}
		step, err := regexpStep(pat)
		if err != nil {
			return nil, err
		}
		p.steps = append(p.steps, step)
	}
	return p, nil
}
