package quant

import (
	"fmt"
	"math"
)

// A float32 exponential for softmax. math.Exp works in float64 and costs
// several nanoseconds a call; attention over a long prompt takes tens of
// millions of exponentials, and float32 accuracy is all it needs.
//
// The algorithm is ggml's ggml_v_expf (from ARM's optimized-routines
// expf): with n = round(x·log2 e), e^x = 2^n · e^b for b = x − n·ln 2,
// |b| ≤ ln2/2, where ln 2 is split in two so that n·ln2hi is exact, and e^b
// − 1 is a degree-5 polynomial. 2^n is built in the exponent field. Where
// |n| > 126 that would overflow the field, so 2^n is applied as two
// factors, which also gives subnormal results, +Inf above 88.72 and 0
// below −103.98. Results are within 2 ulp of the correctly rounded e^x
// (TestExpAccuracy samples; an exhaustive run over every float32 in
// (−105, 90) found 2 ulp at most, at 0.15% of them), and NaN stays NaN.

// ExpSum sets x[i] to e^(x[i]−shift) for every i and returns the sum of
// the results: the numerators and denominator of a softmax when shift is
// the maximum of x. The difference x[i]−shift is rounded to float32 first.
func ExpSum(x []float32, shift float32) float32 {
	var sum float32
	n := 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			sum = expSumAVX2(&x[0], n, shift)
		}
	}
	for i := n; i < len(x); i++ {
		e := expf(x[i] - shift)
		x[i] = e
		sum += e
	}
	return sum
}

const (
	expLog2e = 0x1.715476p+0
	expRound = 0x1.8p23 // adding it rounds to an integer (|v| < 2^22)
	expLn2Hi = 0x1.62e4p-1
	expLn2Lo = 0x1.7f7d1cp-20
	expP0    = 0x1.0e4020p-7
	expP1    = 0x1.573e2ep-5
	expP2    = 0x1.555e66p-3
	expP3    = 0x1.fffdb6p-2
	expP4    = 0x1.ffffecp-1
)

// expf is the Go form of the kernel in expSumAVX2, step for step; the
// assembly fuses some products and sums that Go may round separately.
func expf(x float32) float32 {
	z := x*expLog2e + expRound
	n := z - expRound
	b := x - n*expLn2Hi - n*expLn2Lo
	e := math.Float32bits(z) << 23 // n in the exponent field
	u := b * b
	j := ((expP0*b+expP1)*u+(expP2*b+expP3))*u + expP4*b // e^b − 1
	// NaN takes the first branch and stays NaN.
	if !(abs32(n) > 126) {
		k := math.Float32frombits(e + math.Float32bits(1))
		return j*k + k
	}
	// 2^n = s1 · s2 with both factors normal: s1 = 2^-125 for n ≤ 0,
	// 2^127 otherwise. Past |n| > 192 the result is 0 or +Inf, s1².
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	if abs32(n) > 192 {
		return s1 * s1
	}
	s2 := math.Float32frombits(e - g)
	return (s2*j + s2) * s1
}

// SwiGLU sets dst[i] to silu(gate[i])·up[i], where silu(x) = x/(1+e^−x):
// the gated activation of a llama feed-forward block. The slices must have
// the same length.
func SwiGLU(dst, gate, up []float32) {
	if len(gate) != len(dst) || len(up) != len(dst) {
		panic(fmt.Sprintf("quant: SwiGLU: lengths %d, %d and %d differ", len(dst), len(gate), len(up)))
	}
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		if n > 0 {
			swiGLUAVX2(&dst[0], &gate[0], &up[0], n)
		}
	}
	swiGLUGeneric(dst[n:], gate[n:], up[n:])
}

func swiGLUGeneric(dst, gate, up []float32) {
	for i, g := range gate {
		dst[i] = g * up[i] / (1 + expf(-g))
	}
}
