package gguf_test

import (
	"math"
	"reflect"
	"testing"

	"gotok/gguf"
)

// parsed writes meta and parses it back, so accessors are tested on values
// as the reader produces them.
func parsed(t *testing.T, meta []entry) *gguf.File {
	t.Helper()
	f, err := gguf.Parse(write(t, meta, nil))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMetadataInt(t *testing.T) {
	f := parsed(t, []entry{
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(math.MaxUint32)}, {"i32", int32(math.MinInt32)},
		{"u64", uint64(math.MaxInt64)}, {"u64.huge", uint64(math.MaxInt64 + 1)}, {"i64", int64(math.MinInt64)},
		{"f32", float32(1.5)}, {"s", "7"}, {"b", true}, {"arr", []int32{1}},
	})
	ints := map[string]int64{
		"u8": 200, "i8": -100, "u16": 60000, "i16": -30000, "u32": math.MaxUint32,
		"i32": math.MinInt32, "u64": math.MaxInt64, "i64": math.MinInt64,
	}
	for key, want := range ints {
		if got, ok := f.Int(key); !ok || got != want {
			t.Errorf("Int(%q) = %d, %v; want %d", key, got, ok, want)
		}
		if got := f.IntOr(key, 1); got != want {
			t.Errorf("IntOr(%q) = %d", key, got)
		}
	}
	for _, key := range []string{"u64.huge", "f32", "s", "b", "arr", "missing"} {
		if got, ok := f.Int(key); ok {
			t.Errorf("Int(%q) = %d, want not ok", key, got)
		}
		if got := f.IntOr(key, -9); got != -9 {
			t.Errorf("IntOr(%q) = %d, want the default", key, got)
		}
	}
}

func TestMetadataFloatStringBool(t *testing.T) {
	f := parsed(t, []entry{
		{"f32", float32(1e-5)}, {"f64", 0.1}, {"int", int16(-3)},
		{"s", "llama"}, {"empty", ""}, {"t", true}, {"f", false}, {"u8", uint8(1)},
	})
	if got, ok := f.Float("f32"); !ok || got != float64(float32(1e-5)) {
		t.Errorf("Float(f32) = %g, %v", got, ok)
	}
	if got := f.FloatOr("f64", 0); got != 0.1 {
		t.Errorf("FloatOr(f64) = %g", got)
	}
	if got, ok := f.Float("int"); !ok || got != -3 {
		t.Errorf("Float(int) = %g, %v", got, ok)
	}
	for _, key := range []string{"s", "t", "missing"} {
		if got := f.FloatOr(key, 2.5); got != 2.5 {
			t.Errorf("FloatOr(%q) = %g, want the default", key, got)
		}
	}

	if got, ok := f.String("s"); !ok || got != "llama" {
		t.Errorf("String(s) = %q, %v", got, ok)
	}
	if got, ok := f.String("empty"); !ok || got != "" {
		t.Errorf("String(empty) = %q, %v", got, ok)
	}
	for _, key := range []string{"u8", "missing"} {
		if _, ok := f.String(key); ok {
			t.Errorf("String(%q) ok", key)
		}
		if got := f.StringOr(key, "def"); got != "def" {
			t.Errorf("StringOr(%q) = %q", key, got)
		}
	}

	if got, ok := f.Bool("t"); !ok || !got {
		t.Errorf("Bool(t) = %v, %v", got, ok)
	}
	if got, ok := f.Bool("f"); !ok || got {
		t.Errorf("Bool(f) = %v, %v", got, ok)
	}
	// A uint8 is not a bool, however it looks.
	if _, ok := f.Bool("u8"); ok || f.BoolOr("u8", false) || !f.BoolOr("missing", true) {
		t.Error("Bool accepted a non-bool or BoolOr ignored its default")
	}
}

func TestMetadataArrays(t *testing.T) {
	f := parsed(t, []entry{
		{"u8", []uint8{1, 255}}, {"i8", []int8{-1}}, {"u16", []uint16{65535}}, {"i16", []int16{-2}},
		{"u32", []uint32{math.MaxUint32}}, {"i32", []int32{-3, 4}}, {"u64", []uint64{5}}, {"i64", []int64{math.MinInt64}},
		{"f32", []float32{0.5, -1}}, {"f64", []float64{1}}, {"str", []string{"a", "", "\xff"}}, {"empty", []int32{}},
		{"bool", []bool{true}}, {"scalar", int32(1)},
	})
	ints := map[string][]int64{
		"u8": {1, 255}, "i8": {-1}, "u16": {65535}, "i16": {-2}, "u32": {math.MaxUint32},
		"i32": {-3, 4}, "u64": {5}, "i64": {math.MinInt64}, "empty": {},
	}
	for key, want := range ints {
		if got, ok := f.Ints(key); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Ints(%q) = %v, %v; want %v", key, got, ok, want)
		}
	}
	for _, key := range []string{"f32", "str", "bool", "scalar", "missing"} {
		if got, ok := f.Ints(key); ok {
			t.Errorf("Ints(%q) = %v, want not ok", key, got)
		}
	}
	if got, ok := f.Float32s("f32"); !ok || !reflect.DeepEqual(got, []float32{0.5, -1}) {
		t.Errorf("Float32s = %v, %v", got, ok)
	}
	if _, ok := f.Float32s("f64"); ok {
		t.Error("Float32s accepted an array of float64")
	}
	if got, ok := f.Strings("str"); !ok || !reflect.DeepEqual(got, []string{"a", "", "\xff"}) {
		t.Errorf("Strings = %q, %v", got, ok)
	}
	if _, ok := f.Strings("u8"); ok {
		t.Error("Strings accepted an array of uint8")
	}
	v, _ := f.Value("i32")
	if v.Len() != 2 || v.Type != gguf.TypeArray || v.ElemType != gguf.TypeInt32 {
		t.Errorf("Value(i32): %s of %s, len %d", v.Type, v.ElemType, v.Len())
	}
	if _, ok := f.Value("missing"); ok {
		t.Error("Value found a missing key")
	}
}
