package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"gotok/hub"
)

func newRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm org/repo[:QUANT]...",
		Short: "Remove GGUF models from the Hugging Face cache",
		Long: `rm removes a model from the Hugging Face cache: with QUANT, the GGUF files of
that quantization (every part); without, every GGUF file of the repository.
Downloaded data no other file links to is deleted, and a repository left
empty goes whole. Nothing outside the cache directory is touched. rm refuses
while a pull of the same repository is under way.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := hub.OptionsFromEnv().CacheDir
			for _, name := range args {
				removed, err := hub.Remove(dir, name)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s (%d files)\n", name, len(removed))
			}
			return nil
		},
	}
}
