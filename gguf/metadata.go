package gguf

// Metadata is the ordered key–value section of a GGUF file.
type Metadata struct {
	keys   []string
	values map[string]Value
}

// Keys returns the keys in file order.
func (m *Metadata) Keys() []string { return m.keys }

// Value returns the raw value of key.
func (m *Metadata) Value(key string) (Value, bool) {
	v, ok := m.values[key]
	return v, ok
}

// set adds or replaces key, keeping first-insertion order.
func (m *Metadata) set(key string, v Value) {
	if m.values == nil {
		m.values = make(map[string]Value)
	}
	if _, ok := m.values[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.values[key] = v
}

// String returns a string value.
func (m *Metadata) String(key string) (string, bool) {
	s, ok := m.values[key].v.(string)
	return s, ok
}

// StringOr returns a string value or def when absent or not a string.
func (m *Metadata) StringOr(key, def string) string {
	if s, ok := m.String(key); ok {
		return s
	}
	return def
}

// Int returns any integer-typed value as int64 (uint64 values above
// math.MaxInt64 do not fit and report false).
func (m *Metadata) Int(key string) (int64, bool) {
	v, ok := m.values[key]
	if !ok {
		return 0, false
	}
	return v.asInt64()
}

// IntOr returns an integer value or def.
func (m *Metadata) IntOr(key string, def int64) int64 {
	if x, ok := m.Int(key); ok {
		return x
	}
	return def
}

// Float returns a float32/float64 value (or an integer one) as float64.
func (m *Metadata) Float(key string) (float64, bool) {
	v, ok := m.values[key]
	if !ok {
		return 0, false
	}
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.asInt64(); ok {
		return float64(i), true
	}
	return 0, false
}

// FloatOr returns a float value or def.
func (m *Metadata) FloatOr(key string, def float64) float64 {
	if x, ok := m.Float(key); ok {
		return x
	}
	return def
}

// Bool returns a bool value.
func (m *Metadata) Bool(key string) (bool, bool) {
	b, ok := m.values[key].v.(bool)
	return b, ok
}

// BoolOr returns a bool value or def.
func (m *Metadata) BoolOr(key string, def bool) bool {
	if b, ok := m.Bool(key); ok {
		return b
	}
	return def
}

// Strings returns an array of strings.
func (m *Metadata) Strings(key string) ([]string, bool) {
	s, ok := m.values[key].v.([]string)
	return s, ok
}

// Float32s returns an array of float32.
func (m *Metadata) Float32s(key string) ([]float32, bool) {
	s, ok := m.values[key].v.([]float32)
	return s, ok
}

// Ints returns an array of any integer element type as []int64.
func (m *Metadata) Ints(key string) ([]int64, bool) {
	v, ok := m.values[key]
	if !ok || v.Type != TypeArray {
		return nil, false
	}
	out := make([]int64, 0, v.Len())
	switch a := v.v.(type) {
	case []uint8:
		for _, x := range a {
			out = append(out, int64(x))
		}
	case []int8:
		for _, x := range a {
			out = append(out, int64(x))
		}
	case []uint16:
		for _, x := range a {
			out = append(out, int64(x))
		}
	case []int16:
		for _, x := range a {
			out = append(out, int64(x))
		}
	case []uint32:
		for _, x := range a {
			out = append(out, int64(x))
		}
	case []int32:
		for _, x := range a {
			out = append(out, int64(x))
		}
	case []int64:
		out = append(out, a...)
	case []uint64:
		for _, x := range a {
			out = append(out, int64(x))
		}
	default:
		return nil, false
	}
	return out, true
}
