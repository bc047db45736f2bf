// Package constrain makes generation produce JSON: a grammar compiled from a
// JSON Schema (or "any JSON object/value") and, per generation, a
// constraint that masks the tokens whose bytes cannot continue a valid text,
// so that every text generated to its end parses as JSON and validates
// against the schema (OpenAI's response_format json_object and json_schema).
//
// Use:
//
//	g, err := constrain.CompileSchema(schemaJSON) // or constrain.AnyObject()
//	if err != nil { ... } // unsupported keywords are errors that name them
//	v := constrain.NewVocab(tok)      // once per tokenizer; shared, immutable
//	c := constrain.NewConstraint(g, v) // per generation: it has state
//	for !c.Done() {
//		logits := ...                  // the model's logits for the next token
//		if err := c.Mask(logits); err != nil { ... } // disallowed tokens -> -Inf
//		id := sampler.Sample(logits)
//		if err := c.Accept(id); err != nil { ... }
//		if vocab.IsEOG(id) { break }  // allowed only when c.Complete()
//	}
//
// The gotok package does all of this when GenerateOptions.Constraint is set.
//
// # What the texts look like
//
// Whitespace between the tokens of JSON is bounded so a model cannot loop
// on it: each gap (before the root value, after '{' '[' ':' ',', before ':'
// ',' '}' ']') holds nothing, one space, or one newline followed by at most
// 20 spaces or tabs, as llama.cpp's JSON grammars allow. Nothing follows the
// root value. Numbers have at most 20 integer, 20 fraction and 2 exponent
// digits (so a float64 parser reads every one); strings are valid UTF-8
// with no raw control characters and no \u escapes of surrogates;
// properties come in any order, each at most once; values nest at most 64
// deep. enum and const values are written compactly, as encoding/json
// writes them (object keys sorted). These only narrow what may be written:
// every text still validates.
//
// # How the mask is computed
//
// A character-level machine (machine.go) reads the text against the
// grammar: a set of threads, each a stack of frames, one per value being
// read; a union (anyOf, a list of types) runs one thread per alternative
// that fits. It refuses any byte after which the value could no longer be
// completed, so a constraint never walks into a dead end. The vocabulary
// is a trie of the tokens' bytes in preorder (vocab.go); a mask walks it
// together with the machine, pruning a subtree at the first refused byte,
// so tokens that share a prefix share its work. On the 49152-token SmolLM2
// vocabulary (a trie of 100k nodes) a mask takes about 0.05 ms where few
// tokens fit (before a key or a number) and about 2 ms inside a string,
// where most do, on one core of the development machine. Inside a string
// the mask is computed once and reused for the tokens that follow, as long
// as no token could bring the string to its minLength or maxLength.
//
// A union whose alternatives begin alike (anyOf of objects) runs one
// reading per alternative until they part, and a mask costs about as much
// per reading (64 readings inside a string: about 90 ms). At most 64 are
// kept, so an anyOf of more than 64 alternatives that share their first
// bytes cannot produce the later ones. A union's alternatives are indexed
// by first byte, and a byte stops looking for readings once it has found
// 128, so no schema makes a mask cost more than that.
//
// # Limits
//
// A schema comes from the request, so compiling it is bounded too, each
// limit an error that names it: at most 16384 schemas (objects and
// booleans, each $ref target once) per document, 64 properties per object,
// 1024 alternatives that one union (anyOf, oneOf, a list of types) leads
// to and 65536 for all unions together, 128 alternatives per oneOf, and a
// fixed amount of work to prove a oneOf's alternatives exclusive (past it,
// the error suggests anyOf). Every step of compiling is linear in the
// document within these, so a schema of the server's 4 MiB body limit
// compiles or is refused in under a second.
package constrain
