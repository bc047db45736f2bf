package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"gotok/gguf"
	"gotok/quant"
	"gotok/quant/mix"
)

func newQuantizeCmd() *cobra.Command {
	var (
		typ          string
		allowRequant bool
		pure         bool
	)
	cmd := &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf --type TYPE",
		Short: "Requantize a model's 2-D weights to another type or llama.cpp mix",
		Long: `quantize converts every 2-D weight tensor whose row length fits the target
type's block size (e.g. stories260K's F32 weights to Q8_0 or Q4_0); other
tensors (norms, rows of the wrong length) keep their type, said on stderr.

--type names a type (f32, f16, bf16, q4_0, …) or one of llama.cpp's mixes:
` + strings.Join(mix.Names(), ", ") + `
(q3_k, q4_k and q5_k are q3_k_m, q4_k_m and q5_k_m, as in llama-quantize).
A mix gives each tensor the type
llama-quantize gives it: the output head Q6_K, some layers' V and down
projections Q5_K or Q6_K, rows that do not fit 256-element blocks a 32-element
type. The plain types that name a mix (q4_0, q8_0, …) follow its rules too
(a Q6_K head); --pure gives every tensor the one type, as llama-quantize's
--pure does.

Tensors that are already quantized keep their type unless
--allow-requantize is given (requantizing loses quality, as in llama.cpp).
Q2_K–Q6_K, IQ4_NL and IQ4_XS search each sub-block's scale (and min) for
the least squared error, as llama-quantize does: on test-256's weights
their error is at or below llama-quantize's. The IQ1–IQ3 types cannot be
written yet. The output is written atomically: a failed run leaves no file
behind.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, isMix := mix.Lookup(typ)
			t := m.Base
			if !isMix {
				var err error
				if t, err = quant.ParseType(typ); err != nil {
					return fmt.Errorf("quantize: unknown type %q (types: f32, f16, bf16 and the quantized ones; mixes: %s)",
						typ, strings.Join(mix.Names(), ", "))
				}
			}
			if !quant.QuantizedSupported(t) {
				return fmt.Errorf("quantize: cannot write type %s", t)
			}
			src, err := gguf.Open(args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			typeOf := func(*gguf.TensorInfo) quant.Type { return t }
			if isMix && !pure {
				md := mixModel(src)
				typeOf = func(ti *gguf.TensorInfo) quant.Type { return m.Type(ti.Name, int(ti.Shape[0]), md) }
			}
			w := gguf.NewWriter()
			w.CopyMetadata(&src.Metadata)
			if isMix {
				w.Set("general.file_type", m.FileType)
			} else if ft, ok := gguf.FileTypeOf(t); ok {
				w.Set("general.file_type", uint32(ft))
			}
			counts := map[quant.Type]int{}
			progress := newQuantizeProgress(cmd.ErrOrStderr(), len(src.Tensors))
			for _, ti := range src.Tensors {
				data, tt, why := ti.Data, ti.Type, ""
				if len(ti.Shape) == 2 {
					tt = typeOf(&ti)
					data, why = convert(&ti, tt, allowRequant)
				} else {
					why = "not a matrix"
				}
				progress()
				if why != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "keep %-28s %-5s %v: %s\n", ti.Name, ti.Type, ti.Shape, why)
					w.AddTensor(ti.Name, ti.Type, ti.Shape, ti.Data)
					continue
				}
				w.AddTensor(ti.Name, tt, ti.Shape, data)
				counts[tt]++
			}
			if err := w.WriteFile(args[1]); err != nil {
				return err
			}
			var parts []string
			converted := 0
			for tt, n := range counts {
				parts = append(parts, fmt.Sprintf("%d %s", n, tt))
				converted += n
			}
			slices.Sort(parts)
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d of %d tensors converted (%s)\n", args[1], converted, len(src.Tensors),
				strings.Join(parts, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "target type (f16, bf16, q4_0, q8_0, q4_k, iq4_xs, …) or llama.cpp mix (q4_k_m, q5_k_m, q6_k, …)")
	cmd.Flags().BoolVar(&allowRequant, "allow-requantize", false, "also convert tensors that are already quantized")
	cmd.Flags().BoolVar(&pure, "pure", false, "give every tensor the --type's base type: no mix rules")
	cmd.MarkFlagRequired("type")
	return cmd
}

// mixModel reads what the mix rules need of the model in f.
func mixModel(f *gguf.File) mix.Model {
	arch := f.Metadata.StringOr("general.architecture", "llama")
	_, hasOutput := f.Tensor("output.weight")
	return mix.Model{
		Arch:    arch,
		Layers:  int(f.Metadata.IntOr(arch+".block_count", 0)),
		Heads:   int(f.Metadata.IntOr(arch+".attention.head_count", 0)),
		KVHeads: int(f.Metadata.IntOr(arch+".attention.head_count_kv", f.Metadata.IntOr(arch+".attention.head_count", 0))),
		Tied:    !hasOutput,
	}
}

// newQuantizeProgress returns a step function over n tensors: a bar on a
// terminal, nothing elsewhere (the per-tensor lines and the summary say
// what happened).
func newQuantizeProgress(w io.Writer, n int) func() {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	bar := progressbar.NewOptions(n, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("quantize"),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	return func() { bar.Add(1) }
}

// convert requantizes one tensor, or says why it keeps its type.
func convert(ti *gguf.TensorInfo, t quant.Type, allowRequant bool) ([]byte, string) {
	float := ti.Type == quant.F32 || ti.Type == quant.F16 || ti.Type == quant.BF16
	switch {
	case len(ti.Shape) != 2:
		return nil, "not a matrix"
	case !strings.HasSuffix(ti.Name, ".weight"):
		return nil, "not a weight"
	case ti.Type == t:
		return nil, "already " + t.String()
	case !float && !allowRequant:
		return nil, "already quantized (--allow-requantize converts it)"
	case ti.Shape[0]%uint64(t.BlockSize()) != 0:
		return nil, fmt.Sprintf("row length %d is not a multiple of %d", ti.Shape[0], t.BlockSize())
	}
	n := ti.Elements()
	x := make([]float32, n)
	if err := quant.Dequantize(ti.Type, ti.Data, x); err != nil {
		return nil, err.Error()
	}
	size, err := t.RowBytes(n)
	if err != nil {
		return nil, err.Error()
	}
	out := make([]byte, size)
	if err := quant.Quantize(t, x, out); err != nil {
		return nil, err.Error()
	}
	return out, ""
}
