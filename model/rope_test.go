package model

import (
	"math"
	"testing"
)

// hfYaRNInvFreq is the YaRN inverse frequency of pair i as transformers
// computes it (_compute_yarn_parameters): the interpolated and the
// extrapolated frequency mixed by a linear ramp between the correction
// dimensions, an independent statement of what Angles.CosSin does.
func hfYaRNInvFreq(i, dim int, base, factor float64, origCtx int, betaFast, betaSlow float64) float64 {
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(float64(origCtx)/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low := math.Max(math.Floor(corr(betaFast)), 0)
	high := math.Min(math.Ceil(corr(betaSlow)), float64(dim-1))
	if low == high {
		high += 0.001
	}
	ramp := math.Min(1, math.Max(0, (float64(i)-low)/(high-low)))
	extrap := math.Pow(base, -float64(2*i)/float64(dim))
	interp := extrap / factor
	mask := 1 - ramp
	return interp*(1-mask) + extrap*mask
}

func TestRopeCosSin(t *testing.T) {
	llama3 := make([]float32, 64)
	for i := range llama3 {
		llama3[i] = 1 + float32(i%7)
	}
	for _, tc := range []struct {
		name    string
		r       Rope
		angle   func(pos, i int) float64
		mscale  float64
		maxDiff float64
	}{
		{"plain", Rope{Dim: 64, Base: 10000, FreqScale: 1, AttnFactor: 1},
			func(p, i int) float64 { return float64(p) * math.Pow(10000, -float64(2*i)/64) }, 1, 1e-6},
		{"linear", Rope{Dim: 32, Base: 500000, FreqScale: 0.25, AttnFactor: 1},
			func(p, i int) float64 { return float64(p) / 4 * math.Pow(500000, -float64(2*i)/32) }, 1, 1e-6},
		{"factors", Rope{Dim: 128, Base: 500000, FreqScale: 1, AttnFactor: 1, Factors: llama3},
			func(p, i int) float64 {
				return float64(p) * math.Pow(500000, -float64(2*i)/128) / float64(llama3[i])
			}, 1, 1e-6},
		{"yarn", Rope{Dim: 128, Base: 1e6, FreqScale: 0.25, AttnFactor: 1, ExtFactor: 1, BetaFast: 32, BetaSlow: 1, OrigContext: 4096},
			func(p, i int) float64 { return float64(p) * hfYaRNInvFreq(i, 128, 1e6, 4, 4096, 32, 1) }, 1 + 0.1*math.Log(4), 1e-6},
	} {
		cs := make([]float32, tc.r.Dim)
		angles := tc.r.Angles()
		for _, pos := range []int{0, 1, 17, 4095, 30000} {
			angles.CosSin(pos, cs)
			for i := 0; i < tc.r.Pairs(); i++ {
				a := tc.angle(pos, i)
				c, s := tc.mscale*math.Cos(a), tc.mscale*math.Sin(a)
				if d := math.Max(math.Abs(float64(cs[2*i])-c), math.Abs(float64(cs[2*i+1])-s)); !(d <= tc.maxDiff) {
					t.Fatalf("%s pos %d pair %d: (cos, sin) = (%g, %g), want (%g, %g)", tc.name, pos, i, cs[2*i], cs[2*i+1], c, s)
				}
			}
		}
	}
}
