package gguf_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gotok/gguf"
	"gotok/quant"
)

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

// TestRoundTrip writes every value type and several tensors, parses the file
// back, checks everything came back with its exact type, that the layout is
// llama.cpp's, and that writing the parsed file again gives the same bytes.
func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{64, 0, 1, 256} { // 0: no general.alignment, so 32
		for seed := range uint64(3) {
			rng := rand.New(rand.NewPCG(seed, uint64(align)))
			meta, tensors := sample(t, rng, align)
			if align == 0 {
				meta = withoutKey(meta, "general.alignment")
			}
			buf := write(t, meta, tensors)
			f, err := gguf.Parse(buf)
			if err != nil {
				t.Fatalf("align %d seed %d: %v", align, seed, err)
			}
			want := uint64(align)
			if align == 0 {
				want = gguf.DefaultAlignment
			}
			checkRoundTrip(t, buf, f, meta, tensors, want)
			if again := rewrite(t, f); !bytes.Equal(again, buf) {
				t.Fatalf("align %d seed %d: rewriting the parsed file changed it (%d bytes, was %d)", align, seed, len(again), len(buf))
			}
		}
	}
}

func withoutKey(meta []entry, key string) []entry {
	var out []entry
	for _, e := range meta {
		if e.key != key {
			out = append(out, e)
		}
	}
	return out
}

func checkRoundTrip(t *testing.T, buf []byte, f *gguf.File, meta []entry, tensors []tensor, align uint64) {
	t.Helper()
	if f.Version != 3 {
		t.Errorf("version %d, want 3", f.Version)
	}
	if f.Alignment != align {
		t.Errorf("alignment %d, want %d", f.Alignment, align)
	}
	if f.Size() != int64(len(buf)) {
		t.Errorf("Size %d, want %d", f.Size(), len(buf))
	}
	var keys []string
	for _, e := range meta {
		keys = append(keys, e.key)
		want, err := gguf.ValueOf(e.val)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := f.Value(e.key)
		if !ok {
			t.Errorf("key %q missing", e.key)
			continue
		}
		if !sameValue(got, want) {
			t.Errorf("key %q: got %s %s %#v, want %s %s %#v", e.key, got.Type, got.ElemType, got.Any(), want.Type, want.ElemType, want.Any())
		}
	}
	if !reflect.DeepEqual(f.Keys(), keys) {
		t.Errorf("keys %q, want %q", f.Keys(), keys)
	}

	if f.DataOffset%align != 0 {
		t.Errorf("data section at %d, not aligned to %d", f.DataOffset, align)
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tensors))
	}
	next := uint64(0) // llama.cpp packs tensors in order, each padded to the alignment
	for i, want := range tensors {
		got := &f.Tensors[i]
		if got.Name != want.name || got.Type != want.typ || !reflect.DeepEqual(got.Shape, want.shape) {
			t.Errorf("tensor %d: %q %s %v, want %q %s %v", i, got.Name, got.Type, got.Shape, want.name, want.typ, want.shape)
		}
		if got.Size != uint64(len(want.data)) || len(got.Data) != len(want.data) || !bytes.Equal(got.Data, want.data) {
			t.Errorf("tensor %q: size %d, %d bytes of data differing from the %d written", want.name, got.Size, len(got.Data), len(want.data))
		}
		if got.Offset != next {
			t.Errorf("tensor %q at offset %d, want %d", want.name, got.Offset, next)
		}
		next = alignUp(got.Offset+got.Size, align)
		// Zero-copy: Data is the very bytes of buf.
		if start := f.DataOffset + got.Offset; &buf[start] != &got.Data[0] {
			t.Errorf("tensor %q data does not alias the input at %d", want.name, start)
		}
		if p, ok := f.Tensor(want.name); !ok || p != got {
			t.Errorf("Tensor(%q) = %p, %v; want %p", want.name, p, ok, got)
		}
	}
	if want := f.DataOffset + next; uint64(len(buf)) != want {
		t.Errorf("file is %d bytes, want %d (last tensor padded to the alignment, as llama.cpp writes)", len(buf), want)
	}
	if _, ok := f.Tensor("no such tensor"); ok {
		t.Error("Tensor found a tensor that does not exist")
	}
}

// TestWriterLayout compares the Writer's output with a file laid out by hand
// byte by byte, so a bug shared by the reader and writer cannot hide.
func TestWriterLayout(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	q := bytes.Repeat([]byte{0xab}, 18)
	w := gguf.NewWriter()
	w.Set("a", uint32(7))
	w.Set("s", []string{"x", ""})
	w.Set("n", mustArrays(t, []int8{-1}))
	w.Set("b", true)
	w.AddTensor("t", quant.F32, []uint64{3}, data)
	w.AddTensor("q", quant.Q4_0, []uint64{32}, q)
	var got bytes.Buffer
	if _, err := w.WriteTo(&got); err != nil {
		t.Fatal(err)
	}

	want := header(3, 2, 4)
	want.str("a").u32(uint32(gguf.TypeUint32)).u32(7)
	want.str("s").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeString)).u64(2).str("x").str("")
	want.str("n").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeArray)).u64(1).u32(uint32(gguf.TypeInt8)).u64(1).u8(0xff)
	want.str("b").u32(uint32(gguf.TypeBool)).u8(1)
	want.tensorInfo("t", []uint64{3}, quant.F32, 0)
	want.tensorInfo("q", []uint64{32}, quant.Q4_0, 32)
	want.pad(32).raw(data).pad(32).raw(q).pad(32)
	if !bytes.Equal(got.Bytes(), want.b) {
		t.Fatalf("writer output differs from the hand-built layout\n got %x\nwant %x", got.Bytes(), want.b)
	}
}

func TestWriterNoTensors(t *testing.T) {
	buf := write(t, []entry{{"k", "v"}}, nil)
	if len(buf)%gguf.DefaultAlignment != 0 {
		t.Errorf("file of %d bytes does not end aligned", len(buf))
	}
	f, err := gguf.Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 0 || f.StringOr("k", "") != "v" {
		t.Errorf("got %d tensors, k = %q", len(f.Tensors), f.StringOr("k", ""))
	}
	if empty := write(t, nil, nil); len(empty) != 32 {
		t.Errorf("empty file is %d bytes, want the 24-byte header padded to 32", len(empty))
	}
}

// TestWriterSet checks Set replaces a value in place and CopyMetadata keeps
// order.
func TestWriterSet(t *testing.T) {
	src, err := gguf.Parse(write(t, []entry{{"a", 1}, {"b", "x"}, {"general.alignment", uint32(16)}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	w.Set("c", uint8(1))
	w.CopyMetadata(&src.Metadata)
	w.Set("a", "replaced")
	w.AddTensor("t", quant.F32, []uint64{1}, make([]byte, 4))
	w.Set("general.alignment", uint32(16)) // unchanged: allowed after a tensor
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c", "a", "b", "general.alignment"}; !reflect.DeepEqual(f.Keys(), want) {
		t.Errorf("keys %q, want %q", f.Keys(), want)
	}
	if s, _ := f.String("a"); s != "replaced" || f.Alignment != 16 {
		t.Errorf("a = %q, alignment %d", s, f.Alignment)
	}
}

func TestWriterErrors(t *testing.T) {
	f32 := func(n int) []byte { return make([]byte, 4*n) }
	deepest, _ := gguf.ValueOf([]uint8{1})
	for range 7 {
		deepest = mustArrays(t, deepest) // 8 levels of arrays: the most the reader takes
	}
	cases := []struct {
		name  string
		build func(w *gguf.Writer)
		want  string
	}{
		{"short data", func(w *gguf.Writer) { w.AddTensor("t", quant.F32, []uint64{4}, f32(3)) }, "needs 16"},
		{"long data", func(w *gguf.Writer) { w.AddTensor("t", quant.Q8_0, []uint64{32}, make([]byte, 35)) }, "needs 34"},
		{"duplicate tensor", func(w *gguf.Writer) {
			w.AddTensor("t", quant.F32, []uint64{1}, f32(1))
			w.AddTensor("t", quant.F32, []uint64{1}, f32(1))
		}, "duplicate tensor"},
		{"no dims", func(w *gguf.Writer) { w.AddTensor("t", quant.F32, nil, nil) }, "0 dimensions"},
		{"5 dims", func(w *gguf.Writer) { w.AddTensor("t", quant.F32, []uint64{1, 1, 1, 1, 1}, f32(1)) }, "5 dimensions"},
		{"zero dim", func(w *gguf.Writer) { w.AddTensor("t", quant.F32, []uint64{4, 0}, nil) }, "bad shape"},
		{"overflowing shape", func(w *gguf.Writer) { w.AddTensor("t", quant.F32, []uint64{1 << 32, 1 << 32}, nil) }, "bad shape"},
		{"row not a block multiple", func(w *gguf.Writer) { w.AddTensor("t", quant.Q4_0, []uint64{16, 2}, make([]byte, 18)) }, "block size"},
		{"unknown type", func(w *gguf.Writer) { w.AddTensor("t", quant.Type(4), []uint64{1}, f32(1)) }, "unknown tensor type"},
		{"alignment not a power of two", func(w *gguf.Writer) { w.Set("general.alignment", uint32(48)) }, "power of two"},
		{"alignment zero", func(w *gguf.Writer) { w.Set("general.alignment", uint32(0)) }, "power of two"},
		{"alignment int", func(w *gguf.Writer) { w.Set("general.alignment", 64) }, "uint32"},
		{"alignment uint64", func(w *gguf.Writer) { w.Set("general.alignment", uint64(64)) }, "uint32"},
		{"alignment after tensor", func(w *gguf.Writer) {
			w.AddTensor("t", quant.F32, []uint64{1}, f32(1))
			w.Set("general.alignment", uint32(64))
		}, "before any tensor"},
		{"unsupported type struct", func(w *gguf.Writer) { w.Set("k", struct{}{}) }, "cannot store"},
		{"unsupported type uint", func(w *gguf.Writer) { w.Set("k", uint(1)) }, "cannot store"},
		{"unsupported type []int", func(w *gguf.Writer) { w.Set("k", []int{1}) }, "cannot store"},
		{"unsupported type []any", func(w *gguf.Writer) { w.Set("k", []any{1}) }, "cannot store"},
		{"nil", func(w *gguf.Writer) { w.Set("k", nil) }, "cannot store"},
		{"zero Value", func(w *gguf.Writer) { w.Set("k", gguf.Value{}) }, "cannot store"},
		{"mistagged Value", func(w *gguf.Writer) { w.Set("k", gguf.Value{Type: gguf.TypeString}) }, "cannot store"},
		{"scalar in array of arrays", func(w *gguf.Writer) {
			v, _ := gguf.ValueOf(uint8(1))
			w.Set("k", []gguf.Value{v})
		}, "want array"},
		{"arrays nested too deep", func(w *gguf.Writer) { w.Set("k", []gguf.Value{deepest}) }, "deeper"},
		{"first error sticks", func(w *gguf.Writer) {
			w.Set("k", struct{}{})
			w.Set("ok", 1)
			w.AddTensor("t", quant.F32, []uint64{1}, f32(1))
		}, "cannot store"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter()
			c.build(w)
			var buf bytes.Buffer
			n, err := w.WriteTo(&buf)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("WriteTo error %v, want one saying %q", err, c.want)
			}
			if n != 0 || buf.Len() != 0 {
				t.Errorf("WriteTo wrote %d bytes despite the error", buf.Len())
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "m.gguf")
			if err := w.WriteFile(path); err == nil {
				t.Error("WriteFile succeeded")
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("WriteFile left %d files behind", len(left))
			}
		})
	}
	// The deepest nesting the reader accepts is writable.
	buf := write(t, []entry{{"k", deepest}}, nil)
	if _, err := gguf.Parse(buf); err != nil {
		t.Errorf("8 levels of arrays: %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	meta, tensors := sample(t, rng, 64)
	w := gguf.NewWriter()
	for _, e := range meta {
		w.Set(e.key, e.val)
	}
	for _, x := range tensors {
		w.AddTensor(x.name, x.typ, x.shape, x.data)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := write(t, meta, tensors); !bytes.Equal(got, want) {
		t.Fatal("WriteFile and WriteTo disagree")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the directory, want only the model (temporary file left?)", len(entries))
	}
	if err := w.WriteFile(filepath.Join(dir, "missing", "m.gguf")); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n < len(p) {
		k := f.n
		f.n = 0
		return k, errors.New("disk full")
	}
	f.n -= len(p)
	return len(p), nil
}

// TestWriteToError checks a failing destination's error comes back, wherever
// in the file it happens.
func TestWriteToError(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	meta, tensors := sample(t, rng, 32)
	size := len(write(t, meta, tensors))
	for _, at := range []int{0, 100, size / 2, size - 1} {
		w := gguf.NewWriter()
		for _, e := range meta {
			w.Set(e.key, e.val)
		}
		for _, x := range tensors {
			w.AddTensor(x.name, x.typ, x.shape, x.data)
		}
		if _, err := w.WriteTo(&failingWriter{n: at}); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("failing after %d of %d bytes: error %v", at, size, err)
		}
	}
}
