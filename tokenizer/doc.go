// Package tokenizer builds the tokenizers that GGUF files describe, driven
// entirely by their tokenizer.ggml.* metadata, and matches llama.cpp's
// tokenization byte for byte.
//
// Two model types are supported:
//
//   - "gpt2": byte-level BPE. Text is split by the pre-tokenizer named in
//     tokenizer.ggml.pre (the same splitting rules llama.cpp applies for that
//     name), each piece is mapped through the GPT-2 byte↔unicode alphabet and
//     merged by the ranks of tokenizer.ggml.merges.
//   - "llama": SentencePiece-style BPE. Spaces become ▁, a dummy space is
//     prefixed, adjacent symbols are merged by token score, and characters
//     that no token covers fall back to <0xNN> byte tokens.
//
// Control and user-defined tokens are matched as whole tokens before either
// algorithm runs: user-defined tokens always, control tokens only when the
// caller asks to parse special tokens (chat templates do; raw user text must
// not).
package tokenizer
