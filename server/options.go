package server

import (
	"math/rand/v2"

	"gotok"
	"gotok/sample"
)

// logprobRequest is what a request asks of log-probabilities: chat's
// logprobs/top_logprobs and completions' logprobs (n) both map onto it.
type logprobRequest struct {
	want bool
	top  int
}

// generateOptions maps a request onto the engine's GenerateOptions: the
// one place request parameters become engine options, so the engine's
// log-probabilities and constrained sampling plug in here. Until the
// engine has them, asking for them is a 400, never silently ignored.
func generateOptions(s *samplingRequest, lp logprobRequest, maxTokens int) (gotok.GenerateOptions, error) {
	o := gotok.GenerateOptions{
		MaxTokens:    maxTokens,
		Stop:         s.Stop,
		ParseSpecial: true, // chat prompts carry the template's markers
	}
	if lp.want {
		return o, notSupported("logprobs", "logprobs")
	}
	if rf := s.ResponseFormat; rf != nil && (rf.Type == "json_object" || rf.Type == "json_schema") {
		return o, notSupported("response_format", "response_format "+rf.Type+" (constrained sampling)")
	}
	// OpenAI's defaults: temperature 1, top_p 1 (off), no top-k or min-p.
	p := sample.Params{Temperature: 1}
	if s.Temperature != nil {
		p.Temperature = float32(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = float32(*s.TopP)
	}
	if s.TopK != nil {
		p.TopK = *s.TopK
	}
	if s.MinP != nil {
		p.MinP = float32(*s.MinP)
	}
	if s.PresencePenalty != nil {
		p.PresencePenalty = float32(*s.PresencePenalty)
	}
	if s.FrequencyPenalty != nil {
		p.FrequencyPenalty = float32(*s.FrequencyPenalty)
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		p.PenaltyLastN = 64 // llama.cpp's window
	}
	// Without a seed each request draws its own, as OpenAI's API does;
	// with one, the same request gives the same answer.
	if s.Seed != nil {
		p.Seed = uint64(*s.Seed)
	} else {
		p.Seed = rand.Uint64()
	}
	if err := p.Validate(); err != nil {
		return o, invalid("", "%v", err)
	}
	o.Sample = p
	return o, nil
}
