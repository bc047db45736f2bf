package perplexity

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// The base file is llama-perplexity's --kl-divergence-base format, so a
// file written by either tool is read by both. All numbers little-endian:
//
//	"_logits_"                     8 bytes
//	n_ctx                          uint32
//	n_vocab, n_chunk               int32, int32
//	tokens                         n_chunk*n_ctx int32, as tokenized (no BOS substitution)
//	then, for each chunk, for each scored position (n_ctx - 1 - n_ctx/2 of them):
//	  scale, min_log_prob          float32, float32
//	  q                            n_vocab uint16, padded with zeros to an even count
//
// where the log-probability of token i is scale*q[i] + min_log_prob: the
// logits are quantized to 16 bits over [max-16, max], and anything below
// is stored as 0 (log-probability min_log_prob).
const baseMagic = "_logits_"

// baseRowLen is the uint16s of one scored position: n_vocab rounded up to
// even, plus the two float32s in front.
func baseRowLen(vocab int) int { return 2*((vocab+1)/2) + 4 }

// baseWriter writes a base file as the scored positions come.
type baseWriter struct {
	w     *bufio.Writer
	vocab int
	row   []uint16
	buf   []byte
}

func newBaseWriter(w io.Writer, nCtx, vocab int, tokens []int32) (*baseWriter, error) {
	b := &baseWriter{w: bufio.NewWriterSize(w, 1<<20), vocab: vocab}
	b.w.WriteString(baseMagic)
	hdr := []any{uint32(nCtx), int32(vocab), int32(len(tokens) / nCtx), tokens}
	for _, x := range hdr {
		if err := binary.Write(b.w, binary.LittleEndian, x); err != nil {
			return nil, fmt.Errorf("perplexity: writing the base log-probabilities: %w", err)
		}
	}
	n := baseRowLen(vocab)
	b.row = make([]uint16, n)
	b.buf = make([]byte, 2*n)
	return b, nil
}

// write quantizes one position's logits and writes them.
func (b *baseWriter) write(logits []float32) error {
	if len(logits) != b.vocab {
		return fmt.Errorf("perplexity: %d logits for a vocabulary of %d", len(logits), b.vocab)
	}
	quantizeLogProbs(logits, b.row)
	for i, v := range b.row {
		binary.LittleEndian.PutUint16(b.buf[2*i:], v)
	}
	if _, err := b.w.Write(b.buf); err != nil {
		return fmt.Errorf("perplexity: writing the base log-probabilities: %w", err)
	}
	return nil
}

func (b *baseWriter) flush() error {
	if err := b.w.Flush(); err != nil {
		return fmt.Errorf("perplexity: writing the base log-probabilities: %w", err)
	}
	return nil
}

// quantizeLogProbs stores the log-softmax of logits in row (baseRowLen
// long) as llama-perplexity does, in the same float32 steps.
func quantizeLogProbs(logits []float32, row []uint16) {
	maxLogit, minLogit := logits[0], logits[0]
	for _, l := range logits[1:] {
		maxLogit = max(maxLogit, l)
		minLogit = min(minLogit, l)
	}
	minLogit = max(minLogit, maxLogit-16)
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - maxLogit))
	}
	logSumExp := float32(math.Log(sum))
	minLogProb := minLogit - maxLogit - logSumExp
	scale := (maxLogit - minLogit) / 65535
	putFloat(row[0:2], scale)
	putFloat(row[2:4], minLogProb)
	q := row[4:]
	clear(q)
	if scale == 0 {
		return
	}
	inv := 1 / scale
	for i, l := range logits {
		if l > minLogit {
			q[i] = uint16(math.RoundToEven(float64(inv * (l - minLogit))))
		}
	}
}

// putFloat stores f's bits in two uint16s, low half first, as a float32
// written over them in memory on a little-endian machine.
func putFloat(dst []uint16, f float32) {
	bits := math.Float32bits(f)
	dst[0], dst[1] = uint16(bits), uint16(bits>>16)
}

func getFloat(src []uint16) float32 {
	return math.Float32frombits(uint32(src[0]) | uint32(src[1])<<16)
}

// baseFile is a base file being read: the header, then one row at a time.
type baseFile struct {
	r       *bufio.Reader
	nCtx    int
	vocab   int
	chunks  int
	tokens  []int32
	row     []uint16
	buf     []byte
	rowsGot int
}

// maxBaseTokens bounds the token table a header may announce, so a corrupt
// header is an error and not a huge allocation.
const maxBaseTokens = 1 << 28

func readBaseHeader(r io.Reader) (*baseFile, error) {
	b := &baseFile{r: bufio.NewReaderSize(r, 1<<20)}
	magic := make([]byte, len(baseMagic))
	if _, err := io.ReadFull(b.r, magic); err != nil || string(magic) != baseMagic {
		return nil, fmt.Errorf("perplexity: the base file does not look like a file of log-probabilities (no %q header)", baseMagic)
	}
	var hdr struct {
		NCtx          uint32
		Vocab, Chunks int32
	}
	if err := binary.Read(b.r, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("perplexity: reading the base file's header: %w", err)
	}
	if hdr.NCtx < MinContext || hdr.Vocab <= 0 || hdr.Chunks <= 0 || int64(hdr.NCtx)*int64(hdr.Chunks) > maxBaseTokens {
		return nil, fmt.Errorf("perplexity: the base file's header is not valid (n_ctx %d, n_vocab %d, n_chunk %d)", hdr.NCtx, hdr.Vocab, hdr.Chunks)
	}
	b.nCtx, b.vocab, b.chunks = int(hdr.NCtx), int(hdr.Vocab), int(hdr.Chunks)
	b.tokens = make([]int32, b.nCtx*b.chunks)
	if err := binary.Read(b.r, binary.LittleEndian, b.tokens); err != nil {
		return nil, fmt.Errorf("perplexity: reading the base file's tokens: %w", err)
	}
	for i, t := range b.tokens {
		if t < 0 || int(t) >= b.vocab {
			return nil, fmt.Errorf("perplexity: the base file's token %d is %d, outside its vocabulary of %d", i, t, b.vocab)
		}
	}
	n := baseRowLen(b.vocab)
	b.row = make([]uint16, n)
	b.buf = make([]byte, 2*n)
	return b, nil
}

// next reads the next scored position's row.
func (b *baseFile) next() ([]uint16, error) {
	if _, err := io.ReadFull(b.r, b.buf); err != nil {
		return nil, fmt.Errorf("perplexity: reading the base file's log-probabilities (position %d): %w", b.rowsGot, err)
	}
	b.rowsGot++
	for i := range b.row {
		b.row[i] = binary.LittleEndian.Uint16(b.buf[2*i:])
	}
	return b.row, nil
}
