// Package kernels holds the CUDA C++ kernels of the CUDA backend (*.cu, one
// op per file) and their PTX, compiled on a GPU machine by
// scripts/build-ptx.sh and embedded here, gzipped (PTX is verbose text, a
// fifth of the size compressed), so that building gotok needs no CUDA SDK.
// The driver JIT-compiles the PTX for the device at load.
package kernels

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

//go:embed ptx/*.ptx.gz ptx/manifest.txt
var ptxFS embed.FS

// Manifest returns the embedded manifest: source file name → sha256 (hex)
// of the sources the embedded PTX was compiled from.
func Manifest() (map[string]string, error) {
	b, err := ptxFS.ReadFile("ptx/manifest.txt")
	if err != nil {
		return nil, fmt.Errorf("kernels: no PTX manifest embedded (run scripts/build-ptx.sh on a GPU machine): %w", err)
	}
	return parseManifest(b)
}

func parseManifest(b []byte) (map[string]string, error) {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("kernels: bad manifest line %q", line)
		}
		m[f[1]] = f[0]
	}
	return m, sc.Err()
}

// Ops lists the kernel modules: one per .cu source in the manifest.
func Ops() ([]string, error) {
	m, err := Manifest()
	if err != nil {
		return nil, err
	}
	var ops []string
	for name := range m {
		if op, ok := strings.CutSuffix(name, ".cu"); ok {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// Target returns the PTX flavour for a device of compute capability major:
// "sm90" (with programmatic dependent launch) on Hopper and newer, else "sm80".
func Target(major int) string {
	if major >= 9 {
		return "sm90"
	}
	return "sm80"
}

// PTX returns op's PTX for target. When dir is not empty the file is read
// from there instead (fresh nvcc output on a GPU machine, before it is
// committed: NAME.ptx, or NAME.ptx.gz as committed).
func PTX(op, target, dir string) ([]byte, error) {
	name := op + "." + target + ".ptx"
	if dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			return b, nil
		}
		gz, gerr := os.ReadFile(filepath.Join(dir, name+".gz"))
		if gerr != nil {
			return nil, fmt.Errorf("kernels: %w", err)
		}
		return gunzip(name, gz)
	}
	gz, err := ptxFS.ReadFile("ptx/" + name + ".gz")
	if err != nil {
		return nil, fmt.Errorf("kernels: no embedded PTX for %s: %w", name, err)
	}
	return gunzip(name, gz)
}

func gunzip(name string, gz []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("kernels: %s: %w", name, err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("kernels: %s: %w", name, err)
	}
	return b, nil
}
