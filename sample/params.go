package sample

import (
	"fmt"
	"math"
)

// Params configures the sampler chain. Zero values mean "off" except where
// noted.
type Params struct {
	Temperature      float32 // <= 0: greedy (argmax), as llama.cpp's --temp 0
	TopK             int     // <= 0: off
	TopP             float32 // >= 1 or <= 0: off
	MinP             float32 // <= 0: off
	RepeatPenalty    float32 // 1 or 0: off (llama.cpp semantics: logit > 0 ? logit/p : logit*p)
	PresencePenalty  float32 // subtracted once from each token in the history
	FrequencyPenalty float32 // subtracted once per occurrence in the history
	PenaltyLastN     int     // how many most recent tokens the penalties look at (0: penalties off)

	// Seed selects the random stream. It is used as is: 0 is an ordinary
	// seed, so runs are reproducible by default. A caller that wants fresh
	// randomness per run picks a random seed itself (and can print it).
	Seed uint64
}

// DefaultParams returns llama.cpp's default sampling settings: temperature
// 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat penalty 1 (off) over the last
// 64 tokens, no presence or frequency penalty, seed 0.
func DefaultParams() Params {
	return Params{
		Temperature:   0.8,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1,
		PenaltyLastN:  64,
	}
}

// Greedy reports whether p picks the argmax instead of drawing.
func (p Params) Greedy() bool { return p.Temperature <= 0 }

// Validate reports the first setting that has no meaning. Negative
// temperature is valid (greedy), and so are negative presence and frequency
// penalties (they favour repetition, as in llama.cpp). Non-finite values,
// top-p or min-p outside [0, 1], a negative repeat penalty and a negative
// PenaltyLastN are errors; llama.cpp's "-1 = whole context" for the last-n
// must be resolved by the caller, who knows the context size.
func (p Params) Validate() error {
	finite := []struct {
		name string
		v    float32
	}{
		{"temperature", p.Temperature},
		{"top-p", p.TopP},
		{"min-p", p.MinP},
		{"repeat penalty", p.RepeatPenalty},
		{"presence penalty", p.PresencePenalty},
		{"frequency penalty", p.FrequencyPenalty},
	}
	for _, f := range finite {
		if math.IsNaN(float64(f.v)) || math.IsInf(float64(f.v), 0) {
			return fmt.Errorf("sample: %s is %v, want a finite number", f.name, f.v)
		}
	}
	if p.TopP < 0 || p.TopP > 1 {
		return fmt.Errorf("sample: top-p is %v, want 0 <= top-p <= 1 (0 or 1: off)", p.TopP)
	}
	if p.MinP < 0 || p.MinP > 1 {
		return fmt.Errorf("sample: min-p is %v, want 0 <= min-p <= 1 (0: off)", p.MinP)
	}
	if p.RepeatPenalty < 0 {
		return fmt.Errorf("sample: repeat penalty is %v, want >= 0 (0 or 1: off)", p.RepeatPenalty)
	}
	if p.PenaltyLastN < 0 {
		return fmt.Errorf("sample: penalty last-n is %d, want >= 0 (0: off)", p.PenaltyLastN)
	}
	return nil
}

func (p Params) topPOn() bool   { return p.TopP > 0 && p.TopP < 1 }
func (p Params) minPOn() bool   { return p.MinP > 0 }
func (p Params) repeatOn() bool { return p.RepeatPenalty != 0 && p.RepeatPenalty != 1 }

func (p Params) penaltiesOn() bool {
	return p.PenaltyLastN > 0 && (p.repeatOn() || p.FrequencyPenalty != 0 || p.PresencePenalty != 0)
}
