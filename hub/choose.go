package hub

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DefaultQuant is the quantization picked when a name gives none, as
// llama.cpp's -hf does; when a repository has no such file, its first GGUF
// file is taken.
const DefaultQuant = "Q4_K_M"

// splitRE matches the part suffix of a multi-part GGUF file, as
// llama.cpp's gguf-split writes it: "name-00001-of-00003.gguf". Like
// isModelFile, it takes the extension in any case.
var splitRE = regexp.MustCompile(`(?i)^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// splitPart returns the stem, the part number (1-based) and the number of
// parts of a multi-part file name, or ok false for a single file.
func splitPart(name string) (stem string, part, count int, ok bool) {
	m := splitRE.FindStringSubmatch(name)
	if m == nil {
		return "", 0, 0, false
	}
	part, _ = strconv.Atoi(m[2])
	count, _ = strconv.Atoi(m[3])
	if part < 1 || count < 1 || part > count {
		return "", 0, 0, false
	}
	return m[1], part, count, true
}

// partNames returns the names of every part, in order, of the multi-part
// set name belongs to, or name alone for a single file.
func partNames(name string) []string {
	stem, _, count, ok := splitPart(name)
	if !ok {
		return []string{name}
	}
	ext := name[len(name)-len(".gguf"):] // as the set spells it
	parts := make([]string, count)
	for i := range parts {
		parts[i] = fmt.Sprintf("%s-%05d-of-%05d%s", stem, i+1, count, ext)
	}
	return parts
}

// isModelFile says whether a repository file is a model GGUF: a .gguf that
// is not a vision projector (mmproj) and, of a multi-part set, the first part.
func isModelFile(name string) bool {
	base := strings.ToLower(path.Base(name))
	if !strings.HasSuffix(base, ".gguf") || strings.Contains(base, "mmproj") {
		return false
	}
	if _, part, _, ok := splitPart(name); ok && part != 1 {
		return false
	}
	return true
}

// matchesQuant says whether the file name holds quant as a whole token,
// case-insensitively: "Q4_K" does not match "Q4_K_M", nor "Q4_XS" "IQ4_XS".
func matchesQuant(name, quant string) bool {
	lname, lq := strings.ToLower(name), strings.ToLower(quant)
	for i := 0; ; {
		j := strings.Index(lname[i:], lq)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(lq)
		before := start == 0 || !isWordRune(rune(lname[start-1]))
		after := end == len(lname) || !isWordRune(rune(lname[end]))
		if before && after {
			return true
		}
		i = start + 1
	}
}

// chooseFile picks the model file for quant from a repository's file
// names: the first (in sorted order) model file naming the quantization;
// with no quant given, DefaultQuant or else the first model file. For a
// multi-part model it returns every part in order, the first part first.
// fallback false turns off the first-file fallback (used on the cache,
// where the Hub may hold a better match).
func chooseFile(files []string, quant string, fallback bool) ([]string, error) {
	sorted := slices.Sorted(slices.Values(files))
	var models []string
	for _, f := range sorted {
		if isModelFile(f) {
			models = append(models, f)
		}
	}
	want := quant
	if want == "" {
		want = DefaultQuant
	}
	first := ""
	for _, f := range models {
		if matchesQuant(f, want) {
			first = f
			break
		}
	}
	if first == "" && quant == "" && fallback && len(models) > 0 {
		first = models[0]
	}
	if first == "" {
		if len(models) == 0 {
			return nil, fmt.Errorf("no GGUF model file")
		}
		return nil, fmt.Errorf("no GGUF file for quantization %s (have %s)", want, strings.Join(quantsOf(models), ", "))
	}
	parts := partNames(first)
	for _, p := range parts {
		if _, found := slices.BinarySearch(sorted, p); !found {
			return nil, fmt.Errorf("multi-part model %s: part %s is missing", first, p)
		}
	}
	return parts, nil
}

func quantsOf(files []string) []string {
	var qs []string
	for _, f := range files {
		q := QuantOf(f)
		if q == "" {
			q = path.Base(f)
		}
		if !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	return qs
}

// quantRE finds a GGML quantization name in a file name: Q4_K_M, IQ4_XS,
// Q8_0, UD-Q4_K_XL's Q4_K_XL, F16, BF16, ...
var quantRE = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])((?:I?Q[1-8](?:_[a-z0-9]+)*)|TQ[12]_0|BF16|F16|F32|MXFP4(?:_MOE)?)(?:[^a-z0-9_]|$)`)

// QuantOf returns the quantization a GGUF file name states ("Q4_K_M" for
// "Llama-3.2-1B-Instruct-Q4_K_M.gguf"), upper-cased, or "" if none.
func QuantOf(name string) string {
	base := path.Base(name)
	if stem, _, _, ok := splitPart(base); ok {
		base = stem
	}
	base = strings.TrimSuffix(base, path.Ext(base))
	m := quantRE.FindAllStringSubmatch(base, -1)
	if m == nil {
		return ""
	}
	return strings.ToUpper(m[len(m)-1][1])
}
