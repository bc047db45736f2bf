package constrain

import (
	"fmt"
	"strings"
	"testing"
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
