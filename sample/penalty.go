package sample

// penalize returns one logit after llama.cpp's penalties for a token seen
// count > 0 times in the history. The float32 conversions forbid the compiler
// from fusing the multiply and the adds (it may on arm64 and with
// GOAMD64=v3), so every platform and the CUDA twin round alike.
func penalize(l float32, count int32, p Params) float32 {
	if p.repeatOn() {
		if l <= 0 {
			l = float32(l * p.RepeatPenalty)
		} else {
			l = float32(l / p.RepeatPenalty)
		}
	}
	freq := float32(float32(count) * p.FrequencyPenalty)
	return float32(l - float32(freq+p.PresencePenalty))
}

// penalized returns logits with the penalties applied, in the sampler's
// scratch buffer; logits itself when no penalty applies, so the common case
// copies nothing. History tokens outside the vocabulary are ignored.
func (s *Sampler) penalized(logits []float32) []float32 {
	if !s.p.penaltiesOn() || len(s.hist.counts) == 0 {
		return logits
	}
	s.scratch = append(s.scratch[:0], logits...)
	// Each token is changed on its own, so the map's random order is harmless.
	for tok, count := range s.hist.counts {
		if tok < 0 || int(tok) >= len(s.scratch) {
			continue
		}
		s.scratch[tok] = penalize(s.scratch[tok], count, s.p)
	}
	return s.scratch
}
