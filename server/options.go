package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"

	"gotok"
	"gotok/constrain"
	"gotok/sample"
)

// logprobRequest is what a request asks of log-probabilities: chat's
// logprobs/top_logprobs and completions' logprobs (n) both map onto it.
type logprobRequest struct {
	want bool
	top  int
}

// generateOptions maps a request onto the engine's GenerateOptions: the
// one place request parameters become engine options (sampling,
// log-probabilities, the JSON constraint of response_format). ctxLen is
// the model's context, the penalties' window.
func generateOptions(s *samplingRequest, lp logprobRequest, maxTokens, ctxLen int) (gotok.GenerateOptions, error) {
	o := gotok.GenerateOptions{
		MaxTokens:    maxTokens,
		Stop:         s.Stop,
		ParseSpecial: true, // chat prompts carry the template's markers
		Logprobs:     lp.want,
		TopLogprobs:  lp.top,
		IgnoreEOS:    s.IgnoreEOS,
	}
	if s.MinTokens != nil {
		o.MinTokens = *s.MinTokens
	}
	// OpenAI's defaults: temperature 1, top_p 1 (off), no top-k or min-p.
	p := sample.Params{Temperature: 1, RepeatPenalty: 1}
	if s.Temperature != nil {
		p.Temperature = float32(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = float32(*s.TopP)
	}
	if s.TopK != nil && *s.TopK > 0 { // -1 and 0: off
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
	if s.RepetitionPenalty != nil {
		p.RepeatPenalty = float32(*s.RepetitionPenalty)
	}
	// vLLM's penalties: presence and frequency over the whole completion,
	// repetition over the prompt and the completion. The sampler keeps one
	// history for all three, so when both kinds are asked for, repetition
	// too sees the completion only.
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 || p.RepeatPenalty != 1 {
		p.PenaltyLastN = ctxLen // the prompt and completion fit in it
		o.PenalizeCompletionOnly = p.PresencePenalty != 0 || p.FrequencyPenalty != 0
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
	// Last, after the cheap checks, and before the request is queued, so
	// that a bad schema is a 400 that waits for nothing. The schema comes
	// from the request: constrain bounds what compiling it may cost.
	if rf := s.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_object":
			o.Constraint = constrain.AnyObject()
		case "json_schema":
			g, err := compileSchema(rf.JSONSchema)
			if err != nil {
				return o, err
			}
			o.Constraint = g
		}
	}
	return o, nil
}

// compileSchema compiles response_format.json_schema ({"name", "schema",
// "strict"}) into the grammar the output is held to. A schema with a
// keyword the grammar cannot enforce is refused, never loosened.
func compileSchema(raw json.RawMessage) (*constrain.Grammar, error) {
	var js struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, invalid("response_format.json_schema", "response_format json_schema must be an object with name and schema: %v", err)
	}
	if len(bytes.TrimSpace(js.Schema)) == 0 || bytes.Equal(bytes.TrimSpace(js.Schema), []byte("null")) {
		return nil, invalid("response_format.json_schema.schema", "response_format json_schema has no schema")
	}
	g, err := constrain.CompileSchema(js.Schema)
	if err != nil {
		return nil, invalid("response_format.json_schema.schema", "%v", err)
	}
	return g, nil
}
