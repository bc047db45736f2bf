package sample_test

import (
	"fmt"

	"gotok/sample"
)

func Example() {
	p := sample.DefaultParams()
	p.Seed = 42
	p.RepeatPenalty = 1.3
	s, err := sample.New(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, tok := range []int32{0, 2} { // the prompt
		s.Accept(tok)
	}
	logits := []float32{2.0, 1.5, 1.9, 0.3, -1.0}
	var out []int32
	for range 8 {
		tok := s.Sample(logits) // a model would compute new logits per token
		s.Accept(tok)
		out = append(out, tok)
	}
	fmt.Println(out)
	fmt.Println("greedy:", sample.Argmax(logits))
	// Output:
	// [1 0 0 0 3 0 0 0]
	// greedy: 0
}
