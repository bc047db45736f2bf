package constrain

import (
	"math/rand/v2"
	"testing"
)

// TestPropertyWithNoValue: a property whose schema admits no value cannot
// be written, not even as an additional property of any value.
func TestPropertyWithNoValue(t *testing.T) {
	for _, schema := range []string{
		`{"type": "object", "properties": {"a": false}}`,
		`{"type": "object", "properties": {"a": {"anyOf": [false]}}}`,
		`{"type": "object", "properties": {"a": false, "b": {"type": "integer"}}, "additionalProperties": {"type": "integer"}}`,
	} {
		g, err := CompileSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		for _, text := range []string{`{"a":1}`, `{"b":1,"a":1}`} {
			if accept(g, text) {
				t.Errorf("%s: accepted %s", schema, text)
			}
		}
		for _, text := range []string{`{}`, `{"c":1}`, `{"ab":1}`} {
			if !accept(g, text) {
				t.Errorf("%s: refused %s", schema, text)
			}
		}
		checkWalks(t, schema, g)
	}
}

// checkWalks checks that random texts of g validate against schema.
func checkWalks(t *testing.T, schema string, g *Grammar) {
	t.Helper()
	v := validator(t, schema)
	r := rand.New(rand.NewPCG(21, 22))
	for range 50 {
		if text, ok := randomText(t, g, r, 200); ok {
			checkValid(t, v, text)
		}
	}
}
