// Command gotok runs GGUF language models on the CPU or an NVIDIA GPU.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gotok:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gotok",
		Short: "gotok runs GGUF language models fast, on the CPU or an NVIDIA GPU",
		Long: `gotok loads GGUF models (llama family), tokenizes with the model's own
tokenizer and generates text, on the CPU in pure Go or on an NVIDIA GPU with
its own CUDA kernels.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newInfoCmd(),
		newGenCmd(),
		newQuantizeCmd(),
		newRunCmd(),
		newChatCmd(),
		newBenchCmd(),
		newPerplexityCmd(),
		newTokenizeCmd(),
		newServeCmd(),
		newPullCmd(),
		newListCmd(),
		newRmCmd(),
	)
	return root
}
