package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
)

// addModelFlag adds -m/--model; modelPath resolves it.
func addModelFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "model", "m", "", "GGUF model file (default: $GOTOK_MODEL)")
}

var errNoModel = errors.New("no model given: pass -m MODEL.gguf or set GOTOK_MODEL (for example -m ../shared/models/stories260K.gguf)")

func modelPath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("GOTOK_MODEL"); env != "" {
		return env, nil
	}
	return "", errNoModel
}
