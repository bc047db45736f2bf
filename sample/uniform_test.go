package sample

import (
	"math"
	"testing"
)

// The first outputs of splitmix64 seeded with 0, as published with the
// reference implementation (prng.di.unimi.it/splitmix64.c).
func TestMix64IsSplitmix64(t *testing.T) {
	want := []uint64{0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F}
	var state uint64
	for i, w := range want {
		state += 0x9E3779B97F4A7C15
		if got := mix64(state); got != w {
			t.Errorf("output %d: got %#016x, want %#016x", i, got, w)
		}
	}
}

// TestUniformFormula checks Uniform against the documented formula written
// out separately, so a change to either is caught before a GPU twin drifts.
func TestUniformFormula(t *testing.T) {
	for _, c := range []struct{ seed, step uint64 }{
		{0, 0}, {0, 1}, {1, 0}, {42, 7}, {math.MaxUint64, math.MaxUint64}, {0x0123456789ABCDEF, 1 << 33},
	} {
		z := c.seed
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		z += (c.step + 1) * 0x9E3779B97F4A7C15
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		want := float32(float64(z>>40) / (1 << 24))
		if got := Uniform(c.seed, c.step); got != want {
			t.Errorf("Uniform(%d, %d) = %v, want %v", c.seed, c.step, got, want)
		}
	}
}

func TestUniformRange(t *testing.T) {
	for seed := uint64(0); seed < 64; seed++ {
		for step := uint64(0); step < 1000; step++ {
			for _, st := range []uint64{step, math.MaxUint64 - step} {
				if u := Uniform(seed, st); !(u >= 0 && u < 1) {
					t.Fatalf("Uniform(%d, %d) = %v, outside [0, 1)", seed, st, u)
				}
			}
		}
	}
}

// chiSquareUniform buckets n draws into bins and returns the chi-square
// statistic against equal frequencies.
func chiSquareUniform(n, bins int, draw func(i int) float32) float64 {
	counts := make([]int, bins)
	for i := range n {
		counts[int(draw(i)*float32(bins))]++
	}
	expect := float64(n) / float64(bins)
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - expect
		chi += d * d / expect
	}
	return chi
}

func TestUniformIsUniform(t *testing.T) {
	// 63 degrees of freedom: mean 63, sd 11; 150 is beyond 7 sd.
	const n, bins, bound = 1 << 17, 64, 150
	if chi := chiSquareUniform(n, bins, func(i int) float32 { return Uniform(1, uint64(i)) }); chi > bound {
		t.Errorf("over steps: chi-square %.1f > %d", chi, bound)
	}
	if chi := chiSquareUniform(n, bins, func(i int) float32 { return Uniform(uint64(i), 0) }); chi > bound {
		t.Errorf("over seeds: chi-square %.1f > %d", chi, bound)
	}
	// Consecutive pairs should be independent: bucket (u_i, u_i+1) in 8x8.
	chi := chiSquareUniform(n, bins, func(i int) float32 {
		a, b := Uniform(3, uint64(2*i)), Uniform(3, uint64(2*i+1))
		return (float32(int(a*8)) + b) / 8
	})
	if chi > bound {
		t.Errorf("pairs: chi-square %.1f > %d", chi, bound)
	}
}

func TestUniformSeedsDiffer(t *testing.T) {
	same := 0
	for step := range uint64(1000) {
		if Uniform(1, step) == Uniform(2, step) {
			same++
		}
	}
	if same > 5 {
		t.Errorf("seeds 1 and 2 agree on %d of 1000 steps", same)
	}
}
