package gotok_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"gotok"
	"gotok/constrain"
)

// Greedy generation with the real TinyStories model that ships beside the
// repository in ../shared.
func Example() {
	m, err := gotok.Load("../shared/models/stories260K.gguf", gotok.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	_, err = m.Generate(context.Background(), "Once upon a time", gotok.GenerateOptions{MaxTokens: 12},
		func(text string) error { fmt.Print(text); return nil })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	// Output:
	// , there was a little girl named Lily. She
}

// Tokens delivered on a channel, with sampling made repeatable by its seed.
func ExampleModel_Stream() {
	m, err := gotok.Load("../shared/models/stories260K.gguf", gotok.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	opts := gotok.GenerateOptions{MaxTokens: 8}
	opts.Sample.Temperature = 0 // greedy; set it, TopK, TopP, Seed … to sample
	s := m.Stream(context.Background(), "Lily", opts)
	n := 0
	for range s.Tokens {
		n++
	}
	st, err := s.Wait()
	fmt.Println(n, st.GeneratedTokens, st.StopReason, err)
	// Output:
	// 8 8 max_tokens <nil>
}

// Generation constrained to JSON that validates against a schema, as
// OpenAI's response_format json_schema asks, with each token's
// log-probability.
func Example_jsonSchema() {
	m, err := gotok.Load("../shared/models/stories260K.gguf", gotok.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	g, err := constrain.CompileSchema([]byte(`{
		"type": "object",
		"properties": {
			"name": {"type": "string", "maxLength": 10},
			"friends": {"type": "array", "items": {"enum": ["Lily", "Tom", "Ben"]}, "maxItems": 2}
		},
		"required": ["name", "friends"],
		"additionalProperties": false
	}`))
	if err != nil {
		log.Fatal(err)
	}
	var text strings.Builder
	var worst float32
	st, err := m.GenerateTokens(context.Background(), m.Encode("Once upon a time", gotok.GenerateOptions{}),
		gotok.GenerateOptions{MaxTokens: 100, Constraint: g, Logprobs: true},
		func(t gotok.Token) error {
			text.WriteString(t.Text)
			worst = min(worst, t.Logprob)
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.StopReason)
	fmt.Println(text.String())
	fmt.Println(worst < 0)
	// Output:
	// constraint_complete
	//  { "name" : "It's a sme" , "friends" : [ "Tom" , "Tom" ] }
	// true
}
