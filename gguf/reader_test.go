package gguf_test

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"gotok/gguf"
	"gotok/quant"
)

// TestParseV2 parses a hand-built version 2 file (v2 has v3's layout: 64-bit
// counts and lengths) and checks rewriting it gives the same file as v3.
func TestParseV2(t *testing.T) {
	build := func(version uint32) []byte {
		data := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40} // 1.0, 2.0
		b := header(version, 2, 3)
		b.str("general.architecture").u32(uint32(gguf.TypeString)).str("llama")
		b.str("tokens").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeString)).u64(2).str("<s>").str("\xff")
		b.str("general.alignment").u32(uint32(gguf.TypeUint32)).u32(16)
		b.tensorInfo("a", []uint64{1}, quant.F32, 0)
		b.tensorInfo("b", []uint64{1, 1}, quant.F32, 16)
		b.pad(16).raw(data[:4]).pad(16).raw(data[4:]).pad(16)
		return b.b
	}
	v2, v3 := build(2), build(3)
	f, err := gguf.Parse(v2)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || f.Alignment != 16 || f.StringOr("general.architecture", "") != "llama" {
		t.Errorf("version %d, alignment %d, arch %q", f.Version, f.Alignment, f.StringOr("general.architecture", ""))
	}
	if toks, _ := f.Strings("tokens"); len(toks) != 2 || toks[0] != "<s>" || toks[1] != "\xff" {
		t.Errorf("tokens %q", toks)
	}
	if b, ok := f.Tensor("b"); !ok || !bytes.Equal(b.Data, []byte{0, 0, 0, 0x40}) || len(b.Shape) != 2 {
		t.Errorf("tensor b: %+v", b)
	}
	if got := rewrite(t, f); !bytes.Equal(got, v3) {
		t.Errorf("v2 file rewritten differs from the same file as v3")
	}
}

// TestParseTruncated cuts a small valid file at every byte: every cut before
// the end of the last tensor's data must fail cleanly; the padding after it
// is optional, as for llama.cpp's mmap loader.
func TestParseTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	meta := []entry{
		{"general.architecture", "llama"},
		{"general.alignment", uint32(64)},
		{"tokens", []string{"a", "", "\xff\xfe"}},
		{"scores", []float32{1, -2}},
		{"nested", mustArrays(t, []uint16{1}, []string{"x"})},
		{"flag", true},
	}
	tensors := []tensor{
		newTensor(t, rng, "w", quant.Q8_0, 32, 2),
		newTensor(t, rng, "n", quant.F32, 5),
	}
	full := write(t, meta, tensors)
	f, err := gguf.Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	last := f.Tensors[len(f.Tensors)-1]
	end := int(f.DataOffset + last.Offset + last.Size)
	if end == len(full) {
		t.Fatal("test file has no trailing padding; make the last tensor's size not a multiple of the alignment")
	}
	for n := range len(full) + 1 {
		cut := bytes.Clone(full[:n]) // exact capacity, so reads past n cannot hide
		g, err := gguf.Parse(cut)
		switch {
		case n < end && err == nil:
			t.Fatalf("file cut to %d of %d bytes parsed", n, len(full))
		case n < end && !errors.Is(err, gguf.ErrFormat):
			t.Fatalf("cut to %d bytes: error %v does not wrap ErrFormat", n, err)
		case n >= end && err != nil:
			t.Fatalf("cut to %d bytes, past the last tensor's data: %v", n, err)
		case n >= end:
			if d := sameFile(f, g); d != "" {
				t.Fatalf("cut to %d bytes: %s", n, d)
			}
		}
	}

	// Without tensors only the header is needed; the padding after it is not.
	full = write(t, meta, nil)
	headerEnd := 0
	for n := range len(full) + 1 {
		if _, err := gguf.Parse(full[:n]); err == nil {
			headerEnd = n
			break
		}
	}
	if headerEnd == 0 || headerEnd > len(full) || len(full)-headerEnd >= 64 {
		t.Fatalf("shortest parsable prefix of a %d-byte tensor-free file is %d bytes", len(full), headerEnd)
	}
	for n := headerEnd; n <= len(full); n++ {
		if _, err := gguf.Parse(full[:n]); err != nil {
			t.Fatalf("tensor-free file cut to %d bytes: %v", n, err)
		}
	}
}

// scalar appends key = uint32 value.
func (b *builder) kvU32(key string, x uint32) *builder {
	return b.str(key).u32(uint32(gguf.TypeUint32)).u32(x)
}

// oneTensor builds a v3 file holding one tensor info and n bytes of data.
func oneTensor(shape []uint64, typ quant.Type, offset uint64, n int) []byte {
	b := header(3, 1, 0).tensorInfo("t", shape, typ, offset).pad(32)
	return b.raw(make([]byte, n)).b
}

// nested builds a metadata value of depth arrays of arrays around an empty
// array of uint8.
func nested(depth int) []byte {
	b := header(3, 0, 1).str("k").u32(uint32(gguf.TypeArray))
	for range depth - 1 {
		b.u32(uint32(gguf.TypeArray)).u64(1)
	}
	return b.u32(uint32(gguf.TypeUint8)).u64(0).b
}

func TestParseBadInput(t *testing.T) {
	withMagic := func(m string) []byte { b := &builder{}; return b.raw([]byte(m)).u32(3).u64(0).u64(0).b }
	withVersion := func(v uint32) []byte { return header(v, 0, 0).b }
	arrayOf := func(et gguf.ValueType, n uint64) []byte {
		return header(3, 0, 1).str("k").u32(uint32(gguf.TypeArray)).u32(uint32(et)).u64(n).raw(make([]byte, 64)).b
	}
	alignment := func(typ gguf.ValueType, val ...byte) []byte {
		return header(3, 0, 1).str("general.alignment").u32(uint32(typ)).raw(val).b
	}
	cases := []struct {
		name string
		data []byte
		want string // part of the error message
	}{
		{"empty", nil, "magic"},
		{"magic only", []byte("GGUF"), "version"},
		{"bad magic", withMagic("GGML"), "bad magic"},
		{"lowercase magic", withMagic("gguf"), "bad magic"},
		{"version 0", withVersion(0), "version 0"},
		{"version 1", withVersion(1), "version 1"},
		{"version 4", withVersion(4), "version 4"},
		{"big-endian version 3", withVersion(0x03000000), "big-endian"},
		{"version 2^32-1", withVersion(math.MaxUint32), "unsupported"},
		{"no metadata count", header(3, 0, 0).b[:16], "metadata count"},
		{"unknown value type", header(3, 0, 1).str("k").u32(13).u32(0).b, "unknown value type 13"},
		{"value type 2^32-1", header(3, 0, 1).str("k").u32(math.MaxUint32).u64(0).b, "unknown value type"},
		{"unknown array element type", header(3, 0, 1).str("k").u32(uint32(gguf.TypeArray)).u32(13).u64(0).b, "unknown element type 13"},
		{"truncated scalar", header(3, 0, 1).str("k").u32(uint32(gguf.TypeFloat64)).u32(0).b, "value of k"},
		{"truncated array", arrayOf(gguf.TypeUint64, 9), "cannot fit"},
		{"unknown tensor type 4", oneTensor([]uint64{1}, 4, 0, 4), "unknown type id 4"},
		{"unknown tensor type 99", oneTensor([]uint64{1}, 99, 0, 4), "unknown type id 99"},
		{"tensor type 2^32-1", oneTensor([]uint64{1}, math.MaxUint32, 0, 4), "unknown type id"},
		{"zero dims", header(3, 1, 0).str("t").u32(0).u32(0).u64(0).pad(32).b, "0 dimensions"},
		{"5 dims", oneTensor([]uint64{1, 1, 1, 1, 1}, quant.F32, 0, 4), "5 dimensions"},
		{"2^32-1 dims", header(3, 1, 0).str("t").u32(math.MaxUint32).pad(64).b, "dimensions"},
		{"zero dimension", oneTensor([]uint64{4, 0}, quant.F32, 0, 16), "zero or overflowing"},
		{"dims product overflows", oneTensor([]uint64{1 << 32, 1 << 32}, quant.F32, 0, 4), "zero or overflowing"},
		{"dims product wraps to small", oneTensor([]uint64{1 << 32, 1 << 32, 1 << 32, 1 << 32}, quant.I8, 0, 4), "zero or overflowing"},
		{"dimension 2^63", oneTensor([]uint64{1 << 63}, quant.I8, 0, 4), "zero or overflowing"},
		{"byte size overflows", oneTensor([]uint64{1 << 62}, quant.F64, 0, 8), "overflow"},
		{"row not a block multiple", oneTensor([]uint64{33}, quant.Q4_0, 0, 64), "block size"},
		{"row not a block multiple, total is", oneTensor([]uint64{16, 2}, quant.Q4_0, 0, 18), "block size"},
		{"tensor data past the end", oneTensor([]uint64{4}, quant.F32, 0, 15), "past the end"},
		{"tensor offset past the end", oneTensor([]uint64{4}, quant.F32, 1<<62, 16), "past the end"},
		{"tensor offset near 2^64", oneTensor([]uint64{4}, quant.F32, math.MaxUint64-31, 16), "past the end"},
		{"data section past the end", header(3, 1, 0).tensorInfo("t", []uint64{1}, quant.I8, 0).b, "past the end"},
		{"misaligned tensor offset", oneTensor([]uint64{4}, quant.F32, 4, 64), "not a multiple of the alignment 32"},
		{"offset misaligned for general.alignment", header(3, 1, 1).kvU32("general.alignment", 64).
			tensorInfo("t", []uint64{4}, quant.F32, 32).pad(64).raw(make([]byte, 128)).b, "not a multiple of the alignment 64"},
		{"alignment 48", alignment(gguf.TypeUint32, 48, 0, 0, 0), "not a power of two"},
		{"alignment 0", alignment(gguf.TypeUint32, 0, 0, 0, 0), "not a power of two"},
		{"alignment 2^31+1", alignment(gguf.TypeUint32, 1, 0, 0, 0x80), "not a power of two"},
		{"alignment uint64", alignment(gguf.TypeUint64, 32, 0, 0, 0, 0, 0, 0, 0), "want uint32"},
		{"alignment int32", alignment(gguf.TypeInt32, 32, 0, 0, 0), "want uint32"},
		{"alignment string", header(3, 0, 1).str("general.alignment").u32(uint32(gguf.TypeString)).str("32").b, "want uint32"},
		{"alignment array", header(3, 0, 1).str("general.alignment").u32(uint32(gguf.TypeArray)).
			u32(uint32(gguf.TypeUint32)).u64(1).u32(32).b, "want uint32"},
		{"duplicate keys", header(3, 0, 2).kvU32("k", 1).kvU32("k", 2).b, "duplicate metadata key"},
		{"duplicate tensor names", header(3, 2, 0).tensorInfo("t", []uint64{1}, quant.F32, 0).
			tensorInfo("t", []uint64{1}, quant.F32, 32).pad(32).raw(make([]byte, 64)).b, "duplicate tensor name"},
		{"2^60 tensors", header(3, 1<<60, 0).pad(64).b, "tensor count"},
		{"2^64-1 tensors", header(3, math.MaxUint64, 0).pad(64).b, "tensor count"},
		{"2^60 metadata", header(3, 0, 1<<60).pad(64).b, "metadata count"},
		{"2^64-1 metadata", header(3, 0, math.MaxUint64).pad(64).b, "metadata count"},
		{"array of 2^62 uint8", arrayOf(gguf.TypeUint8, 1<<62), "cannot fit"},
		{"array of 2^62 uint64", arrayOf(gguf.TypeUint64, 1<<62), "cannot fit"},
		{"array of 2^62 strings", arrayOf(gguf.TypeString, 1<<62), "cannot fit"},
		{"array of 2^62 arrays", arrayOf(gguf.TypeArray, 1<<62), "cannot fit"},
		{"array of 2^64-1 bools", arrayOf(gguf.TypeBool, math.MaxUint64), "cannot fit"},
		{"key of 2^63 bytes", header(3, 0, 1).u64(1 << 63).raw(make([]byte, 64)).b, "metadata key 0"},
		{"string of 2^63 bytes", header(3, 0, 1).str("k").u32(uint32(gguf.TypeString)).u64(1 << 63).raw(make([]byte, 64)).b, "string value of k"},
		{"string of 2^64-1 bytes", header(3, 0, 1).str("k").u32(uint32(gguf.TypeString)).u64(math.MaxUint64).b, "string value of k"},
		{"string element of 2^63 bytes", header(3, 0, 1).str("k").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeString)).
			u64(1).u64(1 << 63).raw(make([]byte, 64)).b, "string element of k"},
		{"tensor name of 2^63 bytes", header(3, 1, 0).u64(1 << 63).raw(make([]byte, 64)).b, "tensor 0 name"},
		{"arrays nested 9 deep", nested(9), "deeper than 8"},
		{"arrays nested 1000 deep", nested(1000), "deeper than 8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			start := time.Now()
			alloc := allocated(func() { _, err = gguf.Parse(c.data) })
			if err == nil {
				t.Fatal("parsed")
			}
			if !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q: want ErrFormat saying %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Errorf("error %q does not say it comes from gguf", err)
			}
			if alloc > 1<<20 {
				t.Errorf("allocated %d bytes to reject a %d-byte file", alloc, len(c.data))
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	if _, err := gguf.Parse(nested(8)); err != nil {
		t.Errorf("arrays nested 8 deep, the limit: %v", err)
	}
}

// TestParseLyingCounts gives counts that fit in a large file but are lies:
// memory spent before the lie is found must not scale with the claim.
func TestParseLyingCounts(t *testing.T) {
	const size = 8 << 20
	fill := func(b *builder, x byte) []byte {
		return b.raw(bytes.Repeat([]byte{x}, size-len(b.b))).b
	}
	const rest = size - 24 // bytes after the header
	cases := []struct {
		name string
		data []byte
	}{
		// Zeros read as an empty name and 0 dimensions: rejected at the first.
		{"tensors", fill(header(3, rest/32, 0), 0)},
		// Zeros read as key "" = uint8 0; the second is a duplicate.
		{"metadata", fill(header(3, 0, rest/13), 0)},
		// 0xff read as a string of 2^64-1 bytes: rejected at the first.
		{"strings", fill(header(3, 0, 1).str("k").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeString)).u64((rest-64)/8), 0xff)},
		// 0xff read as an unknown element type: rejected at the first.
		{"arrays", fill(header(3, 0, 1).str("k").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeArray)).u64((rest-64)/12), 0xff)},
	}
	for _, c := range cases {
		var err error
		alloc := allocated(func() { _, err = gguf.Parse(c.data) })
		if !errors.Is(err, gguf.ErrFormat) {
			t.Errorf("%s: error %v, want ErrFormat", c.name, err)
		}
		if alloc > 1<<20 {
			t.Errorf("%s: allocated %d bytes to reject an %d-byte file", c.name, alloc, len(c.data))
		}
	}
}

// openers are the two ways to open a file: mapped, and read into memory
// of its own.
var openers = []struct {
	name string
	open func(string) (*gguf.File, error)
}{{"Open", gguf.Open}, {"OpenInMemory", gguf.OpenInMemory}}

func TestOpen(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) { testOpen(t, o.open) })
	}
}

func testOpen(t *testing.T, open func(string) (*gguf.File, error)) {
	rng := rand.New(rand.NewPCG(5, 5))
	meta, tensors := sample(t, rng, 64)
	buf := write(t, meta, tensors)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := gguf.Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameFile(f, want); d != "" {
		t.Fatalf("Open and Parse disagree: %s", d)
	}
	if f.Size() != int64(len(buf)) || f.DataOffset != want.DataOffset {
		t.Errorf("size %d, data offset %d; want %d, %d", f.Size(), f.DataOffset, len(buf), want.DataOffset)
	}
	// Zero-copy: the tensors are views into one mapping, spaced as in the file.
	base := uintptr(unsafe.Pointer(&f.Tensors[0].Data[0])) - uintptr(f.Tensors[0].Offset)
	for _, ti := range f.Tensors {
		if uintptr(unsafe.Pointer(&ti.Data[0]))-base != uintptr(ti.Offset) {
			t.Fatalf("tensor %q data is not a view at its offset in the mapped file", ti.Name)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors {
		if ti.Data != nil {
			t.Errorf("tensor %q data still set after Close", ti.Name)
		}
	}
	if f.Size() != 0 {
		t.Errorf("Size %d after Close", f.Size())
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// A parsed, unmapped file closes harmlessly too.
	if err := want.Close(); err != nil {
		t.Errorf("Close of a parsed file: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) { testOpenErrors(t, o.open) })
	}
}

func testOpenErrors(t *testing.T, open func(string) (*gguf.File, error)) {
	dir := t.TempDir()
	if _, err := open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open(directory): %v", err)
	}
	if _, err := open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing): %v, want ErrNotExist", err)
	}
	for name, data := range map[string][]byte{
		"empty.gguf":     nil,
		"truncated.gguf": oneTensor([]uint64{4}, quant.F32, 0, 15),
		"text.gguf":      []byte("not a model at all"),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := open(path)
		if !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%s): %v, want ErrFormat naming the path", name, err)
		}
	}
}
