package main

import "github.com/spf13/cobra"

func newInfoCmd() *cobra.Command {
	return &cobra.Command{Use: "info", Short: "describe a GGUF model"}
}
