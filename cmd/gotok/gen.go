package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gotok/gguf"
	"gotok/model/synth"
	"gotok/quant"
	"gotok/tokenizer"
)

func newGenCmd() *cobra.Command {
	var (
		out, preset, typ, tok, arch string
		seed                        uint64
		layers                      int
	)
	cmd := &cobra.Command{
		Use:   "gen -o OUT.gguf --preset NAME [--arch llama] [--layers N] [--type q4_0] [--tokenizer FILE] [--seed N]",
		Short: "Write a seeded llama model with random weights, for tests and benchmarks",
		Long: `gen writes a deterministic llama model with random weights in the shape of a
real one: the same seed gives the same file. Linear weights take --type
(default q4_0) and token_embd is Q8_0 for quantized types, as in llama.cpp's
files. The tokenizer comes from a Hugging Face tokenizer.json (byte-level BPE)
or another GGUF file's vocabulary; without one, a small byte-level vocabulary.

Presets: ` + strings.Join(synth.PresetNames(), ", ") + `.
--arch writes another family's block in the preset's shape (its tensors,
and metadata that switches on each of its features): ` + strings.Join(synthArchs(), ", ") + `.

Example:
  gotok gen -o smollm.gguf --preset smollm-135m \
      --tokenizer ../shared/tokenizer-tests/smollm2-135m-instruct/tokenizer.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("gen: -o OUT.gguf is required")
			}
			shape, ok := synth.Presets[preset]
			if !ok {
				return fmt.Errorf("gen: unknown preset %q (have %s)", preset, strings.Join(synth.PresetNames(), ", "))
			}
			if _, ok := synth.Archs[arch]; !ok {
				return fmt.Errorf("gen: unknown architecture %q (have %s)", arch, strings.Join(synthArchs(), ", "))
			}
			shape.Arch = arch
			if layers > 0 {
				shape.Layers = layers
			}
			t, err := quant.ParseType(typ)
			if err != nil {
				return fmt.Errorf("gen: %w", err)
			}
			start := time.Now()
			o := synth.Options{Shape: shape, Name: preset, Type: t, EmbedType: synth.DefaultEmbedType(t), Seed: seed}
			if tok != "" {
				o.Tokenizer, err = tokenizerSource(tok)
				if err != nil {
					return err
				}
			}
			w, err := synth.Generate(o)
			if err != nil {
				return err
			}
			if err := w.WriteFile(out); err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: preset %s, %s, %s weights, seed %d, %s in %v\n",
				out, preset, arch, t, seed, mib(uint64(st.Size())), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output GGUF file")
	f.StringVar(&preset, "preset", "smollm-135m", "model shape: "+strings.Join(synth.PresetNames(), ", "))
	f.StringVar(&arch, "arch", "llama", "architecture: "+strings.Join(synthArchs(), ", "))
	f.StringVar(&typ, "type", "q4_0", "type of the linear weights: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0")
	f.StringVar(&tok, "tokenizer", "", "tokenizer: an HF tokenizer.json or a GGUF file whose vocabulary to copy")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.IntVar(&layers, "layers", 0, "number of layers (0: the preset's)")
	return cmd
}

func synthArchs() []string {
	var names []string
	for n := range synth.Archs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// tokenizerSource returns a function that writes the tokenizer metadata taken
// from path (an HF tokenizer.json or a GGUF file) and reports the vocab size.
func tokenizerSource(path string) (func(w *gguf.Writer) (int, error), error) {
	if strings.HasSuffix(strings.ToLower(path), ".json") {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		v, err := tokenizer.ImportHF(data)
		if err != nil {
			return nil, fmt.Errorf("gen: %s: %w", path, err)
		}
		return func(w *gguf.Writer) (int, error) {
			v.SetMetadata(w)
			return len(v.Tokens), nil
		}, nil
	}
	src, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gen: tokenizer: %w", err)
	}
	// Parsed metadata is copied out of the mapping: the file can close now.
	defer src.Close()
	toks, ok := src.Strings("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("gen: %s has no tokenizer.ggml.tokens", path)
	}
	meta := &src.Metadata
	return func(w *gguf.Writer) (int, error) {
		tokenizer.CopyMetadata(meta, w)
		return len(toks), nil
	}, nil
}
