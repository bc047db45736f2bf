package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// annotations are keywords that say nothing about which values are valid.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$defs": true, "definitions": true,
	"title": true, "description": true, "default": true, "examples": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// keywordType names the JSON type each supported assertion applies to.
var keywordType = map[string]string{
	"properties": "object", "required": "object", "additionalProperties": "object",
	"items": "array", "minItems": "array", "maxItems": "array",
	"minLength": "string", "maxLength": "string",
}

// CompileSchema compiles a JSON Schema (the value of OpenAI's
// response_format.json_schema.schema) into a grammar whose texts all
// validate against it.
//
// Supported: type (a name or a list of names: object, array, string, number,
// integer, boolean, null), properties, required, additionalProperties
// (false, true or a schema; absent means any, as in JSON Schema), items (a
// schema), minItems, maxItems, minLength, maxLength, enum, const, anyOf,
// oneOf (when its alternatives provably exclude each other, else an error
// that suggests anyOf), allOf of one schema, $ref to "#", "#/$defs/…" or
// "#/definitions/…" (recursion included), boolean schemas, and annotations
// (title, description, default, examples, $schema, $comment, deprecated,
// readOnly, writeOnly; $id at the root only, since a nested one changes
// what "#/..." refers to below it). Any other keyword is an error that names
// it and where it is, never silently ignored: format, pattern, minimum,
// maximum, multipleOf, uniqueItems: true, prefixItems, patternProperties,
// if/then/else, not, …
//
// Large schemas are refused past the limits the package documentation
// lists (schemas per document, alternatives per union, ...).
//
// Properties may come in any order. Numbers have at most 20 integer, 20
// fraction and 2 exponent digits; strings never use \u escapes of
// surrogates; names of additional properties use no escapes.
func CompileSchema(schema []byte) (*Grammar, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("constrain: schema is not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("constrain: schema: text after the JSON value")
	}
	c := &compiler{doc: doc, refs: map[string]*node{}, pending: map[*node]bool{}}
	root, err := c.compile(doc, "#")
	if err != nil {
		return nil, fmt.Errorf("constrain: schema: %w", err)
	}
	if err := finish(root); err != nil {
		return nil, fmt.Errorf("constrain: schema: %w", err)
	}
	if err := c.checkOneOf(); err != nil {
		return nil, fmt.Errorf("constrain: schema: %w", err)
	}
	return &Grammar{root: root}, nil
}

type compiler struct {
	doc     any
	refs    map[string]*node
	pending map[*node]bool // the nodes of references still being compiled
	any     *node          // the node of any value, made on first use
	schemas int            // schemas compiled so far
	nesting int            // schemas being compiled, one inside the other
	oneOf   []oneOf        // checked once every node is finished
}

type oneOf struct {
	path string
	alts []*node
}

// maxSchemas bounds the schemas (objects and booleans) one document may
// compile, so that a large document is refused before it takes long;
// maxNesting bounds how deep they nest, $ref targets included, so that
// their paths (for errors) stay short.
const (
	maxSchemas = 1 << 14
	maxNesting = 512
)

// anyValue returns the node of any value, one for the whole grammar.
func (c *compiler) anyValue() *node {
	if c.any == nil {
		c.any = newAny()
	}
	return c.any
}

func (c *compiler) compile(s any, path string) (*node, error) {
	if c.schemas++; c.schemas > maxSchemas {
		return nil, fmt.Errorf("%s: more than %d schemas; the document is too large", path, maxSchemas)
	}
	if c.nesting++; c.nesting > maxNesting {
		if len(path) > 200 {
			path = path[:200] + "..."
		}
		return nil, fmt.Errorf("%s: schemas nested more than %d deep (through properties, items, combinators or $ref)", path, maxNesting)
	}
	defer func() { c.nesting-- }()
	switch s := s.(type) {
	case bool:
		if s {
			return c.anyValue(), nil
		}
		return &node{kind: kindUnion}, nil // no alternative: no value
	case map[string]any:
		return c.compileObject(s, path)
	}
	return nil, fmt.Errorf("%s: a schema must be an object or a boolean, not %s", path, jsonType(s))
}

func (c *compiler) compileObject(s map[string]any, path string) (*node, error) {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)    // the first unsupported keyword, always the same one
	var asserts []string // keywords other than annotations, sorted
	for _, k := range keys {
		if k == "$id" && path != "#" {
			// A nested $id changes what "#/..." means below it.
			return nil, fmt.Errorf("%s: keyword \"$id\" is supported only at the root", path)
		}
		if annotations[k] {
			continue
		}
		switch k {
		case "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref":
		default:
			if keywordType[k] == "" {
				if k == "uniqueItems" && s[k] == false {
					continue // asserts nothing
				}
				return nil, fmt.Errorf("%s: keyword %q is not supported", path, k)
			}
		}
		asserts = append(asserts, k)
	}
	alone := func(k string) error {
		if len(asserts) > 1 {
			return fmt.Errorf("%s: %s beside %s is not supported (put them in one schema)", path, k, strings.Join(slices.DeleteFunc(slices.Clone(asserts), func(x string) bool { return x == k }), ", "))
		}
		return nil
	}

	if ref, ok := s["$ref"]; ok {
		if err := alone("$ref"); err != nil {
			return nil, err
		}
		r, ok := ref.(string)
		if !ok {
			return nil, fmt.Errorf("%s/$ref: want a string", path)
		}
		return c.ref(r, path)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		v, ok := s[k]
		if !ok {
			continue
		}
		if err := alone(k); err != nil {
			return nil, err
		}
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return nil, fmt.Errorf("%s/%s: want a non-empty array of schemas", path, k)
		}
		if k == "oneOf" && len(list) > maxOneOf {
			return nil, fmt.Errorf("%s/oneOf: %d alternatives; at most %d are supported (use anyOf)", path, len(list), maxOneOf)
		}
		if k == "allOf" {
			if len(list) != 1 {
				return nil, fmt.Errorf("%s/allOf: %d schemas; only allOf of one schema is supported", path, len(list))
			}
			return c.compile(list[0], path+"/allOf/0")
		}
		u := &node{kind: kindUnion}
		for i, alt := range list {
			n, err := c.compile(alt, path+"/"+k+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			u.alts = append(u.alts, n)
		}
		if k == "oneOf" && len(u.alts) > 1 {
			c.oneOf = append(c.oneOf, oneOf{path + "/oneOf", u.alts})
		}
		return u, nil
	}

	types, err := typeList(s["type"], path)
	if err != nil {
		return nil, err
	}
	_, hasEnum := s["enum"]
	_, hasConst := s["const"]
	if hasEnum || hasConst {
		return literals(s, types, asserts, path)
	}
	if types == nil {
		// No type: the keywords present say which one (a value of another
		// type would validate too, but need not be produced).
		seen := map[string]bool{}
		for _, k := range asserts {
			if t := keywordType[k]; t != "" && !seen[t] {
				seen[t] = true
				types = append(types, t)
			}
		}
		switch len(types) {
		case 0:
			return c.anyValue(), nil
		case 1:
		default:
			return nil, fmt.Errorf("%s: keywords of types %s without a type", path, strings.Join(types, " and "))
		}
	}
	u := &node{kind: kindUnion}
	for _, t := range types {
		n, err := c.typed(s, t, path)
		if err != nil {
			return nil, err
		}
		u.alts = append(u.alts, n)
	}
	if len(u.alts) == 1 {
		return u.alts[0], nil
	}
	return u, nil
}

// typed compiles the assertions of s that apply to type t.
func (c *compiler) typed(s map[string]any, t, path string) (*node, error) {
	switch t {
	case "null":
		return literalNode("null"), nil
	case "boolean":
		return literalNode("true", "false"), nil
	case "number", "integer":
		return &node{kind: kindNumber, integer: t == "integer"}, nil
	case "string":
		n := &node{kind: kindString, maxLen: -1}
		var err error
		if n.minLen, err = count(s, "minLength", 0, path); err != nil {
			return nil, err
		}
		if n.maxLen, err = count(s, "maxLength", -1, path); err != nil {
			return nil, err
		}
		if n.maxLen >= 0 && n.minLen > n.maxLen {
			return nil, fmt.Errorf("%s: minLength %d > maxLength %d", path, n.minLen, n.maxLen)
		}
		return n, nil
	case "array":
		n := &node{kind: kindArray}
		var err error
		if n.minItems, err = count(s, "minItems", 0, path); err != nil {
			return nil, err
		}
		if n.maxItems, err = count(s, "maxItems", -1, path); err != nil {
			return nil, err
		}
		if n.maxItems >= 0 && n.minItems > n.maxItems {
			return nil, fmt.Errorf("%s: minItems %d > maxItems %d", path, n.minItems, n.maxItems)
		}
		n.items = c.anyValue()
		if items, ok := s["items"]; ok {
			if _, isList := items.([]any); isList {
				return nil, fmt.Errorf("%s/items: an array of schemas (tuple) is not supported", path)
			}
			if n.items, err = c.compile(items, path+"/items"); err != nil {
				return nil, err
			}
		}
		return n, nil
	case "object":
		return c.object(s, path)
	}
	return nil, fmt.Errorf("%s/type: unknown type %q", path, t)
}

func (c *compiler) object(s map[string]any, path string) (*node, error) {
	n := &node{kind: kindObject, additional: c.anyValue()}
	if add, ok := s["additionalProperties"]; ok {
		if add == false {
			n.additional = nil
		} else {
			var err error
			if n.additional, err = c.compile(add, path+"/additionalProperties"); err != nil {
				return nil, err
			}
		}
	}
	var props map[string]any
	if p, ok := s["properties"]; ok {
		if props, ok = p.(map[string]any); !ok {
			return nil, fmt.Errorf("%s/properties: want an object", path)
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) > maxProperties {
		return nil, fmt.Errorf("%s/properties: %d properties; at most %d are supported", path, len(names), maxProperties)
	}
	required := map[string]bool{}
	if r, ok := s["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return nil, fmt.Errorf("%s/required: want an array of names", path)
		}
		for _, x := range list {
			name, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s/required: %v is not a name", path, x)
			}
			required[name] = true
			if _, named := props[name]; !named && !slices.Contains(names, name) {
				if n.additional == nil {
					return nil, fmt.Errorf("%s/required: %q is required but not in properties, and additionalProperties is false", path, name)
				}
				names = append(names, name) // an additional property that must appear
				if len(names) > maxProperties {
					break // refused below, before the list gets long to search
				}
			}
		}
	}
	if len(names) > maxProperties {
		return nil, fmt.Errorf("%s/properties: %d properties; at most %d are supported", path, len(names), maxProperties)
	}
	for i, name := range names {
		p := property{name: name, value: n.additional}
		if ps, ok := props[name]; ok {
			var err error
			if p.value, err = c.compile(ps, path+"/properties/"+escapePointer(name)); err != nil {
				return nil, err
			}
		}
		if n.additional != nil && bytes.IndexByte(encodeString(name), '\\') >= 0 {
			return nil, fmt.Errorf("%s/properties: the name %q needs escapes in JSON, which is not supported beside additional properties (set additionalProperties to false)", path, name)
		}
		if required[name] {
			n.required |= 1 << i
		}
		n.props = append(n.props, p)
	}
	return n, nil
}

// ref resolves a local reference; a reference already being compiled (a
// recursive schema) gets the node that will hold it.
func (c *compiler) ref(r, path string) (*node, error) {
	if n, ok := c.refs[r]; ok {
		return n, nil
	}
	if r != "#" && !strings.HasPrefix(r, "#/") {
		return nil, fmt.Errorf("%s/$ref: %q is not supported (only references within the schema, \"#/...\")", path, r)
	}
	target := c.doc
	if r != "#" {
		for i, tok := range strings.Split(r[2:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := target.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s/$ref: %q does not resolve", path, r)
			}
			if _, ok := m["$id"]; ok && i > 0 {
				return nil, fmt.Errorf("%s/$ref: %q leads through a schema with keyword \"$id\", which is supported only at the root", path, r)
			}
			if target, ok = m[tok]; !ok {
				return nil, fmt.Errorf("%s/$ref: %q does not resolve", path, r)
			}
		}
	}
	n := &node{kind: kindUnion} // no value until the target is compiled into it
	c.refs[r] = n
	c.pending[n] = true
	compiled, err := c.compile(target, r)
	delete(c.pending, n)
	if err != nil {
		return nil, err
	}
	switch {
	case compiled == n:
		return nil, fmt.Errorf("%s/$ref: %q refers to itself", path, r)
	case c.pending[compiled]:
		// The target is a reference still being compiled, still empty: a
		// copy would stay empty, so point at it.
		*n = node{kind: kindUnion, alts: []*node{compiled}}
	default:
		*n = *compiled
	}
	return n, nil
}

var typeNames = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

func typeList(v any, path string) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []any:
		var out []string
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s/type: %v is not a type name", path, x)
			}
			if !typeNames[s] {
				return nil, fmt.Errorf("%s/type: unknown type %q", path, s)
			}
			if !slices.Contains(out, s) { // at most 7: no quadratic search
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s/type: an empty list", path)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s/type: want a name or a list of names", path)
}

// literals compiles enum and const: the values, written canonically, that
// also have one of types (when given).
func literals(s map[string]any, types, asserts []string, path string) (*node, error) {
	for _, k := range asserts {
		if k != "enum" && k != "const" && k != "type" {
			return nil, fmt.Errorf("%s: %s beside enum or const is not supported", path, k)
		}
	}
	var values []any
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok {
			return nil, fmt.Errorf("%s/enum: want an array", path)
		}
		values = list
	}
	if cv, ok := s["const"]; ok {
		if _, ok := s["enum"]; ok {
			return nil, fmt.Errorf("%s: enum beside const is not supported", path)
		}
		values = []any{cv}
	}
	var texts []string
	for _, v := range values {
		if num, ok := outOfRange(v); ok {
			return nil, fmt.Errorf("%s: the number %s of enum/const is beyond float64's range, which JSON parsers may refuse", path, num)
		}
		t := jsonType(v)
		if t == "number" && isInteger(v.(json.Number)) && slices.Contains(types, "integer") {
			t = "integer"
		}
		if types != nil && !slices.Contains(types, t) {
			continue
		}
		texts = append(texts, string(encode(v)))
	}
	if len(texts) == 0 {
		return nil, fmt.Errorf("%s: no value of enum/const has the schema's type", path)
	}
	return literalNode(texts...), nil
}

// outOfRange returns a number in v that float64 cannot hold, if any.
func outOfRange(v any) (json.Number, bool) {
	switch v := v.(type) {
	case json.Number:
		if _, err := v.Float64(); err != nil {
			return v, true
		}
	case []any:
		for _, x := range v {
			if num, ok := outOfRange(x); ok {
				return num, true
			}
		}
	case map[string]any:
		for _, x := range v {
			if num, ok := outOfRange(x); ok {
				return num, true
			}
		}
	}
	return "", false
}

func literalNode(texts ...string) *node {
	n := &node{kind: kindLiteral}
	for i, t := range texts {
		n.lits.add([]byte(t), i)
	}
	return n
}

// count reads a non-negative integer keyword; def when absent.
func count(s map[string]any, k string, def int, path string) (int, error) {
	v, ok := s[k]
	if !ok {
		return def, nil
	}
	num, ok := v.(json.Number)
	if ok {
		if i, err := strconv.ParseInt(num.String(), 10, 32); err == nil && i >= 0 {
			return int(i), nil
		}
		if f, err := num.Float64(); err == nil && f >= 0 && f == float64(int32(f)) {
			return int(f), nil
		}
	}
	return 0, fmt.Errorf("%s/%s: %v is not a non-negative integer", path, k, v)
}

func isInteger(n json.Number) bool {
	f, err := n.Float64()
	return err == nil && isWhole(f)
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// encode writes v as compact JSON, keys sorted, without HTML escapes.
func encode(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err) // values decoded from JSON always encode
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// encodeString writes s as a JSON string, quotes included.
func encodeString(s string) []byte { return encode(s) }

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
