package kernels

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sourceHashes hashes the kernel sources in this directory, as
// scripts/build-ptx.sh does.
func sourceHashes(t *testing.T) map[string]string {
	t.Helper()
	var names []string
	for _, pat := range []string{"*.cu", "*.cuh"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m...)
	}
	sort.Strings(names)
	h := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		h[n] = hex.EncodeToString(s[:])
	}
	return h
}

// TestPTXIsFresh fails when a kernel source changed after its PTX was built:
// run scripts/build-ptx.sh on a GPU machine and commit its output.
func TestPTXIsFresh(t *testing.T) {
	man, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	src := sourceHashes(t)
	for name, sum := range src {
		got, ok := man[name]
		switch {
		case !ok:
			t.Errorf("%s is not in ptx/manifest.txt: rebuild the PTX (scripts/build-ptx.sh)", name)
		case got != sum:
			t.Errorf("%s changed since its PTX was built: rebuild the PTX (scripts/build-ptx.sh)", name)
		}
	}
	for name := range man {
		if _, ok := src[name]; !ok {
			t.Errorf("ptx/manifest.txt lists %s, which no longer exists: rebuild the PTX", name)
		}
	}
	for name := range src {
		op, ok := strings.CutSuffix(name, ".cu")
		if !ok {
			continue
		}
		targets := []string{"sm80", "sm90"}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if marked := bytes.HasPrefix(b, []byte("// target: sm_90a\n")); marked != SM90aOnly(op) {
			t.Errorf("%s: first line marks it sm_90a-only: %v, SM90aOnly: %v", name, marked, SM90aOnly(op))
		}
		if SM90aOnly(op) {
			targets = []string{"sm90a"}
		}
		for _, target := range targets {
			b, err := PTX(op, target, "")
			if err != nil {
				t.Error(err)
				continue
			}
			if !strings.Contains(string(b), ".entry") {
				t.Errorf("%s.%s.ptx has no kernel entry", op, target)
			}
			b, err = file(op+"."+target+".cubin", "")
			if err != nil {
				t.Error(err)
				continue
			}
			if !bytes.HasPrefix(b, []byte("\x7fELF")) {
				t.Errorf("%s.%s.cubin is not an ELF image", op, target)
			}
		}
	}
}

// TestImage checks which image a device gets: the cubin of its
// architecture where one is built, else PTX; from a directory that has
// only PTX, PTX.
func TestImage(t *testing.T) {
	for _, tc := range []struct {
		major, minor int
		cubin        string
	}{{8, 0, "sm80"}, {8, 6, "sm80"}, {8, 9, "sm80"}, {9, 0, "sm90"}, {10, 0, ""}, {12, 0, ""}, {7, 5, ""}} {
		if got := CubinArch(tc.major, tc.minor); got != tc.cubin {
			t.Errorf("CubinArch(%d, %d) = %q, want %q", tc.major, tc.minor, got, tc.cubin)
		}
		b, err := Image("embed", tc.major, tc.minor, "")
		if err != nil {
			t.Fatal(err)
		}
		if elf := bytes.HasPrefix(b, []byte("\x7fELF")); elf != (tc.cubin != "") {
			t.Errorf("sm_%d%d: the embedded image is a cubin: %v, want %v", tc.major, tc.minor, elf, tc.cubin != "")
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "embed.sm90.ptx"), []byte("// ptx .entry"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := Image("embed", 9, 0, dir); err != nil || string(b) != "// ptx .entry" {
		t.Errorf("Image from a directory of PTX = %q, %v", b, err)
	}
	if _, err := Image("nothing", 9, 0, dir); err == nil {
		t.Error("Image of a missing op: no error")
	}
	for _, op := range sm90aOps {
		b, err := Image(op, 9, 0, "")
		if err != nil || !bytes.HasPrefix(b, []byte("\x7fELF")) {
			t.Errorf("Image(%s, 9.0): not a cubin (%v)", op, err)
		}
		for _, cc := range [][2]int{{8, 0}, {8, 9}, {10, 0}, {12, 0}} {
			if _, err := Image(op, cc[0], cc[1], ""); err == nil {
				t.Errorf("Image(%s, %d.%d): no error for an sm_90a-only op", op, cc[0], cc[1])
			}
		}
	}
}

func TestTarget(t *testing.T) {
	for major, want := range map[int]string{7: "sm80", 8: "sm80", 9: "sm90", 10: "sm90", 12: "sm90"} {
		if got := Target(major); got != want {
			t.Errorf("Target(%d) = %s, want %s", major, got, want)
		}
	}
}

func TestParseManifest(t *testing.T) {
	m, err := parseManifest([]byte("# nvcc 13.0\nabc  x.cu\n\ndef y.cuh\n"))
	if err != nil || len(m) != 2 || m["x.cu"] != "abc" || m["y.cuh"] != "def" {
		t.Errorf("parseManifest = %v, %v", m, err)
	}
	if _, err := parseManifest([]byte("only-one-field\n")); err == nil {
		t.Error("a malformed manifest line was accepted")
	}
}
