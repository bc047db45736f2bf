package synth

// Params is the number of weights Generate writes for shape s with a
// vocabulary of vocab tokens (the tokenizer's, or s.Vocab without one).
func (s Shape) Params(vocab int) int64 {
	dim, kv := int64(s.Dim), int64(s.KVHeads*(s.Dim/s.Heads))
	layer := dim*dim*2 + dim*kv*2 + // attn_q, attn_output; attn_k, attn_v
		dim*int64(s.FFN)*3 + // ffn_gate, ffn_up, ffn_down
		dim*2 // attn_norm, ffn_norm
	n := int64(s.Layers)*layer + dim*int64(vocab) + dim // + token_embd, output_norm
	if !s.Tied {
		n += dim * int64(vocab) // output
	}
	return n
}
