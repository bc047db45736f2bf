package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(80, 81))
	impls := map[string]func([]float32) float32{"generic": maxGeneric, "public": Max}
	if useAVX2 {
		impls["avx2"] = func(x []float32) float32 {
			if len(x) < 8 {
				return maxGeneric(x)
			}
			return maxAVX2(&x[0], len(x))
		}
	}
	nan := float32(math.NaN())
	for name, f := range impls {
		for n := 1; n <= 100; n++ {
			for trial := range 4 {
				x := randF32(rng, n+1)
				switch trial {
				case 1: // the maximum at each end
					x[rng.IntN(2)*(n-1)] = 100
				case 2:
					x[rng.IntN(n)] = nan
				case 3:
					for i := range x {
						x[i] = float32(math.Inf(-1))
					}
				}
				x[n] = 1000 // past the end
				want := float32(math.Inf(-1))
				for _, v := range x[:n] {
					if v != v {
						want = nan
						break
					}
					want = max(want, v)
				}
				got := f(x[:n])
				if got != want && !(got != got && want != want) {
					t.Fatalf("%s Max(%d values, case %d) = %v, want %v", name, n, trial, got, want)
				}
			}
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "quant: ") {
			t.Errorf("Max(nil): recovered %v, want a quant: panic", r)
		}
	}()
	Max(nil)
}
