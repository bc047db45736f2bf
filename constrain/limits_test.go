package constrain

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestLimitErrors(t *testing.T) {
	alts := func(n int, alt string) string {
		return strings.TrimSuffix(strings.Repeat(alt+",", n), ",")
	}
	var chain strings.Builder
	chain.WriteString(`{"$ref": "#/$defs/a0", "$defs": {`)
	for i := range 200 {
		fmt.Fprintf(&chain, `"a%d": {"anyOf": [{"$ref": "#/$defs/a%d"}, %s]}, `, i, i+1, alts(8, `{"type": "null"}`))
	}
	chain.WriteString(`"a200": {"type": "null"}}}`)
	for _, c := range []struct{ schema, want string }{
		{`{"oneOf": [` + alts(maxOneOf+1, `{"type": "string"}`) + `]}`, `at most 128 are supported (use anyOf)`},
		{`{"anyOf": [` + alts(maxChoices+1, `{"type": "null"}`) + `]}`, `leads to more than 1024 alternatives`},
		{chain.String(), `leads to more than 1024 alternatives`},
		{`{"type": "array", "items": {"anyOf": [` + alts(maxSchemas, `{"type": "null"}`) + `]}}`, `more than 16384 schemas`},
		{`{"type": ["string", "widget"]}`, `unknown type "widget"`},
		{strings.Repeat(`{"items": `, 600) + `{}` + strings.Repeat(`}`, 600), `schemas nested more than 512 deep`},
		{strings.Repeat(`{"type": "array", "minItems": 1, "items": `, maxDepth) + `{}` + strings.Repeat(`}`, maxDepth), `nests deeper than 64`},
	} {
		_, err := CompileSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.80s: error %v, want one containing %q", c.schema, err, c.want)
		}
	}
	// Many unions of many alternatives: each fits, all together do not.
	var many []string
	for i := range 80 {
		many = append(many, fmt.Sprintf(`{"type": "array", "maxItems": %d, "items": {"anyOf": [{"type": "string", "maxLength": %d}, {"$ref": "#/$defs/N"}]}}`, i, i))
	}
	_, err := CompileSchema([]byte(`{"$defs": {"N": {"anyOf": [` + alts(1000, `{"type": "null"}`) + `]}}, "anyOf": [` + strings.Join(many, ",") + `]}`))
	if err == nil || !strings.Contains(err.Error(), "alternatives in all") {
		t.Errorf("many large unions: %v", err)
	}
}

// hostileShapes are schemas of about size bytes that made compiling or
// masking take long before the limits: long chains of references, unions
// of many alternatives under many threads, long lists, large oneOfs.
func hostileShapes(size int) map[string]string {
	m := map[string]string{}
	fill := func(head, tail string, item func(i int) string) string {
		var b strings.Builder
		b.WriteString(head)
		for i := 0; b.Len() < size-len(tail)-200; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(item(i))
		}
		b.WriteString(tail)
		return b.String()
	}
	m["oneOfStrings"] = fill(`{"oneOf":[`, `]}`, func(i int) string { return fmt.Sprintf(`{"type":"string","minLength":%d,"maxLength":%d}`, i, i) })
	m["nestChain"] = fill(`{"$ref":"#/$defs/a0","$defs":{`, `}}`, func(i int) string {
		return fmt.Sprintf(`"a%d":{"type":"array","minItems":1,"items":{"anyOf":[{"$ref":"#/$defs/a%d"},{"type":"null"}]}}`, i, i+1)
	})
	m["flattenChain"] = fill(`{"$ref":"#/$defs/a0","$defs":{`, `}}`, func(i int) string {
		return fmt.Sprintf(`"a%d":{"anyOf":[{"$ref":"#/$defs/a%d"},{"type":"null"}]}`, i, i+1)
	})
	m["refChain"] = fill(`{"$ref":"#/$defs/a0","$defs":{`, `}}`, func(i int) string { return fmt.Sprintf(`"a%d":{"$ref":"#/$defs/a%d"}`, i, i+1) })
	m["manyNulls"] = fill(`{"type":"array","items":{"anyOf":[`, `]}}`, func(int) string { return `{"type":"null"}` })
	m["typeList"] = fill(`{"type":[`, `]}`, func(i int) string { return fmt.Sprintf(`"t%d"`, i) })
	m["required"] = fill(`{"type":"object","required":[`, `]}`, func(i int) string { return fmt.Sprintf(`"r%d"`, i) })
	m["oneOfEnums"] = fill(`{"oneOf":[{"enum":[`, `]},{"type":"string","maxLength":3}]}`, func(i int) string { return fmt.Sprintf(`"value%d"`, i) })
	// Accepted: these compile, and their masks are bounded.
	m["typeListSame"] = fill(`{"type":[`, `]}`, func(int) string { return `"string"` })
	m["requiredSame"] = fill(`{"type":"object","properties":{"a":{}},"required":[`, `]}`, func(int) string { return `"a"` })
	m["enum"] = fill(`{"type":"array","items":{"enum":[`, `]}}`, func(i int) string { return fmt.Sprintf(`"v%d"`, i) })
	var arrays, nulls, strs []string
	for i := range maxThreads {
		arrays = append(arrays, fmt.Sprintf(`{"type":"array","maxItems":%d,"items":{"$ref":"#/$defs/U"}}`, 1000+i))
	}
	for i := range maxChoices {
		nulls = append(nulls, `{"type":"null"}`)
		strs = append(strs, fmt.Sprintf(`{"type":"string","maxLength":%d}`, 5000+i))
	}
	m["threadsTimesNulls"] = `{"$defs":{"U":{"anyOf":[` + strings.Join(nulls, ",") + `]}},"anyOf":[` + strings.Join(arrays, ",") + `]}`
	m["threadsTimesStrings"] = `{"$defs":{"U":{"anyOf":[` + strings.Join(strs, ",") + `]}},"anyOf":[` + strings.Join(arrays, ",") + `]}`
	var objects []string
	for i := range maxOneOf {
		var props []string
		for j := range maxProperties / 2 {
			props = append(props, fmt.Sprintf(`"p%d":{"$ref":"#"}`, j))
		}
		objects = append(objects, fmt.Sprintf(`{"type":"object","properties":{%s,"k":{"const":%d}},"required":["k"]}`, strings.Join(props, ","), i))
	}
	m["oneOfObjects"] = `{"oneOf":[` + strings.Join(objects, ",") + `]}`
	return m
}

// TestHostileSchemas: large schemas compile, or are refused, quickly. The
// bound asserted is loose (the test machine is shared); the times are
// logged. At 1 MiB to keep the suite fast: the limits make the time linear
// in the size, under a second at the server's 4 MiB body limit too.
func TestHostileSchemas(t *testing.T) {
	size := 1 << 20
	if testing.Short() {
		size = 256 << 10
	}
	refused := map[string]bool{
		"oneOfStrings": true, "nestChain": true, "flattenChain": true, "refChain": true,
		"manyNulls": true, "typeList": true, "required": true, "oneOfEnums": true,
	}
	const compileBound = 3 * time.Second
	for name, schema := range hostileShapes(size) {
		t0 := time.Now()
		g, err := CompileSchema([]byte(schema))
		d := time.Since(t0)
		if d > compileBound {
			t.Errorf("%s: compiling %d bytes took %v", name, len(schema), d)
		}
		if refused[name] != (err != nil) {
			t.Errorf("%s: error %v", name, err)
		}
		t.Logf("%-20s %8d bytes, compiled in %v: %v", name, len(schema), d, err)
		if err != nil || len(schema) > 50<<10 {
			continue // (and the reference validator takes long on large ones)
		}
		r := rand.New(rand.NewPCG(23, 24))
		for range 3 {
			if text, ok := randomText(t, g, r, 200); ok {
				checkValid(t, validator(t, schema), text)
			}
		}
	}
}

// TestHostileMasks: the masks of the schemas that compile, in the states
// that cost most (many threads starting a union's values, many readings
// inside a string), on the SmolLM2 vocabulary.
func TestHostileMasks(t *testing.T) {
	_, v := smolLM2Vocab(t)
	logits := make([]float32, v.Size())
	for name, schema := range hostileShapes(256 << 10) {
		g, err := CompileSchema([]byte(schema))
		if err != nil {
			continue
		}
		var worst time.Duration
		for _, prefix := range []string{``, `[`, `["`, `["ab`, `[n`, `{"k":`} {
			c := NewConstraint(g, v)
			for i := 0; i < len(prefix) && len(c.ts) > 0; i++ {
				c.ts = stepAll(nil, c.ts, prefix[i], nil)
			}
			if len(c.ts) == 0 {
				continue
			}
			t0 := time.Now()
			if err := c.Mask(logits); err != nil {
				t.Fatalf("%s after %q: %v", name, prefix, err)
			}
			worst = max(worst, time.Since(t0))
		}
		if worst > raceSlowdown*time.Second {
			t.Errorf("%s: a mask took %v", name, worst)
		}
		t.Logf("%-20s slowest mask %v", name, worst)
	}
}
