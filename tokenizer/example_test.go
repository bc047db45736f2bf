package tokenizer_test

import (
	"bytes"
	"fmt"
	"log"

	"gotok/gguf"
	"gotok/tokenizer"
)

func Example() {
	// The tokenizer metadata of a tiny SentencePiece-style GGUF file.
	w := gguf.NewWriter()
	w.Set(tokenizer.KeyModel, "llama")
	w.Set(tokenizer.KeyTokens, []string{"<unk>", "<s>", "</s>", "▁", "H", "e", "l", "o", "▁H", "ll", "▁He", "llo", "▁Hello"})
	w.Set(tokenizer.KeyScores, []float32{0, 0, 0, -1, -2, -2, -2, -2, -3, -4, -5, -6, -7})
	w.Set(tokenizer.KeyTokenType, []int32{2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		log.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}

	tok, err := tokenizer.FromGGUF(&f.Metadata)
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("Hello", true, false) // with BOS, as add_bos_token defaults for SPM
	fmt.Println(ids)
	for _, id := range ids {
		fmt.Printf("%q\n", tok.Piece(id))
	}
	fmt.Printf("%q\n", tok.Decode(ids[1:]))
	// Output:
	// [1 12]
	// "<s>"
	// " Hello"
	// "Hello"
}
