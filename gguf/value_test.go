package gguf_test

import (
	"math"
	"testing"

	"gotok/gguf"
)

func TestValueOf(t *testing.T) {
	cases := []struct {
		in       any
		typ, el  gguf.ValueType
		len      int
		asString string
	}{
		{uint8(1), gguf.TypeUint8, 0, 0, "1"},
		{int8(-1), gguf.TypeInt8, 0, 0, "-1"},
		{uint16(2), gguf.TypeUint16, 0, 0, "2"},
		{int16(-2), gguf.TypeInt16, 0, 0, "-2"},
		{uint32(3), gguf.TypeUint32, 0, 0, "3"},
		{int32(-3), gguf.TypeInt32, 0, 0, "-3"},
		{float32(0.5), gguf.TypeFloat32, 0, 0, "0.5"},
		{true, gguf.TypeBool, 0, 0, "true"},
		{"a\"b", gguf.TypeString, 0, 0, `"a\"b"`},
		{uint64(4), gguf.TypeUint64, 0, 0, "4"},
		{int64(-4), gguf.TypeInt64, 0, 0, "-4"},
		{0.25, gguf.TypeFloat64, 0, 0, "0.25"},
		{math.MaxInt32, gguf.TypeInt32, 0, 0, "2147483647"},
		{math.MinInt32, gguf.TypeInt32, 0, 0, "-2147483648"},
		{math.MaxInt32 + 1, gguf.TypeInt64, 0, 0, "2147483648"},
		{math.MinInt32 - 1, gguf.TypeInt64, 0, 0, "-2147483649"},
		{[]uint8{1, 2}, gguf.TypeArray, gguf.TypeUint8, 2, "[uint8 × 2]"},
		{[]int8{1}, gguf.TypeArray, gguf.TypeInt8, 1, "[int8 × 1]"},
		{[]uint16{}, gguf.TypeArray, gguf.TypeUint16, 0, "[uint16 × 0]"},
		{[]int16{1}, gguf.TypeArray, gguf.TypeInt16, 1, "[int16 × 1]"},
		{[]uint32{1}, gguf.TypeArray, gguf.TypeUint32, 1, "[uint32 × 1]"},
		{[]int32{1, 2, 3}, gguf.TypeArray, gguf.TypeInt32, 3, "[int32 × 3]"},
		{[]float32{1}, gguf.TypeArray, gguf.TypeFloat32, 1, "[float32 × 1]"},
		{[]bool{true}, gguf.TypeArray, gguf.TypeBool, 1, "[bool × 1]"},
		{[]string{"", ""}, gguf.TypeArray, gguf.TypeString, 2, "[string × 2]"},
		{[]uint64{1}, gguf.TypeArray, gguf.TypeUint64, 1, "[uint64 × 1]"},
		{[]int64{1}, gguf.TypeArray, gguf.TypeInt64, 1, "[int64 × 1]"},
		{[]float64{1}, gguf.TypeArray, gguf.TypeFloat64, 1, "[float64 × 1]"},
		{[]gguf.Value{mustArrays(t), mustArrays(t)}, gguf.TypeArray, gguf.TypeArray, 2, "[array × 2]"},
	}
	for _, c := range cases {
		v, err := gguf.ValueOf(c.in)
		if err != nil {
			t.Errorf("ValueOf(%T): %v", c.in, err)
			continue
		}
		if v.Type != c.typ || v.ElemType != c.el || v.Len() != c.len || v.String() != c.asString {
			t.Errorf("ValueOf(%T %v) = %s of %s, len %d, %q; want %s of %s, len %d, %q",
				c.in, c.in, v.Type, v.ElemType, v.Len(), v.String(), c.typ, c.el, c.len, c.asString)
		}
		// A Value passes through unchanged.
		if w, err := gguf.ValueOf(v); err != nil || !sameValue(v, w) {
			t.Errorf("ValueOf(ValueOf(%T)) = %v, %v", c.in, w, err)
		}
	}
}

func TestValueTypeString(t *testing.T) {
	names := map[gguf.ValueType]string{
		gguf.TypeUint8: "uint8", gguf.TypeInt8: "int8", gguf.TypeUint16: "uint16", gguf.TypeInt16: "int16",
		gguf.TypeUint32: "uint32", gguf.TypeInt32: "int32", gguf.TypeFloat32: "float32", gguf.TypeBool: "bool",
		gguf.TypeString: "string", gguf.TypeArray: "array", gguf.TypeUint64: "uint64", gguf.TypeInt64: "int64",
		gguf.TypeFloat64: "float64", 13: "type(13)", math.MaxUint32: "type(4294967295)",
	}
	for typ, want := range names {
		if got := typ.String(); got != want {
			t.Errorf("ValueType(%d).String() = %q, want %q", uint32(typ), got, want)
		}
	}
}
