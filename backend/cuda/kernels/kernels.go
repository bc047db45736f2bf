// Package kernels holds the CUDA C++ kernels of the CUDA backend (*.cu, one
// op per file), their PTX and their machine code for the common GPUs
// (cubins for sm_80 and sm_90), compiled on a GPU machine by
// scripts/build-ptx.sh and embedded here, gzipped, so that building gotok
// needs no CUDA SDK. The driver loads a cubin as it is, and JIT-compiles
// the PTX on other GPUs.
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
	"slices"
	"strings"
)

//go:embed ptx/*.ptx.gz ptx/*.cubin.gz ptx/manifest.txt
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
	return file(op+"."+target+".ptx", dir)
}

// CubinArch is the machine code built for a device of compute capability
// major.minor: "sm80" for 8.x (binary compatible across the 8.x devices),
// "sm90" for 9.0; "" for the others, which load PTX.
func CubinArch(major, minor int) string {
	switch {
	case major == 8:
		return "sm80"
	case major == 9 && minor == 0:
		return "sm90"
	}
	return ""
}

// sm90aOps are the ops built for sm_90a alone (their source's first line
// is "// target: sm_90a", which scripts/build-ptx.sh reads): Hopper's
// wgmma, which no portable PTX target has. Only 9.0 devices load them.
var sm90aOps = [...]string{"gemm_wg"}

// SM90aOnly says whether op is built for sm_90a alone.
func SM90aOnly(op string) bool { return slices.Contains(sm90aOps[:], op) }

// Image returns op's module image for a device of compute capability
// major.minor: its machine code (a cubin, CubinArch) when there is one,
// which the driver loads as it is, else the PTX of Target(major), which
// the driver compiles: ~45 s for every kernel on an H200 the first time (the
// driver then caches the result), where the cubins load in about a second.
// dir is as for PTX; a dir without cubins gives PTX.
func Image(op string, major, minor int, dir string) ([]byte, error) {
	if SM90aOnly(op) {
		if major != 9 || minor != 0 {
			return nil, fmt.Errorf("kernels: %s is built for sm_90a only, not sm_%d%d", op, major, minor)
		}
		if b, err := file(op+".sm90a.cubin", dir); err == nil {
			return b, nil
		}
		return file(op+".sm90a.ptx", dir)
	}
	if arch := CubinArch(major, minor); arch != "" {
		if b, err := file(op+"."+arch+".cubin", dir); err == nil {
			return b, nil
		}
	}
	return PTX(op, Target(major), dir)
}

// file reads name from dir (plain or gzipped) or, with dir empty, from the
// embedded ptx directory (gzipped).
func file(name, dir string) ([]byte, error) {
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
		return nil, fmt.Errorf("kernels: nothing embedded for %s: %w", name, err)
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
