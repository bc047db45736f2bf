package constrain

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestOneOfOverlapsBeyondTheMachine: alternatives that share a value the
// machine would not write (a long or huge number, an escaped key, a number
// spelled another way inside a value, an alternative past maxThreads) are
// not taken as disjoint.
func TestOneOfOverlapsBeyondTheMachine(t *testing.T) {
	var many []string
	for i := range maxThreads + 8 {
		many = append(many, fmt.Sprintf(`{"type": "object", "properties": {"k": {"const": %d}}, "required": ["k"], "additionalProperties": false}`, i))
	}
	for _, s := range []string{
		`{"oneOf": [{"const": 123456789012345678901234}, {"type": "integer"}]}`,
		`{"oneOf": [{"const": 1e300}, {"type": "integer"}]}`,
		`{"oneOf": [{"const": 0.123456789012345678901234}, {"type": "number"}]}`,
		`{"oneOf": [{"const": {"\u2028": 1}}, {"type": "object", "properties": {"a": {}}}]}`,
		`{"oneOf": [{"const": {"a\"b": 1}}, {"type": "object", "properties": {"a": {}}}]}`,
		`{"oneOf": [{"const": [1.0]}, {"type": "array", "items": {"type": "integer"}}]}`,
		`{"oneOf": [{"const": [1.0]}, {"const": [1]}]}`,
		`{"oneOf": [{"const": {"k": 70}}, {"anyOf": [` + strings.Join(many, ",") + `]}]}`,
		`{"oneOf": [{"const": ` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}, {"type": "array"}]}`,
	} {
		if _, err := CompileSchema([]byte(s)); err == nil || !strings.Contains(err.Error(), "use anyOf") {
			t.Errorf("%.200s: error %v, want one suggesting anyOf", s, err)
		}
	}
	// What the machine's refusal does prove stays disjoint.
	for _, s := range []string{
		`{"oneOf": [{"const": {"a": "x"}}, {"type": "object", "properties": {"a": {"type": "integer"}}}]}`,
		`{"oneOf": [{"const": 1.5}, {"type": "integer"}]}`,
		`{"oneOf": [{"const": ["a", "b"]}, {"type": "array", "maxItems": 1}]}`,
		`{"oneOf": [{"const": "a\nb"}, {"type": "string", "maxLength": 2}]}`,
	} {
		if _, err := CompileSchema([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

func TestRefusalProves(t *testing.T) {
	for _, c := range []struct {
		text string
		want bool
	}{
		{`"a1"`, true},
		{`{"k1":"v-2"}`, true},
		{`"a\n\"b"`, true},
		{`{"a":"\u2028"}`, true},
		{`1`, false},
		{`[-1]`, false},
		{`{"a":[true,0.5]}`, false},
		{`{"\u2028":1}`, false},
		{`{"a\"b":null}`, false},
		{`{"a":{"b\\":null}}`, false},
		{strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), false},
	} {
		if got := refusalProves(c.text); got != c.want {
			t.Errorf("refusalProves(%s) = %v, want %v", c.text, got, c.want)
		}
	}
}

// TestOneOfOfEnums: enums are compared as sets of canonical texts, fast,
// and a oneOf too large to check says so.
func TestOneOfOfEnums(t *testing.T) {
	enum := func(prefix string, n int) string {
		var vals []string
		for j := range n {
			vals = append(vals, fmt.Sprintf(`"%s%d"`, prefix, j))
		}
		return `{"enum": [` + strings.Join(vals, ",") + `]}`
	}
	var alts []string
	for i := range 20 {
		alts = append(alts, enum(fmt.Sprintf("v%d_", i), 100))
	}
	t0 := time.Now()
	if _, err := CompileSchema([]byte(`{"oneOf": [` + strings.Join(alts, ",") + `, {"type": "object"}]}`)); err != nil {
		t.Error(err)
	}
	t.Logf("20 enums of 100 values: %v", time.Since(t0))
	for _, c := range []struct{ schema, want string }{
		{`{"oneOf": [{"enum": ["a", [1]]}, {"enum": ["b", [1.0]]}]}`, "may both match"},
		{`{"oneOf": [{"enum": ["a", {"b": "c"}]}, {"enum": [{"b": "c"}]}]}`, "may both match"},
		{`{"oneOf": [` + enum("a", 3000) + `, ` + enum("b", 3000) + `]}`, "too large to prove"},
	} {
		if _, err := CompileSchema([]byte(c.schema)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.100s: error %v, want one containing %q", c.schema, err, c.want)
		}
	}
}
