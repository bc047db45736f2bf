package cuda

import (
	"fmt"
	"math"
	"slices"

	"gotok/sample"
)

// The sampler's parameter words: struct samp_params in
// kernels/sampling.cuh, which the host writes to io before each step.
const (
	spDraw = 1 << iota // temperature > 0
	spPenalty
	spRepeat
	spTopP
	spMinP
)

const spWords = 14

// penaltiesOn is package sample's rule for when penalties apply.
func penaltiesOn(p sample.Params) bool {
	return p.PenaltyLastN > 0 && (repeatOn(p) || p.FrequencyPenalty != 0 || p.PresencePenalty != 0)
}

func repeatOn(p sample.Params) bool { return p.RepeatPenalty != 0 && p.RepeatPenalty != 1 }

// encodeParams writes p, for the draw of the given step, into w (spWords
// words). Top-k at or past the vocabulary is off, as in package sample;
// log(MinP) is taken here in float64 with Go's math.Log, as sample does.
func encodeParams(w []uint32, p sample.Params, step uint64, vocab int) {
	clear(w[:spWords])
	var flags uint32
	if !p.Greedy() {
		flags |= spDraw
	}
	if penaltiesOn(p) {
		flags |= spPenalty
		if repeatOn(p) {
			flags |= spRepeat
		}
	}
	if p.TopP > 0 && p.TopP < 1 {
		flags |= spTopP
	}
	if p.MinP > 0 {
		flags |= spMinP
		mp := math.Float64bits(math.Log(float64(p.MinP)))
		w[8], w[9] = uint32(mp), uint32(mp>>32)
	}
	w[0] = flags
	if p.TopK > 0 && p.TopK < vocab {
		w[1] = uint32(p.TopK)
	}
	w[2] = math.Float32bits(p.TopP)
	w[3] = math.Float32bits(p.Temperature)
	w[4] = math.Float32bits(p.RepeatPenalty)
	w[5] = math.Float32bits(p.FrequencyPenalty)
	w[6] = math.Float32bits(p.PresencePenalty)
	w[7] = uint32(p.PenaltyLastN)
	w[10], w[11] = uint32(p.Seed), uint32(p.Seed>>32)
	w[12], w[13] = uint32(step), uint32(step>>32)
}

// hostSampler is the host's side of device sampling: a copy of the penalty
// history the device holds, so a step re-uploads it only when the sampler's
// history is not what the device has, and a sampler for the rare steps the
// device hands back.
type hostSampler struct {
	mirror   []int32 // the device's history, oldest first
	lastN    int     // the PenaltyLastN it was uploaded for (0: none)
	words    []uint32
	fallback *sample.Sampler
}

// decodeSampled runs one step with s's chain on the device. The step is
// s.Advance(), so s stays on the random stream a CPU engine would use; the
// caller accepts the token into s's history as usual, and the device, which
// appended it to its own, finds the two equal at the next step. Like the
// greedy step it runs a step ahead (decodeAhead): the queued step draws
// with the next step of the stream, from the device's history with this
// step's token appended, so it is taken over when s is at that step with
// that history and the same parameters.
func (b *Backend) decodeSampled(token int32, pos int, s *sample.Sampler) (int32, error) {
	p := s.Params()
	pen := penaltiesOn(p)
	if !pen && p.Greedy() {
		s.Advance()
		return b.decodeGreedy(token, pos)
	}
	if b.debug != nil || (pen && p.PenaltyLastN > b.ctxLen) {
		// Debug mode runs kernels one by one, and the device's ring holds
		// at most ctxLen tokens: sample on the host.
		if _, err := b.step(token, pos); err != nil {
			return 0, err
		}
		logits, err := b.readLogits(pos)
		if err != nil {
			return 0, err
		}
		return s.Sample(logits), nil
	}
	a := b.ahead
	queued := a.ok && a.sampled && a.pos == pos && a.token == token && a.params == p && a.step == s.Step() &&
		(!pen || b.hs.lastN == p.PenaltyLastN && slices.Equal(s.Recent(), b.hs.mirror))
	step := s.Advance()
	if !queued {
		if err := b.feedSampled(s, step); err != nil {
			return 0, err
		}
	}
	next, err := b.decodeAhead(queued, token, pos, stepSampled)
	if err != nil {
		return 0, err
	}
	b.ahead.sampled, b.ahead.params, b.ahead.step = true, p, step+1
	switch {
	case next == sampOverflow:
		// More candidates than the device sorts: the host draws from
		// this step's logits, which the queued step has overwritten, so
		// the step runs again (the same bits: it rewrites its own cache
		// row) without a step after it.
		if err := b.feedSampled(s, step); err != nil {
			return 0, err
		}
		if _, err := b.run(b.graphFor(pos, stepSampled), token, pos, ioResult+pos&1); err != nil {
			return 0, err
		}
		return b.hostDraw(p, step, pos)
	case next >= 0 && pen:
		b.hs.accept(next, p.PenaltyLastN)
	}
	return next, nil
}

// feedSampled readies a sampled step at draw step that the host feeds:
// the queued step waited for (the history upload is a synchronous copy,
// and the queued step may append to the history), the penalty history
// uploaded when the device's differs, and the parameters in io.
func (b *Backend) feedSampled(s *sample.Sampler, step uint64) error {
	if err := b.settle(); err != nil {
		return err
	}
	p := s.Params()
	if penaltiesOn(p) {
		if err := b.syncHistory(s); err != nil {
			return err
		}
	}
	encodeParams(b.host.Uint32s()[ioParams:], p, step, b.cfg.VocabSize)
	return nil
}

// syncHistory uploads s's penalty history and its counts when the device's
// differs (a new prompt, another sampler, a token the caller did not accept).
func (b *Backend) syncHistory(s *sample.Sampler) error {
	h, n := &b.hs, s.Params().PenaltyLastN
	recent := s.Recent()
	if h.lastN == n && slices.Equal(recent, h.mirror) {
		return nil
	}
	h.lastN = 0 // until the upload is done
	h.words = append(h.words[:0], uint32(len(recent)), 0)
	for _, t := range recent {
		h.words = append(h.words, uint32(t))
	}
	if err := b.c.CopyHtoD(b.hist, u32Bytes(h.words)); err != nil {
		return fmt.Errorf("cuda: penalty history: %w", err)
	}
	counts := make([]uint32, b.cfg.VocabSize)
	for _, t := range recent {
		if t >= 0 && int(t) < len(counts) {
			counts[t]++
		}
	}
	if err := b.c.CopyHtoD(b.counts, u32Bytes(counts)); err != nil {
		return fmt.Errorf("cuda: penalty counts: %w", err)
	}
	h.mirror = append(h.mirror[:0], recent...)
	h.lastN = n
	return nil
}

// accept records that the device appended tok to its history of n.
func (h *hostSampler) accept(tok int32, n int) {
	h.mirror = append(h.mirror, tok)
	if len(h.mirror) > n {
		copy(h.mirror, h.mirror[1:])
		h.mirror = h.mirror[:n]
	}
}

// hostDraw samples the step's logits, already penalized on the device, on
// the host: the device kernel hands back steps with more candidates than
// it sorts. A sampler without penalties, at the same step, draws what p's
// chain would.
func (b *Backend) hostDraw(p sample.Params, step uint64, pos int) (int32, error) {
	logits, err := b.readLogits(pos)
	if err != nil {
		return 0, err
	}
	p.PenaltyLastN = 0
	h := &b.hs
	if h.fallback == nil || h.fallback.Params() != p || h.fallback.Step() > step {
		if h.fallback, err = sample.New(p); err != nil {
			return 0, err
		}
	}
	for h.fallback.Step() < step {
		h.fallback.Advance()
	}
	return h.fallback.Sample(logits), nil
}

func u32Bytes(w []uint32) []byte {
	b := make([]byte, 4*len(w))
	for i, v := range w {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return b
}
