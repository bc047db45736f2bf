package sample

import (
	"math"
	"strings"
	"testing"
)

func TestDefaultParams(t *testing.T) {
	p := DefaultParams()
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultParams().Validate() = %v", err)
	}
	want := Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, PenaltyLastN: 64}
	if p != want {
		t.Errorf("DefaultParams() = %+v, want %+v", p, want)
	}
	if p.Greedy() || p.penaltiesOn() {
		t.Errorf("DefaultParams: Greedy %v, penalties on %v; want false, false", p.Greedy(), p.penaltiesOn())
	}
}

func TestGreedy(t *testing.T) {
	for _, temp := range []float32{0, -1, -0.0001} {
		if !(Params{Temperature: temp}).Greedy() {
			t.Errorf("Temperature %v: Greedy() = false, want true", temp)
		}
	}
	if (Params{Temperature: 1e-30}).Greedy() {
		t.Error("Temperature 1e-30: Greedy() = true, want false")
	}
}

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	valid := []Params{
		{},
		{Temperature: -1},
		{TopK: -5, TopP: 1, MinP: 1},
		{RepeatPenalty: 0},
		{PresencePenalty: -2, FrequencyPenalty: -0.5, PenaltyLastN: 1 << 40},
	}
	for _, p := range valid {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: Validate() = %v, want nil", p, err)
		}
	}
	invalid := []struct {
		p    Params
		want string // part of the message
	}{
		{Params{Temperature: nan}, "temperature"},
		{Params{Temperature: inf}, "temperature"},
		{Params{Temperature: -inf}, "temperature"},
		{Params{TopP: nan}, "top-p"},
		{Params{TopP: -0.1}, "top-p"},
		{Params{TopP: 1.5}, "top-p"},
		{Params{MinP: nan}, "min-p"},
		{Params{MinP: -0.01}, "min-p"},
		{Params{MinP: 2}, "min-p"},
		{Params{RepeatPenalty: -1.1}, "repeat penalty"},
		{Params{RepeatPenalty: nan}, "repeat penalty"},
		{Params{PresencePenalty: inf}, "presence penalty"},
		{Params{FrequencyPenalty: nan}, "frequency penalty"},
		{Params{PenaltyLastN: -1}, "last-n"},
	}
	for _, c := range invalid {
		err := c.p.Validate()
		if err == nil {
			t.Errorf("%+v: Validate() = nil, want an error about %s", c.p, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Validate() = %q, want it to mention %q", c.p, err, c.want)
		}
		if _, err := New(c.p); err == nil {
			t.Errorf("%+v: New accepted invalid params", c.p)
		}
	}
}
