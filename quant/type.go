// Package quant holds the GGML tensor element formats: their exact block
// layouts, dequantization to float32, quantization with llama.cpp's reference
// rounding, and the CPU dot products the inference engine is built on.
package quant

import (
	"fmt"
	"math"
)

// Type is a GGML tensor type id, as stored in GGUF tensor infos.
type Type uint32

// GGML type ids. The numbering is ggml's and must never change; ids that ggml
// retired (4, 5, 31–33) are absent.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// QK_K is the super-block size of the K-quants.
const QK_K = 256

type typeInfo struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block
}

// typeCount bounds the type ids; types is indexed by id so that the size
// lookups on hot paths are an array load, not a map lookup.
const typeCount = 40

var types = [typeCount]typeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 18},
	Q4_1:    {"Q4_1", 32, 20},
	Q5_0:    {"Q5_0", 32, 22},
	Q5_1:    {"Q5_1", 32, 24},
	Q8_0:    {"Q8_0", 32, 34},
	Q8_1:    {"Q8_1", 32, 36},
	Q2_K:    {"Q2_K", QK_K, 84},
	Q3_K:    {"Q3_K", QK_K, 110},
	Q4_K:    {"Q4_K", QK_K, 144},
	Q5_K:    {"Q5_K", QK_K, 176},
	Q6_K:    {"Q6_K", QK_K, 210},
	Q8_K:    {"Q8_K", QK_K, 292},
	IQ2_XXS: {"IQ2_XXS", QK_K, 66},
	IQ2_XS:  {"IQ2_XS", QK_K, 74},
	IQ3_XXS: {"IQ3_XXS", QK_K, 98},
	IQ1_S:   {"IQ1_S", QK_K, 50},
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ3_S:   {"IQ3_S", QK_K, 110},
	IQ2_S:   {"IQ2_S", QK_K, 82},
	IQ4_XS:  {"IQ4_XS", QK_K, 136},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", QK_K, 56},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", QK_K, 54},
	TQ2_0:   {"TQ2_0", QK_K, 66},
	MXFP4:   {"MXFP4", 32, 17},
}

// info returns t's layout; ok is false for ids this package does not know.
func (t Type) info() (ti typeInfo, ok bool) {
	if t >= typeCount || types[t].blockSize == 0 {
		return typeInfo{}, false
	}
	return types[t], true
}

// Known reports whether t is a GGML type id this package knows the layout of.
func (t Type) Known() bool { _, ok := t.info(); return ok }

func (t Type) String() string {
	if ti, ok := t.info(); ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements in one block (1 for plain types, 0 for
// unknown types).
func (t Type) BlockSize() int { ti, _ := t.info(); return ti.blockSize }

// BlockBytes is the byte size of one block (0 for unknown types).
func (t Type) BlockBytes() int { ti, _ := t.info(); return ti.blockBytes }

// ParseType maps a type name such as "q4_0" or "F16" to its Type.
func ParseType(name string) (Type, error) {
	for t, ti := range types {
		if ti.blockSize != 0 && equalFold(ti.name, name) {
			return Type(t), nil
		}
	}
	return 0, fmt.Errorf("quant: unknown type %q", name)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// RowBytes returns the byte size of n elements of type t. It fails when t is
// unknown, n is not a multiple of the block size, or the size overflows.
func (t Type) RowBytes(n uint64) (uint64, error) {
	ti, ok := t.info()
	if !ok {
		return 0, fmt.Errorf("quant: unknown tensor type %d", uint32(t))
	}
	if n%uint64(ti.blockSize) != 0 {
		return 0, fmt.Errorf("quant: %d elements is not a multiple of the %s block size %d", n, ti.name, ti.blockSize)
	}
	blocks := n / uint64(ti.blockSize)
	if blocks > math.MaxUint64/uint64(ti.blockBytes) {
		return 0, fmt.Errorf("quant: %d elements of %s overflow a 64-bit size", n, ti.name)
	}
	return blocks * uint64(ti.blockBytes), nil
}
