package gotok_test

import (
	"context"
	"fmt"
	"log"

	"gotok"
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
