package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type tag of a GGUF metadata value.
type ValueType uint32

// GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size is the encoded size of a fixed-size scalar, 0 for strings and arrays.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// Value is one metadata value with its exact GGUF type, so a file read and
// written again is byte-identical.
//
// Scalars are held as the Go type of the same width (uint8, int8, uint16,
// int16, uint32, int32, float32, bool, string, uint64, int64, float64).
// Arrays are held as a slice of that Go type, or []Value for arrays of arrays.
type Value struct {
	Type     ValueType
	ElemType ValueType // element type when Type is TypeArray
	v        any
}

// Any returns the Go value: a scalar, a typed slice or []Value.
func (v Value) Any() any { return v.v }

// ValueOf wraps a Go value as a GGUF value. It accepts the scalar Go types
// listed on Value, int (stored as int32 when it fits, else int64), slices of
// those, and []Value (an array of arrays, all of one element type).
func ValueOf(x any) (Value, error) {
	switch x := x.(type) {
	case Value:
		// A Value literal such as Value{} carries no Go value matching its
		// tags and would be encoded as garbage.
		if err := x.check(0); err != nil {
			return Value{}, err
		}
		return x, nil
	case uint8:
		return Value{Type: TypeUint8, v: x}, nil
	case int8:
		return Value{Type: TypeInt8, v: x}, nil
	case uint16:
		return Value{Type: TypeUint16, v: x}, nil
	case int16:
		return Value{Type: TypeInt16, v: x}, nil
	case uint32:
		return Value{Type: TypeUint32, v: x}, nil
	case int32:
		return Value{Type: TypeInt32, v: x}, nil
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return Value{Type: TypeInt32, v: int32(x)}, nil
		}
		return Value{Type: TypeInt64, v: int64(x)}, nil
	case float32:
		return Value{Type: TypeFloat32, v: x}, nil
	case bool:
		return Value{Type: TypeBool, v: x}, nil
	case string:
		return Value{Type: TypeString, v: x}, nil
	case uint64:
		return Value{Type: TypeUint64, v: x}, nil
	case int64:
		return Value{Type: TypeInt64, v: x}, nil
	case float64:
		return Value{Type: TypeFloat64, v: x}, nil
	case []uint8:
		return Value{Type: TypeArray, ElemType: TypeUint8, v: x}, nil
	case []int8:
		return Value{Type: TypeArray, ElemType: TypeInt8, v: x}, nil
	case []uint16:
		return Value{Type: TypeArray, ElemType: TypeUint16, v: x}, nil
	case []int16:
		return Value{Type: TypeArray, ElemType: TypeInt16, v: x}, nil
	case []uint32:
		return Value{Type: TypeArray, ElemType: TypeUint32, v: x}, nil
	case []int32:
		return Value{Type: TypeArray, ElemType: TypeInt32, v: x}, nil
	case []float32:
		return Value{Type: TypeArray, ElemType: TypeFloat32, v: x}, nil
	case []bool:
		return Value{Type: TypeArray, ElemType: TypeBool, v: x}, nil
	case []string:
		return Value{Type: TypeArray, ElemType: TypeString, v: x}, nil
	case []uint64:
		return Value{Type: TypeArray, ElemType: TypeUint64, v: x}, nil
	case []int64:
		return Value{Type: TypeArray, ElemType: TypeInt64, v: x}, nil
	case []float64:
		return Value{Type: TypeArray, ElemType: TypeFloat64, v: x}, nil
	case []Value:
		v := Value{Type: TypeArray, ElemType: TypeArray, v: x}
		if err := v.check(0); err != nil {
			return Value{}, err
		}
		return v, nil
	}
	return Value{}, fmt.Errorf("gguf: cannot store a %T as a metadata value", x)
}

// check reports whether v's Go value matches its type tags and whether its
// arrays of arrays nest no deeper than the reader accepts, so that the writer
// never produces a file the reader rejects. depth is v's nesting level.
func (v Value) check(depth int) error {
	if v.Type == TypeArray && depth >= maxNesting {
		return fmt.Errorf("gguf: arrays nest deeper than %d", maxNesting)
	}
	a, ok := v.v.([]Value)
	if !ok {
		w, err := ValueOf(v.v) // v.v is never a Value or []Value here
		if err != nil {
			return err
		}
		if w.Type != v.Type || w.ElemType != v.ElemType {
			return fmt.Errorf("gguf: value tagged %s of %s holds a %T", v.Type, v.ElemType, v.v)
		}
		return nil
	}
	if v.Type != TypeArray || v.ElemType != TypeArray {
		return fmt.Errorf("gguf: value tagged %s of %s holds a []Value", v.Type, v.ElemType)
	}
	for i, e := range a {
		if e.Type != TypeArray {
			return fmt.Errorf("gguf: nested array element %d is %s, want array", i, e.Type)
		}
		if err := e.check(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// Len is the number of elements of an array value, 0 for scalars.
func (v Value) Len() int {
	switch a := v.v.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// String formats the value for display; long arrays are abbreviated.
func (v Value) String() string {
	if v.Type != TypeArray {
		if s, ok := v.v.(string); ok {
			return fmt.Sprintf("%q", s)
		}
		return fmt.Sprint(v.v)
	}
	return fmt.Sprintf("[%s × %d]", v.ElemType, v.Len())
}

// asInt64 converts any integer scalar to int64.
func (v Value) asInt64() (int64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}
