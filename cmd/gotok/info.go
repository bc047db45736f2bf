package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gotok/gguf"
	"gotok/model"
)

func newInfoCmd() *cobra.Command {
	var path string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info [-m MODEL] [--json]",
		Short: "Describe a GGUF model: architecture, hyper-parameters, tokenizer, tensors",
		Long: `info prints what a GGUF file holds: its architecture and hyper-parameters,
context length and RoPE settings, tokenizer, file type, and a table of its
tensors with their types, shapes and sizes. --json prints the same for scripts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := resolveModel(cmd.Context(), path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			f, err := gguf.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			info := describe(f)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			printInfo(cmd.OutOrStdout(), p, info)
			return nil
		},
	}
	addModelFlag(cmd, &path)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

type tensorRow struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Shape []uint64 `json:"shape"`
	Bytes uint64   `json:"bytes"`
}

type modelInfo struct {
	GGUFVersion  uint32        `json:"gguf_version"`
	Name         string        `json:"name,omitempty"`
	Architecture string        `json:"architecture"`
	FileType     string        `json:"file_type,omitempty"`
	Config       *model.Config `json:"config,omitempty"`
	ConfigError  string        `json:"config_error,omitempty"`
	Tokenizer    tokInfo       `json:"tokenizer"`
	ChatTemplate bool          `json:"chat_template"`
	Tensors      []tensorRow   `json:"tensors"`
	Params       uint64        `json:"params"`
	TensorBytes  uint64        `json:"tensor_bytes"`
	FileBytes    int64         `json:"file_bytes"`
}

type tokInfo struct {
	Model     string           `json:"model,omitempty"`
	Pre       string           `json:"pre,omitempty"`
	VocabSize int              `json:"vocab_size"`
	Merges    int              `json:"merges"`
	Special   map[string]int64 `json:"special_ids,omitempty"`
	AddBOS    *bool            `json:"add_bos_token,omitempty"`
	AddEOS    *bool            `json:"add_eos_token,omitempty"`
}

func describe(f *gguf.File) modelInfo {
	info := modelInfo{
		GGUFVersion:  f.Version,
		Name:         f.StringOr("general.name", ""),
		Architecture: f.StringOr("general.architecture", "?"),
		FileBytes:    f.Size(),
	}
	if ft, ok := f.Int("general.file_type"); ok {
		info.FileType = gguf.FileType(ft).String()
	}
	if c, err := model.ConfigFromMetadata(&f.Metadata); err != nil {
		info.ConfigError = err.Error()
	} else {
		if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Shape) == 2 {
			c.VocabSize = int(t.Shape[1])
		}
		_, hasOutput := f.Tensor("output.weight")
		c.TiedEmbeddings = !hasOutput
		info.Config = &c
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	merges, _ := f.Strings("tokenizer.ggml.merges")
	info.Tokenizer = tokInfo{
		Model:     f.StringOr("tokenizer.ggml.model", ""),
		Pre:       f.StringOr("tokenizer.ggml.pre", ""),
		VocabSize: len(toks),
		Merges:    len(merges),
		Special:   map[string]int64{},
	}
	for _, k := range []string{"bos", "eos", "eot", "eom", "unknown", "padding", "seperator"} {
		if id, ok := f.Int("tokenizer.ggml." + k + "_token_id"); ok && id >= 0 && id < int64(len(toks)) {
			info.Tokenizer.Special[k] = id
		}
	}
	if b, ok := f.Bool("tokenizer.ggml.add_bos_token"); ok {
		info.Tokenizer.AddBOS = &b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_eos_token"); ok {
		info.Tokenizer.AddEOS = &b
	}
	_, info.ChatTemplate = f.String("tokenizer.chat_template")
	for _, t := range f.Tensors {
		info.Tensors = append(info.Tensors, tensorRow{Name: t.Name, Type: t.Type.String(), Shape: t.Shape, Bytes: t.Size})
		info.Params += t.Elements()
		info.TensorBytes += t.Size
	}
	return info
}

func printInfo(w io.Writer, path string, info modelInfo) {
	fmt.Fprintf(w, "file:          %s (GGUF v%d, %s)\n", path, info.GGUFVersion, mib(uint64(info.FileBytes)))
	if info.Name != "" {
		fmt.Fprintf(w, "name:          %s\n", info.Name)
	}
	fmt.Fprintf(w, "architecture:  %s\n", info.Architecture)
	if info.FileType != "" {
		fmt.Fprintf(w, "file type:     %s\n", info.FileType)
	}
	fmt.Fprintf(w, "parameters:    %s (%d)\n", humanCount(info.Params), info.Params)
	if c := info.Config; c != nil {
		fmt.Fprintf(w, "layers:        %d\n", c.NumLayers)
		fmt.Fprintf(w, "embedding:     %d\n", c.Dim)
		fmt.Fprintf(w, "heads:         %d (KV heads %d, head dim %d)\n", c.NumHeads, c.NumKVHeads, c.HeadDim)
		fmt.Fprintf(w, "feed-forward:  %d\n", c.FFNDim)
		fmt.Fprintf(w, "vocabulary:    %d\n", c.VocabSize)
		fmt.Fprintf(w, "context:       %d\n", c.ContextLen)
		r := &c.Rope
		rot := "normal"
		if r.Neox {
			rot = "neox"
		}
		fmt.Fprintf(w, "rope:          base %g, %d dims, %s, freq scale %g", r.Base, r.Dim, rot, r.FreqScale)
		if r.Factors != nil {
			fmt.Fprintf(w, ", frequency factors %g…%g", r.Factors[0], r.Factors[len(r.Factors)-1])
		}
		if r.ExtFactor != 0 {
			fmt.Fprintf(w, ", YaRN (original context %d)", r.OrigContext)
		}
		if r.AttnFactor != 1 {
			fmt.Fprintf(w, ", magnitude %g", r.AttnFactor)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "rms epsilon:   %g\n", c.RMSEps)
		fmt.Fprintf(w, "tied output:   %v\n", c.TiedEmbeddings)
		if f := c.Features(); len(f) > 0 {
			fmt.Fprintf(w, "block:         %s\n", strings.Join(f, ", "))
		}
	} else {
		fmt.Fprintf(w, "config:        %s\n", info.ConfigError)
	}
	t := info.Tokenizer
	fmt.Fprintf(w, "tokenizer:     %s (pre %q), %d tokens, %d merges\n", t.Model, t.Pre, t.VocabSize, t.Merges)
	for _, k := range []string{"bos", "eos", "eot", "eom", "unknown", "padding", "seperator"} {
		if id, ok := t.Special[k]; ok {
			fmt.Fprintf(w, "  %-11s  %d\n", k+":", id)
		}
	}
	if t.AddBOS != nil {
		fmt.Fprintf(w, "  add bos:     %v\n", *t.AddBOS)
	}
	fmt.Fprintf(w, "chat template: %v\n", info.ChatTemplate)
	fmt.Fprintf(w, "\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tensor\ttype\tshape\tbytes\t")
	for _, r := range info.Tensors {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t\n", r.Name, r.Type, r.Shape, r.Bytes)
	}
	fmt.Fprintf(tw, "total: %d tensors\t\t%s params\t%d\t\n", len(info.Tensors), humanCount(info.Params), info.TensorBytes)
	tw.Flush()
}

func mib(n uint64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
