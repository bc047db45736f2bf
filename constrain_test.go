package gotok

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"gotok/constrain"
	"gotok/sample"
)

const storySchema = `{
	"type": "object",
	"properties": {
		"name": {"type": "string", "minLength": 1, "maxLength": 8},
		"age": {"type": "integer"},
		"happy": {"type": "boolean"},
		"friends": {"type": "array", "items": {"enum": ["Lily", "Tom", "Ben"]}, "maxItems": 3},
		"pet": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"kind": {"enum": ["dog", "cat"]}}, "required": ["kind"], "additionalProperties": false}]}
	},
	"required": ["name", "age", "happy", "friends", "pet"],
	"additionalProperties": false
}`

func compileValidator(t *testing.T, schema string) *jsonschema.Schema {
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

// TestConstrainedGenerationValidates generates with the real stories260K
// model at temperature 1 under a JSON Schema: every text validates.
func TestConstrainedGenerationValidates(t *testing.T) {
	m := loadStoriesCtx(t, 512)
	g, err := constrain.CompileSchema([]byte(storySchema))
	if err != nil {
		t.Fatal(err)
	}
	val := compileValidator(t, storySchema)
	seeds := uint64(8)
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		o := GenerateOptions{MaxTokens: 400, Constraint: g, Logprobs: true}
		o.Sample = sample.DefaultParams()
		o.Sample.Temperature, o.Sample.TopK, o.Sample.TopP, o.Sample.MinP, o.Sample.Seed = 1, 0, 0, 0, seed
		var text strings.Builder
		toks, st := generateTokens(t, m, "Once upon a time", o)
		for _, tk := range toks {
			text.WriteString(tk.Text)
			if tk.ID >= 0 && (tk.Logprob > 0 || tk.Logprob != tk.Logprob) {
				t.Fatalf("seed %d: logprob %v", seed, tk.Logprob)
			}
		}
		if st.StopReason != StopConstraint {
			t.Fatalf("seed %d: stopped by %s after %d tokens: %q", seed, st.StopReason, st.GeneratedTokens, text.String())
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text.String()))
		if err != nil {
			t.Fatalf("seed %d: %q is not JSON: %v", seed, text.String(), err)
		}
		if err := val.Validate(v); err != nil {
			t.Fatalf("seed %d: %q does not validate: %v", seed, text.String(), err)
		}
		t.Logf("seed %d, %d tokens: %s", seed, st.GeneratedTokens, text.String())
	}
}

// TestConstrainedAnyObject: json_object mode gives an object, whole or cut
// short by MaxTokens.
func TestConstrainedAnyObject(t *testing.T) {
	m := loadStoriesCtx(t, 512)
	ended := 0
	for seed := range uint64(4) {
		o := GenerateOptions{MaxTokens: 200, Constraint: constrain.AnyObject()}
		o.Sample = sample.DefaultParams()
		o.Sample.Seed = seed
		var text strings.Builder
		st, err := m.Generate(context.Background(), "Lily", o, func(s string) error { text.WriteString(s); return nil })
		if err != nil {
			t.Fatal(err)
		}
		switch st.StopReason {
		case StopConstraint:
			ended++
			var obj map[string]any
			if err := json.Unmarshal([]byte(text.String()), &obj); err != nil {
				t.Fatalf("seed %d: %q: %v", seed, text.String(), err)
			}
		case StopMaxTokens:
			if s := strings.TrimLeft(text.String(), " \n\t"); s == "" || s[0] != '{' {
				t.Fatalf("seed %d: truncated text %q does not start an object", seed, text.String())
			}
		default:
			t.Fatalf("seed %d: stopped by %s: %q", seed, st.StopReason, text.String())
		}
	}
	// The story model writes dialogue into its keys and values and seldom
	// closes a free-form object within 200 tokens: ended may be 0.
	t.Logf("%d of 4 objects closed", ended)
}

// TestConstrainedKeepsCache: a constrained generation leaves the KV cache
// as it says, so the next turn that extends it generates what a fresh model
// does.
func TestConstrainedKeepsCache(t *testing.T) {
	g, err := constrain.CompileSchema([]byte(`{"type": "object", "properties": {"a": {"type": "string", "maxLength": 6}}, "required": ["a"], "additionalProperties": false}`))
	if err != nil {
		t.Fatal(err)
	}
	var fed []int32 // the last run's prompt and generated tokens
	run := func(m *Model, prompt string, o GenerateOptions) (string, Stats) {
		var sb strings.Builder
		fed = m.PromptTokens(prompt, o)
		st, err := m.GenerateTokens(context.Background(), fed, o, func(t Token) error {
			sb.WriteString(t.Text)
			if t.ID >= 0 {
				fed = append(fed, t.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return sb.String(), st
	}
	m := loadStoriesCtx(t, 256)
	first, st1 := run(m, "Once upon a time", GenerateOptions{MaxTokens: 30, Constraint: g})
	firstFed := fed[:len(fed)-1] // the last token never went in
	if st1.StopReason != StopConstraint {
		t.Fatalf("first: %s %q", st1.StopReason, first)
	}
	second := "Once upon a time" + first + " Then"
	for _, o := range []GenerateOptions{{MaxTokens: 10}, {MaxTokens: 10, Constraint: g}, {MaxTokens: 10, TopLogprobs: 2}} {
		got, st2 := run(m, second, o)
		// The cache holds the first turn's tokens; the second prompt's text
		// may tokenize differently after the prompt's own tokens.
		common := commonPrefix(firstFed, m.PromptTokens(second, o))
		if want := cachedPrefix(m, Stats{PromptTokens: common, GeneratedTokens: 1}); st2.PromptReused < want || common < st1.PromptTokens {
			t.Errorf("reused %d tokens, want at least %d", st2.PromptReused, want)
		}
		fresh := loadStoriesCtx(t, 256)
		want, _ := run(fresh, second, o)
		if got != want {
			t.Errorf("%+v: with reuse %q, fresh %q", o, got, want)
		}
		// Back to the state after the first generation for the next case.
		m = loadStoriesCtx(t, 256)
		run(m, "Once upon a time", GenerateOptions{MaxTokens: 30, Constraint: g})
	}
}

func TestConstrainedIgnoresIgnoreEOS(t *testing.T) {
	m := loadStoriesCtx(t, 256)
	// A root number: whole after any digit, so the end of generation is
	// allowed and must end it even with IgnoreEOS (or the number reaches
	// its most digits: StopConstraint).
	g, err := constrain.CompileSchema([]byte(`{"type": "integer"}`))
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(6) {
		o := GenerateOptions{MaxTokens: 60, Constraint: g, IgnoreEOS: true}
		o.Sample.Temperature, o.Sample.Seed = 1, seed
		var sb strings.Builder
		st, err := m.Generate(context.Background(), "Once", o, func(s string) error { sb.WriteString(s); return nil })
		if err != nil {
			t.Fatal(err)
		}
		var n json.Number
		if st.StopReason == StopEOS || st.StopReason == StopConstraint || st.StopReason == StopMaxTokens && sb.Len() > 0 {
			if err := json.Unmarshal([]byte(sb.String()), &n); err != nil {
				t.Fatalf("seed %d: %q (%s): %v", seed, sb.String(), st.StopReason, err)
			}
		} else {
			t.Fatalf("seed %d: %s %q", seed, st.StopReason, sb.String())
		}
	}
}

// TestConstrainedByteLevelVocab generates under a schema with a model of
// the SmolLM2 tokenizer (49152 byte-level BPE tokens; random weights, so
// near-random tokens at temperature 1): the masks hold on a large real
// vocabulary through the whole engine.
func TestConstrainedByteLevelVocab(t *testing.T) {
	m, err := Load(filepath.Join(sharedDir(t), "models", "arch", "llama.gguf"), Options{Device: "cpu", ContextLen: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const schema = `{
		"type": "object",
		"properties": {
			"id": {"type": "integer"},
			"tag": {"type": "string", "maxLength": 6},
			"ok": {"type": "boolean"},
			"kind": {"enum": ["a", "b"]},
			"xs": {"type": "array", "items": {"type": "number"}, "maxItems": 2}
		},
		"required": ["id", "tag", "ok", "kind", "xs"],
		"additionalProperties": false
	}`
	g, err := constrain.CompileSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	val := compileValidator(t, schema)
	for seed := range uint64(1) { // about 10 ms a token: the f16 output head of 49152 rows on the CPU
		o := GenerateOptions{MaxTokens: 300, Constraint: g, TopLogprobs: 2}
		o.Sample.Temperature, o.Sample.TopK, o.Sample.Seed = 1, 40, seed
		var text strings.Builder
		toks, st := generateTokens(t, m, "Hello", o)
		for _, tk := range toks {
			text.WriteString(tk.Text)
		}
		if st.StopReason != StopConstraint {
			t.Fatalf("seed %d: stopped by %s after %d tokens: %q", seed, st.StopReason, st.GeneratedTokens, text.String())
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text.String()))
		if err != nil {
			t.Fatalf("seed %d: %q is not JSON: %v", seed, text.String(), err)
		}
		if err := val.Validate(v); err != nil {
			t.Fatalf("seed %d: %q does not validate: %v", seed, text.String(), err)
		}
	}
}
