package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gotok/hub"
)

func newListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the GGUF models in the Hugging Face cache",
		Long: `list shows the GGUF models in the Hugging Face cache, whoever downloaded them
(gotok pull, huggingface-cli, llama.cpp): repository, quantization, size
(all parts of a multi-part model) and the path to pass to -m.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := hub.OptionsFromEnv().CacheDir
			models, err := hub.List(dir)
			if err != nil {
				return err
			}
			if len(models) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "gotok: no GGUF models in %s\n", dir)
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tQUANT\tSIZE\tPATH")
			for _, m := range models {
				q := m.Quant
				if q == "" {
					q = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Repo, q, humanBytes(m.Size), m.Path)
			}
			return tw.Flush()
		},
	}
}
