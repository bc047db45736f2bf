package sample

import "math"

// LogSoftmax is the log-softmax of one step's logits, for reporting
// log-probabilities (OpenAI's logprobs): the model's own distribution,
// before penalties, temperature or any mask. NaN logits count for nothing.
type LogSoftmax struct {
	max  float32 // the largest logit
	logZ float64 // log of the sum of exp(shift) over the logits
}

// NewLogSoftmax sums the logits in float64, relative to the largest one so
// that nothing overflows; +Inf logits share all the mass, as in Sample.
func NewLogSoftmax(logits []float32) LogSoftmax {
	first := Argmax(logits)
	if first < 0 {
		return LogSoftmax{max: float32(math.NaN()), logZ: math.NaN()}
	}
	m := logits[first]
	z := 0.0
	for _, l := range logits {
		if l == l {
			z += math.Exp(shift(l, m))
		}
	}
	return LogSoftmax{max: m, logZ: math.Log(z)}
}

// Logprob returns the log-probability of a token whose logit is l (one of
// the logits the LogSoftmax was made from): 0 for a certain token, -Inf for
// an impossible one.
func (s LogSoftmax) Logprob(l float32) float32 {
	return float32(shift(l, s.max) - s.logZ)
}

// TopK returns the ids of the k largest logits, NaN skipped, in candidate
// order: logit descending, then id ascending. It returns fewer when fewer
// logits are not NaN.
func TopK(logits []float32, k int) []int32 {
	if k <= 0 {
		return nil
	}
	c := appendTopK(nil, logits, k)
	ids := make([]int32, len(c))
	for i, x := range c {
		ids[i] = x.id
	}
	return ids
}
