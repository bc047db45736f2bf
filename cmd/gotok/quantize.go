package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"gotok/gguf"
	"gotok/quant"
)

func newQuantizeCmd() *cobra.Command {
	var (
		typ          string
		allowRequant bool
	)
	cmd := &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf --type TYPE",
		Short: "Requantize a model's 2-D weights to another type",
		Long: `quantize converts every 2-D weight tensor whose row length fits the target
type's block size (e.g. stories260K's F32 weights to Q8_0 or Q4_0); other
tensors (norms, rows of the wrong length) keep their type, said on stderr.
Tensors that are already quantized keep their type too unless
--allow-requantize is given (requantizing loses quality, as in llama.cpp).
Q4_K, Q5_K and Q6_K are encoded with a plain per-sub-block range rounding,
IQ4_NL and IQ4_XS with the nearest table value: a little less accurate than
llama-quantize's search (fine for tests, not for shipping a model). The output is written atomically: a failed run leaves no file behind.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := quant.ParseType(typ)
			if err != nil {
				return err
			}
			if !quant.QuantizedSupported(t) {
				return fmt.Errorf("quantize: cannot write type %s", t)
			}
			src, err := gguf.Open(args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			w := gguf.NewWriter()
			w.CopyMetadata(&src.Metadata)
			if ft, ok := gguf.FileTypeOf(t); ok {
				w.Set("general.file_type", uint32(ft))
			}
			converted := 0
			for _, ti := range src.Tensors {
				data, why := convert(&ti, t, allowRequant)
				if why != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "keep %-28s %-5s %v: %s\n", ti.Name, ti.Type, ti.Shape, why)
					data = ti.Data
					w.AddTensor(ti.Name, ti.Type, ti.Shape, data)
					continue
				}
				w.AddTensor(ti.Name, t, ti.Shape, data)
				converted++
			}
			if err := w.WriteFile(args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d of %d tensors as %s\n", args[1], converted, len(src.Tensors), t)
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "target type: f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0")
	cmd.Flags().BoolVar(&allowRequant, "allow-requantize", false, "also convert tensors that are already quantized")
	cmd.MarkFlagRequired("type")
	return cmd
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
