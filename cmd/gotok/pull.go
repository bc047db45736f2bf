package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"gotok/hub"
)

func newPullCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pull org/repo[:QUANT]...",
		Short: "Download GGUF models from Hugging Face into its cache",
		Long: `pull downloads a GGUF model from a Hugging Face repository into the Hugging
Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub),
where huggingface-cli and llama.cpp find it too, and prints its path.

QUANT picks the file whose name holds it (case-insensitive, e.g. Q4_K_M,
q8_0, IQ4_XS); without it, Q4_K_M, else the repository's first GGUF file.
All parts of a multi-part model are fetched. An interrupted download resumes
where it stopped; each file is checked against the sha256 the Hub lists
before it is used. HF_TOKEN is sent for gated repositories; HF_ENDPOINT
points at a mirror; GOTOK_OFFLINE=1 or HF_HUB_OFFLINE=1 uses the cache only.

run, chat, bench, info and tokenize take the same names with -m and pull on
first use.

Example:
  gotok pull bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := hub.OptionsFromEnv()
			o.Progress = newProgress(cmd.ErrOrStderr())
			for _, name := range args {
				m, err := hub.Pull(cmd.Context(), name, o)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "gotok: %s: %s, %s, %s\n", m.Name(), m.Files[0], humanBytes(m.Size), partsNote(m))
				fmt.Fprintln(cmd.OutOrStdout(), m.Path)
			}
			return nil
		},
	}
}

func partsNote(m hub.Model) string {
	if len(m.Files) > 1 {
		return fmt.Sprintf("%d parts at commit %.12s", len(m.Files), m.Commit)
	}
	return fmt.Sprintf("commit %.12s", m.Commit)
}
