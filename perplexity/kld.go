package perplexity

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"gotok"
)

// KLStats accumulates the comparison of a model with a base model over the
// scored positions, as llama-perplexity --kl-divergence does.
type KLStats struct {
	Count   int // positions compared
	SameTop int // positions where both models' most likely token agree

	sumNLL, sumNLL2         float64
	sumBase, sumBase2       float64
	sumNLLBase              float64
	sumKLD, sumKLD2         float64
	sumPDiff, sumPDiff2     float64
	sumPDiff4               float64
	klds, pDiffs            []float32
	sortedKLDs, sortedDiffs []float32
}

// add compares one position: logits of this model, row the base model's
// quantized log-probabilities, tok the token that came next. The float32
// steps are llama-perplexity's.
func (s *KLStats) add(logits []float32, row []uint16, tok int32) {
	maxLogit, imax := logits[0], 0
	for i, l := range logits[1:] {
		if l > maxLogit {
			maxLogit, imax = l, i+1
		}
	}
	var sumExp float64
	for _, l := range logits {
		sumExp += math.Exp(float64(l - maxLogit))
	}
	logSumExp := float32(math.Log(sumExp))
	scale, minLogProb := getFloat(row[0:2]), getFloat(row[2:4])
	q := row[4 : 4+len(logits)]

	nll := maxLogit + logSumExp - logits[tok]
	nllBase := -(scale*float32(q[tok]) + minLogProb)
	s.sumNLL += float64(nll)
	s.sumNLL2 += float64(nll * nll)
	s.sumBase += float64(nllBase)
	s.sumBase2 += float64(nllBase * nllBase)
	s.sumNLLBase += float64(nll * nllBase)

	norm := maxLogit + logSumExp
	var kld float64
	imaxBase, maxBase := 0, float32(0)
	for i, l := range logits {
		lpBase := scale*float32(q[i]) + minLogProb
		if i == 0 || lpBase > maxBase {
			maxBase, imaxBase = lpBase, i
		}
		// Base probabilities below e^-16 are dropped, as llama-perplexity does.
		if lpBase > -16 {
			pBase := float32(math.Exp(float64(lpBase)))
			kld += float64(pBase * (lpBase - l + norm))
		}
	}
	s.sumKLD += kld
	s.sumKLD2 += kld * kld
	s.Count++
	if imax == imaxBase {
		s.SameTop++
	}
	pDiff := float32(math.Exp(float64(-nll))) - float32(math.Exp(float64(-nllBase)))
	s.sumPDiff += float64(pDiff)
	d2 := float64(pDiff) * float64(pDiff)
	s.sumPDiff2 += d2
	s.sumPDiff4 += d2 * d2
	s.klds = append(s.klds, float32(kld))
	s.pDiffs = append(s.pDiffs, pDiff)
	s.sortedKLDs, s.sortedDiffs = nil, nil
}

// klMeanAndError is llama-perplexity's mean_and_uncertainty: no
// uncertainty from 10 values or fewer.
func (s *KLStats) meanAndError(sum, sum2 float64) (float64, float64) {
	if s.Count < 1 {
		return 0, 0
	}
	f := sum / float64(s.Count)
	df := sum2/float64(s.Count) - f*f
	if df > 0 && s.Count > 10 {
		return f, math.Sqrt(df / float64(s.Count-1))
	}
	return f, 0
}

// covariance of the two models' log-likelihoods' means.
func (s *KLStats) covariance() float64 {
	if s.Count < 10 {
		return 0
	}
	n := float64(s.Count)
	return (s.sumNLLBase/n - (s.sumNLL/n)*(s.sumBase/n)) / (n - 1)
}

// PPL is this model's perplexity and its uncertainty.
func (s *KLStats) PPL() (float64, float64) {
	m, e := s.meanAndError(s.sumNLL, s.sumNLL2)
	return math.Exp(m), math.Exp(m) * e
}

// BasePPL is the base model's perplexity (from its stored
// log-probabilities) and its uncertainty.
func (s *KLStats) BasePPL() (float64, float64) {
	m, e := s.meanAndError(s.sumBase, s.sumBase2)
	return math.Exp(m), math.Exp(m) * e
}

// LogPPLRatio is ln(PPL/PPL(base)) and its uncertainty, which accounts for
// the correlation of the two models' log-likelihoods.
func (s *KLStats) LogPPLRatio() (float64, float64) {
	m, e := s.meanAndError(s.sumNLL, s.sumNLL2)
	mb, eb := s.meanAndError(s.sumBase, s.sumBase2)
	return m - mb, math.Sqrt(math.Max(0, e*e+eb*eb-2*s.covariance()))
}

// PPLRatio is PPL/PPL(base) and its uncertainty.
func (s *KLStats) PPLRatio() (float64, float64) {
	v, e := s.LogPPLRatio()
	return math.Exp(v), math.Exp(v) * e
}

// PPLDiff is PPL-PPL(base) and its uncertainty.
func (s *KLStats) PPLDiff() (float64, float64) {
	p, pe := s.PPL()
	b, be := s.BasePPL()
	cov := p * b * s.covariance()
	return p - b, math.Sqrt(math.Max(0, pe*pe+be*be-2*cov))
}

// Correlation of the two models' log-likelihoods' means.
func (s *KLStats) Correlation() float64 {
	_, e := s.meanAndError(s.sumNLL, s.sumNLL2)
	_, eb := s.meanAndError(s.sumBase, s.sumBase2)
	return s.covariance() / (e * eb)
}

// KLD is the mean KL divergence of this model's distribution from the
// base's, KL(base‖this) in nats, and its uncertainty.
func (s *KLStats) KLD() (float64, float64) { return s.meanAndError(s.sumKLD, s.sumKLD2) }

// KLDPercentile is the fraction-th percentile (0…1) of the per-position
// KL divergences, interpolated as llama-perplexity does.
func (s *KLStats) KLDPercentile(fraction float64) float64 {
	if s.sortedKLDs == nil {
		s.sortedKLDs = slices.Sorted(slices.Values(s.klds))
	}
	return percentile(s.sortedKLDs, fraction)
}

// DeltaP is the mean change of the probability of the token that came
// next, p - p(base), and its uncertainty.
func (s *KLStats) DeltaP() (float64, float64) { return s.meanAndError(s.sumPDiff, s.sumPDiff2) }

// DeltaPPercentile is a percentile of p - p(base).
func (s *KLStats) DeltaPPercentile(fraction float64) float64 {
	if s.sortedDiffs == nil {
		s.sortedDiffs = slices.Sorted(slices.Values(s.pDiffs))
	}
	return percentile(s.sortedDiffs, fraction)
}

// DeltaPRMS is the root mean square of p - p(base) and its uncertainty.
func (s *KLStats) DeltaPRMS() (float64, float64) {
	m, e := s.meanAndError(s.sumPDiff2, s.sumPDiff4)
	r := math.Sqrt(m)
	if r == 0 {
		return 0, 0
	}
	return r, 0.5 / r * e
}

// SameTopFraction is the fraction of positions where both models' most
// likely token agree, and its uncertainty.
func (s *KLStats) SameTopFraction() (float64, float64) {
	if s.Count == 0 {
		return 0, 0
	}
	p := float64(s.SameTop) / float64(s.Count)
	if s.Count < 2 {
		return p, 0
	}
	return p, math.Sqrt(p * (1 - p) / float64(s.Count-1))
}

// percentile interpolates between sorted values; the median of an even
// count is the mean of the middle two, as here.
func percentile(sorted []float32, fraction float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	if fraction <= 0 {
		return float64(sorted[0])
	}
	if fraction >= 1 {
		return float64(sorted[len(sorted)-1])
	}
	p := fraction * float64(len(sorted)-1)
	i := int(p)
	p -= float64(i)
	return (1-p)*float64(sorted[i]) + p*float64(sorted[min(i+1, len(sorted)-1)])
}

// KLResult is the comparison with a base model.
type KLResult struct {
	Context int // n_ctx, from the base file
	Chunks  int
	Stats   *KLStats
	Elapsed time.Duration
}

// KLDivergence runs m over the tokens stored in base (written by Run with
// Options.Base, or by llama-perplexity --kl-divergence-base) and compares
// its distributions with the base model's. The context comes from the base
// file; o.Context and o.Base are ignored, o.Chunks caps the chunks.
// Progress reports carry the running KLStats.
func KLDivergence(ctx context.Context, m *gotok.Model, base io.Reader, o Options) (*KLResult, error) {
	bf, err := readBaseHeader(base)
	if err != nil {
		return nil, err
	}
	if bf.vocab != m.Config().VocabSize {
		return nil, fmt.Errorf("perplexity: the base file's vocabulary has %d tokens, the model's %d", bf.vocab, m.Config().VocabSize)
	}
	nCtx, err := chunkContext(m, bf.nCtx)
	if err != nil {
		return nil, fmt.Errorf("%w (the base file was computed with a context of %d)", err, bf.nCtx)
	}
	tok := m.Tokenizer()
	// The base file holds whole chunks only: no length rule to apply.
	chunks := cut(bf.tokens, nCtx, o.Chunks, tok.BOS(), tok.AddBOS())
	sc := &chunkScorer{be: m.Backend(), vocab: bf.vocab}
	r := &KLResult{Context: nCtx, Chunks: len(chunks), Stats: &KLStats{}}
	start := time.Now()
	for i, chunk := range chunks {
		err := sc.score(ctx, chunk, func(p int, logits []float32) error {
			if len(logits) != bf.vocab {
				return fmt.Errorf("%d logits for a vocabulary of %d", len(logits), bf.vocab)
			}
			row, err := bf.next()
			if err != nil {
				return err
			}
			r.Stats.add(logits, row, chunk[p+1])
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("perplexity: chunk %d: %w", i+1, err)
		}
		if o.Progress != nil {
			ppl, _ := r.Stats.PPL()
			o.Progress(Progress{Chunk: i + 1, Chunks: len(chunks), PPL: ppl, Elapsed: time.Since(start), KL: r.Stats})
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}
