package constrain

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRandomWalksValidate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for name, schema := range testSchemas {
		t.Run(name, func(t *testing.T) {
			g, err := CompileSchema([]byte(schema))
			if err != nil {
				t.Fatal(err)
			}
			v := validator(t, schema)
			whole, mutants := 0, 0
			for range 100 {
				text, ok := randomText(t, g, r, 300)
				if !ok {
					continue
				}
				whole++
				checkValid(t, v, text)
				// Adversarial neighbours: whatever of them the grammar
				// takes whole must validate too.
				for range 10 {
					if m := mutate(r, text); accept(g, m) {
						checkValid(t, v, m)
						mutants++
					}
				}
			}
			want := 30
			if name == "open" {
				want = 1 // a required key among random names: walks seldom end
			}
			if whole < want {
				t.Errorf("only %d of 100 walks ended in a whole value", whole)
			}
			t.Logf("%d whole texts, %d mutants accepted and validated", whole, mutants)
		})
	}
}

func TestAnyValueAndObject(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		g      *Grammar
		object bool
	}{{AnyValue(), false}, {AnyObject(), true}} {
		for range 100 {
			text, ok := randomText(t, c.g, r, 400)
			if !ok {
				continue
			}
			checkValid(t, nil, text)
			if text = strings.TrimLeft(text, " \n\t"); c.object && text[0] != '{' {
				t.Fatalf("any object: %q", text)
			}
		}
	}
}

// randomValue builds a random JSON value as Go data.
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case k == 0 && depth < 4:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	case k == 1 && depth < 4:
		var a []any
		for range r.IntN(4) {
			a = append(a, randomValue(r, depth+1))
		}
		return a
	case k == 2:
		return randomString(r)
	case k == 3:
		return r.NormFloat64() * 1e3
	case k == 4:
		return r.IntN(1000) - 500
	case k == 5:
		return r.IntN(2) == 0
	case k == 6:
		return nil
	}
	return float64(r.IntN(100)) / 8
}

// mutate inserts, deletes, replaces or duplicates a few bytes of text.
func mutate(r *rand.Rand, text string) string {
	const alphabet = "{}[]\":,-+.eE0123456789 \n\ttrufalsn\\u/x\x00\xff\xc3\xa9"
	b := []byte(text)
	for range 1 + r.IntN(3) {
		i := r.IntN(len(b) + 1)
		c := alphabet[r.IntN(len(alphabet))]
		if len(b) > 0 && r.IntN(2) == 0 {
			c = b[r.IntN(len(b))] // a byte of the text itself
		}
		switch r.IntN(4) {
		case 0:
			b = append(b[:i], append([]byte{c}, b[i:]...)...)
		case 1:
			if i < len(b) {
				b = append(b[:i], b[i+1:]...)
			}
		case 2:
			if i < len(b) {
				b[i] = c
			}
		case 3:
			if j := i + r.IntN(8); j <= len(b) {
				b = append(b[:j], append([]byte(string(b[i:j])), b[j:]...)...)
			}
		}
	}
	return string(b)
}

func randomString(r *rand.Rand) string {
	const alphabet = "ab \"\\/\n\té€😀\x01"
	runes := []rune(alphabet)
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

// TestAnyValueAgreesWithEncodingJSON checks that texts json.Marshal writes
// are accepted, and that mutations of them are accepted only when they are
// still JSON.
func TestAnyValueAgreesWithEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	g := AnyValue()
	for range 3000 {
		data, err := json.Marshal(randomValue(r, 0))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if !accept(g, text) {
			t.Fatalf("refused %q", text)
		}
		b := []byte(mutate(r, text))
		if accept(g, string(b)) && !json.Valid(b) {
			t.Fatalf("accepted %q, which is not JSON", b)
		}
	}
}

func TestKnownTexts(t *testing.T) {
	for _, c := range []struct {
		schema, text string
		want         bool
	}{
		{`true`, `{"a": [1, 2.5e-3, "x", null, true, false, {}]}`, true},
		{`true`, "{\n  \"a\": 1\n}", true},
		{`true`, "{\n                      \"a\": 1}", false}, // 22 indent characters
		{`true`, `{"a":  1}`, false},                          // two spaces
		{`true`, `{"a": 1} `, false},                          // trailing space
		{`true`, `01`, false},
		{`true`, `-`, false},
		{`true`, `1.`, false},
		{`true`, `"\ud800"`, false},
		{`true`, `"\u00e9\n"`, true},
		{`true`, "\"\xc3\"", false},
		{`true`, "\"\xed\xa0\x80\"", false}, // a surrogate in UTF-8
		{`true`, `{"a\n": 1}`, true},
		{`{"properties": {"a": {}}}`, `{"b\n": 1}`, false}, // escapes in names beside named properties
		{`{"type": "integer"}`, `12`, true},
		{`{"type": "integer"}`, `1.5`, false},
		{`{"type": "integer"}`, `1e5`, false},
		{`{"type": "number"}`, `-0.5E+10`, true},
		{`{"type": "number"}`, `123456789012345678901`, false}, // 21 digits
		{`{"type": "string", "minLength": 2, "maxLength": 3}`, `"é😀"`, true},
		{`{"type": "string", "minLength": 2, "maxLength": 3}`, `"a"`, false},
		{`{"type": "string", "minLength": 2, "maxLength": 3}`, `"abcd"`, false},
		{`{"type": "string", "maxLength": 2}`, `"\n\u0041"`, true},
		{`{"enum": ["a", 1, [1, 2]]}`, `[1,2]`, true},
		{`{"enum": ["a", 1, [1, 2]]}`, `[1, 2]`, false}, // literals are written compactly
		{`{"enum": [1, 12]}`, `1`, true},
		{`{"enum": [1, 12]}`, `12`, true},
		{`{"const": "x"}`, `"x"`, true},
		{`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false}`, `{}`, false},
		{`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false}`, `{"a": 1, "a": 2}`, false},
		{`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false}`, `{"b": 1}`, false},
		{`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}`, `{"b": [1], "a": 1}`, true},
		{`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}`, `{"a": "x"}`, false},
		{`{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}`, `{"ab": "x", "a": 2}`, true},
		{`{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}`, `{"ab": 1}`, false},
		{`{"type": "array", "minItems": 1, "maxItems": 2}`, `[]`, false},
		{`{"type": "array", "minItems": 1, "maxItems": 2}`, `[1,2,3]`, false},
		{`{"type": "array", "minItems": 1, "maxItems": 2}`, `[1, [2]]`, true},
		{`{"type": ["string", "null"]}`, `null`, true},
		{`{"type": "boolean"}`, `true`, true},
		{`{"type": "boolean"}`, `1`, false},
		{`{"type": "null"}`, `null`, true},
		{`{"type": "string", "enum": ["a", 1]}`, `1`, false},
		{`{"type": "integer", "enum": [1, 1.5, 2.0]}`, `2.0`, true},
		{`{"type": "integer", "enum": [1, 1.5, 2.0]}`, `1.5`, false},
	} {
		g, err := CompileSchema([]byte(c.schema))
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		if got := accept(g, c.text); got != c.want {
			t.Errorf("schema %s: accept(%q) = %v, want %v", c.schema, c.text, got, c.want)
		}
	}
}

func TestDepthIsBounded(t *testing.T) {
	g := AnyValue()
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	if !accept(g, deep) {
		t.Errorf("refused %d nested arrays", maxDepth)
	}
	if accept(g, "["+deep+"]") {
		t.Errorf("accepted %d nested arrays", maxDepth+1)
	}
	// A recursive schema whose values need nesting keeps no dead end near
	// the bound: its optional deeper branch is not offered.
	r := rand.New(rand.NewPCG(7, 8))
	g, err := CompileSchema([]byte(testSchemas["nested"]))
	if err != nil {
		t.Fatal(err)
	}
	ts := start(g)
	var text []byte
	for range 20000 {
		if finished(ts) {
			break
		}
		next := nextBytes(ts)
		if len(next) == 0 {
			t.Fatalf("dead end after %q", text)
		}
		// Prefer going deeper: '[' and '{' and the key "kids".
		b := next[r.IntN(len(next))]
		for _, c := range []byte(`[{k":1`) {
			if contains(next, c) {
				b = c
				break
			}
		}
		text = append(text, b)
		ts = stepAll(nil, ts, b, nil)
	}
	for !finished(ts) {
		next := nextBytes(ts)
		b := next[0]
		for _, c := range []byte(`]}1"`) {
			if contains(next, c) {
				b = c
				break
			}
		}
		text = append(text, b)
		ts = stepAll(nil, ts, b, nil)
	}
	checkValid(t, validator(t, testSchemas["nested"]), string(text))
	level, deepest := 0, 0
	for _, c := range text {
		switch c {
		case '[', '{':
			level++
			deepest = max(deepest, level)
		case ']', '}':
			level--
		}
	}
	// Strings inside are one level more than their brackets.
	if deepest < maxDepth-2 {
		t.Errorf("nested only %d deep: %.300q", deepest, text)
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"type": "string", "format": "date-time"}`, `keyword "format" is not supported`},
		{`{"type": "string", "pattern": "^a"}`, `keyword "pattern"`},
		{`{"type": "integer", "minimum": 0}`, `keyword "minimum"`},
		{`{"type": "object", "properties": {"a": {"type": "number", "multipleOf": 2}}}`, `#/properties/a: keyword "multipleOf"`},
		{`{"type": "array", "uniqueItems": true}`, `keyword "uniqueItems"`},
		{`{"type": "array", "prefixItems": [{}]}`, `keyword "prefixItems"`},
		{`{"type": "array", "items": [{}]}`, `tuple`},
		{`{"not": {}}`, `keyword "not"`},
		{`{"if": {}, "then": {}}`, `keyword "if"`},
		{`{"type": "object", "patternProperties": {}}`, `keyword "patternProperties"`},
		{`{"type": "widget"}`, `unknown type "widget"`},
		{`{"$ref": "http://example.com/s.json"}`, `only references within the schema`},
		{`{"$ref": "#/$defs/missing"}`, `does not resolve`},
		{`{"oneOf": [{"type": "integer"}, {"type": "number"}]}`, `use anyOf`},
		{`{"oneOf": [{"type": "object"}, {"type": "object", "properties": {"a": {}}}]}`, `use anyOf`},
		{`{"allOf": [{}, {}]}`, `only allOf of one schema`},
		{`{"type": "object", "anyOf": [{}]}`, `anyOf beside type`},
		{`{"type": "string", "enum": [1, 2]}`, `no value of enum/const has the schema's type`},
		{`{"type": "string", "minLength": 3, "maxLength": 2}`, `minLength 3 > maxLength 2`},
		{`{"type": "array", "minItems": -1}`, `not a non-negative integer`},
		{`{"type": "object", "required": ["a"], "additionalProperties": false}`, `"a" is required but not in properties`},
		{`{"type": "object", "properties": {"a": false}, "required": ["a"]}`, `admits no value`},
		{`{"$ref": "#"}`, `refers to itself`},
		{`false`, `admits no value`},
		{`{"type": "object", "properties": {"a\"b": {}}}`, `needs escapes`},
		{`{"type": "object", "minProperties": 1}`, `keyword "minProperties"`},
		{`{"nullable": true}`, `keyword "nullable"`},
		{`[]`, `must be an object or a boolean`},
		{`{"type": "object"`, `not JSON`},
	} {
		_, err := CompileSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.schema, err, c.want)
		}
	}
}

func TestOneOfDisjointAccepted(t *testing.T) {
	for _, s := range []string{
		`{"oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}`,
		`{"oneOf": [{"const": 1}, {"const": 2}]}`,
		`{"oneOf": [{"enum": ["a", "b"]}, {"type": "string", "minLength": 2}]}`,
		`{"oneOf": [{"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": false}, {"type": "object", "properties": {"b": {}}, "required": ["b"], "additionalProperties": false}]}`,
		testSchemas["defs"],
	} {
		if _, err := CompileSchema([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{
		`{"oneOf": [{"const": 1}, {"type": "integer"}]}`,
		`{"oneOf": [{"const": 2.0}, {"type": "integer"}]}`,
		`{"oneOf": [{"enum": ["a", "bc"]}, {"type": "string", "minLength": 2}]}`,
	} {
		if _, err := CompileSchema([]byte(s)); err == nil {
			t.Errorf("%s: accepted overlapping oneOf", s)
		}
	}
}

func TestFinished(t *testing.T) {
	for _, c := range []struct {
		schema, text    string
		complete, final bool
	}{
		{`{"type": "integer"}`, `0`, true, true},
		{`{"type": "integer"}`, `-0`, true, true},
		{`{"type": "integer"}`, `12`, true, false},
		{`{"type": "integer"}`, `-`, false, false},
		{`{"type": "integer"}`, strings.Repeat("9", maxIntDigits), true, true},
		{`{"type": "number"}`, `0`, true, false},
		{`{"type": "number"}`, `1e99`, true, true},
		{`{"type": "number"}`, `1e999`, false, false},
		{`{"enum": ["a", 1, 12]}`, `"a"`, true, true},
		{`{"enum": ["a", 1, 12]}`, `1`, true, false},
		{`true`, `{}`, true, true},
		{`true`, `{"a": 1`, false, false},
		{`{"anyOf": [{"type": "integer"}, {"type": "string"}]}`, `"x"`, true, true},
	} {
		g, err := CompileSchema([]byte(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		ts := start(g)
		for i := range len(c.text) {
			ts = stepAll(nil, ts, c.text[i], nil)
		}
		if complete(ts) != c.complete || finished(ts) != c.final {
			t.Errorf("%s after %q: complete %v finished %v, want %v %v", c.schema, c.text, complete(ts), finished(ts), c.complete, c.final)
		}
	}
}

// TestManyAlternatives: a union of more alternatives than maxThreads that
// all begin alike keeps the first maxThreads readings; what it writes still
// validates.
func TestManyAlternatives(t *testing.T) {
	var alts []string
	for i := range maxThreads + 16 {
		alts = append(alts, fmt.Sprintf(`{"type": "object", "properties": {"k": {"const": %d}}, "required": ["k"], "additionalProperties": false}`, i))
	}
	schema := `{"anyOf": [` + strings.Join(alts, ",") + `]}`
	g, err := CompileSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	if !accept(g, `{"k":3}`) || accept(g, fmt.Sprintf(`{"k":%d}`, maxThreads+3)) {
		t.Error("want the first alternatives kept and the last ones dropped")
	}
	v := validator(t, schema)
	r := rand.New(rand.NewPCG(9, 10))
	for range 20 {
		if text, ok := randomText(t, g, r, 100); ok {
			checkValid(t, v, text)
		}
	}
}

// TestUnionCycles: references that loop through anyOf alone neither hang
// nor recurse forever.
func TestUnionCycles(t *testing.T) {
	cyclic := `{"$defs": {
		"A": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "string"}]},
		"B": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/A"}}]}
	}, "$ref": "#/$defs/A"}`
	g, err := CompileSchema([]byte(cyclic))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{`"x"`, `12`, `[1,["a",[]]]`} {
		if !accept(g, text) {
			t.Errorf("refused %s", text)
		}
	}
	if accept(g, `true`) {
		t.Error("accepted true")
	}
	v := validator(t, cyclic)
	r := rand.New(rand.NewPCG(15, 16))
	for range 50 {
		if text, ok := randomText(t, g, r, 200); ok {
			checkValid(t, v, text)
		}
	}
	empty := `{"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/B"}]}, "B": {"anyOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"}`
	if _, err := CompileSchema([]byte(empty)); err == nil || !strings.Contains(err.Error(), "admits no value") {
		t.Errorf("a cycle of unions alone: %v", err)
	}
}

// TestHostileOneOf: proving many nested alternatives disjoint is bounded.
func TestHostileOneOf(t *testing.T) {
	var inner []string
	for i := range 30 {
		inner = append(inner, fmt.Sprintf(`{"type": "object", "properties": {"k%d": {"$ref": "#"}}}`, i))
	}
	var outer []string
	for range 30 {
		outer = append(outer, `{"anyOf": [`+strings.Join(inner, ",")+`]}`)
	}
	schema := `{"oneOf": [` + strings.Join(outer, ",") + `]}`
	t0 := time.Now()
	_, err := CompileSchema([]byte(schema))
	if err == nil || !strings.Contains(err.Error(), "use anyOf") {
		t.Errorf("overlapping oneOf: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("compiling took %v", d)
	}
}

func TestDedupe(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	nodes := []*node{{id: 0}, {id: 1}, {id: 2}}
	links := []*link{nil, {}, {}}
	for range 300 {
		var ts []thread
		for range 1 + r.IntN(3*maxThreads) {
			ts = append(ts, thread{
				top:    frame{n: nodes[r.IntN(3)], count: int32(r.IntN(4)), phase: phase(r.IntN(2))},
				parent: links[r.IntN(3)],
				depth:  int32(r.IntN(2)),
			})
		}
		// Reference: the first of each distinct thread, in order, among
		// the first 2*maxThreads when there are more than 8.
		in := ts
		if len(in) > 8 {
			in = in[:min(len(in), 2*maxThreads)]
		}
		var want []thread
		for _, x := range in {
			if !slices.ContainsFunc(want, func(y thread) bool { return same(&x, &y) }) {
				want = append(want, x)
			}
		}
		got := dedupe(slices.Clone(ts))
		if len(got) != len(want) {
			t.Fatalf("%d threads: dedupe kept %d, want %d", len(ts), len(got), len(want))
		}
		for i := range got {
			if !same(&got[i], &want[i]) {
				t.Fatalf("thread %d differs", i)
			}
		}
	}
}
