package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// testSchemas are schemas the property tests walk: the shapes OpenAI's
// structured outputs and pydantic produce, and some adversarial ones.
var testSchemas = map[string]string{
	"person": `{
		"type": "object",
		"properties": {
			"name": {"type": "string", "minLength": 1, "maxLength": 12},
			"age": {"type": "integer"},
			"height": {"type": "number"},
			"email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
			"tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 3},
			"role": {"enum": ["admin", "user", "guest"]},
			"active": {"type": "boolean"}
		},
		"required": ["name", "age", "role"],
		"additionalProperties": false
	}`,
	"nested": `{
		"type": "object",
		"properties": {
			"items": {"type": "array", "items": {
				"type": "object",
				"properties": {"id": {"type": "integer"}, "kids": {"$ref": "#"}},
				"required": ["id"],
				"additionalProperties": false
			}, "maxItems": 2}
		},
		"required": ["items"],
		"additionalProperties": false
	}`,
	"defs": `{
		"$defs": {
			"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"], "additionalProperties": false},
			"Shape": {"oneOf": [
				{"type": "object", "properties": {"kind": {"const": "circle"}, "center": {"$ref": "#/$defs/Point"}, "r": {"type": "number"}}, "required": ["kind", "center", "r"], "additionalProperties": false},
				{"type": "object", "properties": {"kind": {"const": "poly"}, "points": {"type": "array", "items": {"$ref": "#/$defs/Point"}, "minItems": 3, "maxItems": 4}}, "required": ["kind", "points"], "additionalProperties": false}
			]}
		},
		"type": "array", "items": {"$ref": "#/$defs/Shape"}, "maxItems": 3
	}`,
	"open": `{
		"type": "object",
		"properties": {"a": {"type": "integer"}, "b": {"const": [1, {"x": null}]}},
		"required": ["b"],
		"additionalProperties": {"type": ["string", "boolean"]}
	}`,
	"mixed": `{
		"anyOf": [
			{"type": "string", "minLength": 2, "maxLength": 4},
			{"type": "string", "enum": ["ab", "abcdef", "é\"\\"]},
			{"type": "integer"},
			{"enum": [1.5, -2, 1e3, true, null, "x"]},
			{"type": "array", "maxItems": 0}
		]
	}`,
	"emptyish": `{"type": "object", "properties": {"never": false, "ok": true}, "additionalProperties": false}`,
	"any":      `true`,
}

// validator compiles schema with the reference validator.
func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkValid fails t unless text is one JSON value that s accepts.
func checkValid(t testing.TB, s *jsonschema.Schema, text string) {
	t.Helper()
	var x any // numbers as float64: none may be out of its range
	if err := json.Unmarshal([]byte(text), &x); err != nil {
		t.Fatalf("not JSON: %q: %v", text, err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	if s != nil {
		if err := s.Validate(v); err != nil {
			t.Fatalf("%q does not validate: %v", text, err)
		}
	}
}

// nextBytes returns the bytes that may follow state ts.
func nextBytes(ts []thread) []byte {
	var out []byte
	for b := range 256 {
		if len(stepAll(nil, ts, byte(b), nil)) > 0 {
			out = append(out, byte(b))
		}
	}
	return out
}

// randomText walks g byte by byte, choosing among the allowed bytes at
// random (structural bytes favoured as the text grows, so walks end), and
// checks that no state is a dead end. It returns the text and whether it
// is whole.
func randomText(t testing.TB, g *Grammar, r *rand.Rand, limit int) (string, bool) {
	t.Helper()
	ts := start(g)
	var text []byte
	for len(text) < limit {
		if complete(ts) && (finished(ts) || r.IntN(4) == 0) {
			return string(text), true
		}
		next := nextBytes(ts)
		if len(next) == 0 {
			if complete(ts) { // a number that cannot grow
				return string(text), true
			}
			t.Fatalf("dead end after %q", text)
		}
		b := next[r.IntN(len(next))]
		if r.IntN(2) == 0 {
			// Often a byte of short texts, so that walks end: keys like "b".
			var short []byte
			for _, c := range next {
				if strings.IndexByte(`"}]:,b1{[`, c) >= 0 {
					short = append(short, c)
				}
			}
			if len(short) > 0 {
				b = short[r.IntN(len(short))]
			}
		}
		if len(text) > limit/2 {
			// Prefer bytes that close things.
			for _, c := range []byte(`"}]`) {
				if r.IntN(2) == 0 && contains(next, c) {
					b = c
				}
			}
		}
		text = append(text, b)
		ts = stepAll(nil, ts, b, nil)
	}
	return string(text), complete(ts)
}

func contains(bs []byte, b byte) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

// accept reads text whole against g.
func accept(g *Grammar, text string) bool {
	ts := start(g)
	for i := 0; i < len(text) && len(ts) > 0; i++ {
		ts = stepAll(nil, ts, text[i], nil)
	}
	return complete(ts)
}
