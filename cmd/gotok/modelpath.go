package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"gotok/hub"
)

const modelFlagHelp = "GGUF model file, or org/repo[:QUANT] on Hugging Face, pulled on first use (default: $GOTOK_MODEL)"

// addModelFlag adds -m/--model; resolveModel resolves it.
func addModelFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "model", "m", "", modelFlagHelp)
}

var errNoModel = errors.New("no model given: pass -m MODEL.gguf or -m org/repo:QUANT, or set GOTOK_MODEL (for example -m ../shared/models/stories260K.gguf)")

// resolveModel returns the file to load for -m (or $GOTOK_MODEL): a value
// that names an existing file is that file; a Hugging Face name,
// org/repo[:QUANT], is found in the Hugging Face cache or pulled into it
// (with a progress display on stderr); anything else, a name ending in
// .gguf included, is returned as a path, for the loader to report.
func resolveModel(ctx context.Context, flag string, stderr io.Writer) (string, error) {
	name := flag
	if name == "" {
		name = os.Getenv("GOTOK_MODEL")
	}
	if name == "" {
		return "", errNoModel
	}
	if _, err := os.Stat(name); err == nil {
		return name, nil
	}
	// A name ending in .gguf is a file path mistyped, not a repository.
	if strings.HasSuffix(strings.ToLower(name), ".gguf") && !strings.Contains(name, ":") {
		return name, nil
	}
	if _, err := hub.ParseName(name); err != nil {
		return name, nil
	}
	o := hub.OptionsFromEnv()
	o.Progress = newProgress(stderr)
	path, err := hub.Resolve(ctx, name, o)
	if errors.Is(err, hub.ErrNotFound) {
		return "", fmt.Errorf("%s: no such file, and %w", name, err)
	}
	return path, err
}
