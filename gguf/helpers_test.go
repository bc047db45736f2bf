package gguf_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"gotok/gguf"
	"gotok/quant"
)

// builder assembles GGUF bytes by hand, independently of the Writer, so tests
// can state exact layouts and forge hostile ones.
type builder struct{ b []byte }

func (b *builder) u8(x uint8) *builder { b.b = append(b.b, x); return b }
func (b *builder) u32(x uint32) *builder {
	b.b = binary.LittleEndian.AppendUint32(b.b, x)
	return b
}
func (b *builder) u64(x uint64) *builder {
	b.b = binary.LittleEndian.AppendUint64(b.b, x)
	return b
}
func (b *builder) str(s string) *builder  { b.u64(uint64(len(s))); b.b = append(b.b, s...); return b }
func (b *builder) raw(p []byte) *builder  { b.b = append(b.b, p...); return b }
func (b *builder) pad(align int) *builder { return b.raw(make([]byte, (align-len(b.b)%align)%align)) }

// header starts a file: magic, version, tensor count, metadata count.
func header(version uint32, nTensors, nKV uint64) *builder {
	b := &builder{}
	return b.raw([]byte("GGUF")).u32(version).u64(nTensors).u64(nKV)
}

// tensorInfo appends one tensor info record.
func (b *builder) tensorInfo(name string, shape []uint64, t quant.Type, offset uint64) *builder {
	b.str(name).u32(uint32(len(shape)))
	for _, d := range shape {
		b.u64(d)
	}
	return b.u32(uint32(t)).u64(offset)
}

// entry is one metadata key and the Go value given to Writer.Set.
type entry struct {
	key string
	val any
}

// tensor is one tensor given to Writer.AddTensor.
type tensor struct {
	name  string
	typ   quant.Type
	shape []uint64
	data  []byte
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// randString returns n random bytes as a string: mostly not valid UTF-8,
// sometimes holding NULs, which GGUF strings must carry unchanged.
func randString(rng *rand.Rand, n int) string { return string(randBytes(rng, n)) }

// newTensor makes a tensor of random bytes of the right size.
func newTensor(t testing.TB, rng *rand.Rand, name string, typ quant.Type, shape ...uint64) tensor {
	t.Helper()
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	size, err := typ.RowBytes(n)
	if err != nil {
		t.Fatalf("tensor %s: %v", name, err)
	}
	return tensor{name, typ, shape, randBytes(rng, int(size))}
}

// sample returns metadata holding every value type (scalars at their edges,
// arrays of every element type, empty arrays and strings, non-UTF-8 strings,
// arrays of arrays) and tensors of several types and ranks, with random
// contents drawn from rng.
func sample(t testing.TB, rng *rand.Rand, alignment uint32) ([]entry, []tensor) {
	t.Helper()
	f32s := make([]float32, 1+rng.IntN(20))
	for i := range f32s {
		f32s[i] = math.Float32frombits(rng.Uint32())
	}
	f64s := make([]float64, 1+rng.IntN(20))
	for i := range f64s {
		f64s[i] = math.Float64frombits(rng.Uint64())
	}
	strs := []string{"", "hello", "\xff\xfe\x00", randString(rng, 1+rng.IntN(40)), "▁the"}
	meta := []entry{
		{"general.architecture", "llama"},
		{"u8", uint8(rng.Uint32())},
		{"u8.max", uint8(math.MaxUint8)},
		{"i8", int8(math.MinInt8)},
		{"u16", uint16(rng.Uint32())},
		{"i16", int16(math.MinInt16)},
		{"u32", uint32(math.MaxUint32)},
		{"i32", int32(-rng.Int32())},
		{"f32", float32(1e-5)},
		{"f32.nan", math.Float32frombits(0x7fa00001)}, // a signalling NaN with a payload
		{"f32.negzero", float32(math.Copysign(0, -1))},
		{"f32.inf", float32(math.Inf(-1))},
		{"bool.true", true},
		{"bool.false", false},
		{"str", "llama"},
		{"str.empty", ""},
		{"str.binary", "\x00\xff\xc3\x28 not utf-8"},
		{"str.random", randString(rng, 100)},
		{"u64", uint64(math.MaxUint64)},
		{"i64", int64(math.MinInt64)},
		{"f64", math.Float64frombits(rng.Uint64())},
		{"int.small", -7},
		{"int.big", 1 << 40},
		// general.alignment sits in the middle: its position is kept.
		{"general.alignment", alignment},
		{"arr.u8", randBytes(rng, 1+rng.IntN(30))},
		{"arr.i8", []int8{-128, 0, 127}},
		{"arr.u16", []uint16{0, 1, math.MaxUint16}},
		{"arr.i16", []int16{math.MinInt16, -1, math.MaxInt16}},
		{"arr.u32", []uint32{rng.Uint32(), rng.Uint32()}},
		{"arr.i32", []int32{-rng.Int32(), rng.Int32(), 0}},
		{"arr.f32", f32s},
		{"arr.bool", []bool{true, false, true, true}},
		{"arr.str", strs},
		{"arr.u64", []uint64{rng.Uint64(), math.MaxUint64}},
		{"arr.i64", []int64{math.MinInt64, rng.Int64()}},
		{"arr.f64", f64s},
		{"arr.empty.u8", []uint8{}},
		{"arr.empty.f32", []float32{}},
		{"arr.empty.str", []string{}},
		{"arr.str.empties", []string{"", "", ""}},
		{"arr.arr", mustArrays(t, []uint8{1, 2}, []string{"a", ""}, []float64{}, []int32{-1})},
		{"arr.arr.empty", mustArrays(t)},
		{"arr.arr.arr", mustArrays(t, mustArrays(t, []bool{true}), mustArrays(t), mustArrays(t, []string{"deep"}, []uint64{9}))},
	}
	tensors := []tensor{
		newTensor(t, rng, "f32.1d", quant.F32, 7),
		newTensor(t, rng, "f16.2d", quant.F16, 5, 3),
		newTensor(t, rng, "q4_0.3d", quant.Q4_0, 64, 2, 3),
		newTensor(t, rng, "q8_0.2d", quant.Q8_0, 32, 3),
		newTensor(t, rng, "q4_k.1d", quant.Q4_K, 256),
		newTensor(t, rng, "bf16.4d", quant.BF16, 2, 3, 4, 5),
		newTensor(t, rng, "", quant.F32, 1), // an empty name is legal
		newTensor(t, rng, "i8.last", quant.I8, 3),
	}
	return meta, tensors
}

// mustArrays builds an array of arrays from slices or Values.
func mustArrays(t testing.TB, elems ...any) gguf.Value {
	t.Helper()
	vs := make([]gguf.Value, len(elems))
	for i, e := range elems {
		v, err := gguf.ValueOf(e)
		if err != nil {
			t.Fatal(err)
		}
		vs[i] = v
	}
	v, err := gguf.ValueOf(vs)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// write builds a file from meta and tensors.
func write(t testing.TB, meta []entry, tensors []tensor) []byte {
	t.Helper()
	w := gguf.NewWriter()
	for _, e := range meta {
		w.Set(e.key, e.val)
	}
	for _, x := range tensors {
		w.AddTensor(x.name, x.typ, x.shape, x.data)
	}
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// rewrite writes f back out through the Writer, the way a converter would.
func rewrite(t testing.TB, f *gguf.File) []byte {
	t.Helper()
	w := gguf.NewWriter()
	w.CopyMetadata(&f.Metadata)
	for _, ti := range f.Tensors {
		w.AddTensor(ti.Name, ti.Type, ti.Shape, ti.Data)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	return buf.Bytes()
}

// sameValue reports whether a and b have the same type tags and hold equal
// values, comparing floats by their bits (so NaNs and -0 count) and treating
// nil and empty slices alike.
func sameValue(a, b gguf.Value) bool {
	return a.Type == b.Type && a.ElemType == b.ElemType && sameGo(a.Any(), b.Any())
}

func sameGo(x, y any) bool {
	if a, ok := x.(gguf.Value); ok {
		b, ok := y.(gguf.Value)
		return ok && sameValue(a, b)
	}
	switch a := x.(type) {
	case float32:
		b, ok := y.(float32)
		return ok && math.Float32bits(a) == math.Float32bits(b)
	case float64:
		b, ok := y.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	}
	vx, vy := reflect.ValueOf(x), reflect.ValueOf(y)
	if !vx.IsValid() || !vy.IsValid() || vx.Type() != vy.Type() {
		return false
	}
	if vx.Kind() != reflect.Slice {
		return x == y
	}
	if vx.Len() != vy.Len() {
		return false
	}
	for i := range vx.Len() {
		if !sameGo(vx.Index(i).Interface(), vy.Index(i).Interface()) {
			return false
		}
	}
	return true
}

// sameFile reports the first difference in metadata or tensors between a and
// b, or "" when they hold the same content.
func sameFile(a, b *gguf.File) string {
	if !reflect.DeepEqual(a.Keys(), b.Keys()) {
		return "keys differ"
	}
	for _, k := range a.Keys() {
		va, _ := a.Value(k)
		vb, ok := b.Value(k)
		if !ok || !sameValue(va, vb) {
			return "value of " + k + " differs"
		}
	}
	if a.Alignment != b.Alignment || len(a.Tensors) != len(b.Tensors) {
		return "alignment or tensor count differs"
	}
	for i := range a.Tensors {
		ta, tb := &a.Tensors[i], &b.Tensors[i]
		if ta.Name != tb.Name || ta.Type != tb.Type || !reflect.DeepEqual(ta.Shape, tb.Shape) || ta.Size != tb.Size || !bytes.Equal(ta.Data, tb.Data) {
			return "tensor " + ta.Name + " differs"
		}
	}
	return ""
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
