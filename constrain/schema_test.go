package constrain

import (
	"math/rand/v2"
	"strings"
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
func TestSchemaErrorsIDAndRange(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"$defs": {"a": {"type": "string"}}, "type": "object", "properties": {"p": {"$id": "http://e.com/x", "$defs": {"a": {"type": "integer"}}, "$ref": "#/$defs/a"}}}`, `keyword "$id"`},
		{`{"$defs": {"x": {"$id": "http://e.com/x", "$defs": {"a": {"type": "integer"}}}}, "$ref": "#/$defs/x/$defs/a"}`, `keyword "$id"`},
		{`{"const": 1e400}`, `beyond float64's range`},
		{`{"enum": [1, {"a": [-1e999]}]}`, `beyond float64's range`},
	} {
		_, err := CompileSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.schema, err, c.want)
		}
	}
	// At the root, $id names the document and changes nothing.
	if _, err := CompileSchema([]byte(`{"$id": "http://e.com/s", "$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a"}`)); err != nil {
		t.Errorf("$id at the root: %v", err)
	}
}

// TestRefToRefInProgress: a reference to a reference still being compiled
// (a cycle through a bare $ref) reads the same values as its target.
func TestRefToRefInProgress(t *testing.T) {
	defs := `"$defs": {"P": {"type": "array", "items": {"$ref": "#/$defs/Q"}}, "Q": {"$ref": "#/$defs/P"}}`
	for _, c := range []struct {
		schema    string
		good, bad []string
	}{
		{`{` + defs + `, "type": "array", "items": {"$ref": "#/$defs/P"}}`, []string{`[]`, `[[]]`, `[[[]]]`, `[[],[[]]]`}, []string{`[1]`, `[[1]]`}},
		{`{` + defs + `, "type": "object", "properties": {"a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/Q"}}}`, []string{`{"b":[]}`, `{"a":[[]],"b":[[[]]]}`}, []string{`{"b":5}`, `{"a":5}`, `{"b":[5]}`}},
	} {
		g, err := CompileSchema([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		for _, text := range c.good {
			if !accept(g, text) {
				t.Errorf("%s: refused %s", c.schema, text)
			}
		}
		for _, text := range c.bad {
			if accept(g, text) {
				t.Errorf("%s: accepted %s", c.schema, text)
			}
		}
		checkWalks(t, c.schema, g)
	}
}
