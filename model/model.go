package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"gotok/gguf"
	"gotok/quant"
)

// Tensor is a 2-D (or 1-D) weight: Rows rows of Cols elements, row-major,
// in its file type. Data views the mapped file.
type Tensor struct {
	Name string
	Type quant.Type
	Rows int
	Cols int // row length, ggml's ne[0]
	Data []byte
}

// RowBytes is the byte size of one row.
func (t *Tensor) RowBytes() int { return len(t.Data) / t.Rows }

// Row returns the bytes of row i.
func (t *Tensor) Row(i int) []byte {
	n := t.RowBytes()
	return t.Data[i*n : (i+1)*n]
}

// Layer holds one transformer block's weights. The norms a block does not
// have (Config.Block) are empty or nil.
type Layer struct {
	AttnNorm, Wq, Wk, Wv, Wo Tensor  // AttnNorm empty with Block.NoPreNorm
	Bq, Bk, Bv               *Tensor // nil unless Config.QKVBias
	QNorm, KNorm             *Tensor // Block.QKNorm: head_dim or QDim/KVDim gains
	AttnPostNorm             *Tensor // Block.PostNorm
	FFNNorm, Gate, Up, Down  Tensor  // FFNNorm empty with Block.NoPreNorm
	FFNPostNorm              *Tensor // Block.PostNorm
}

// Model is a bound llama-family model.
type Model struct {
	Config     Config
	TokenEmbd  Tensor
	OutputNorm Tensor
	Output     Tensor // == TokenEmbd when Config.TiedEmbeddings
	Layers     []Layer
	File       *gguf.File
}

// Load opens a GGUF file and binds it, its tensors mapped from the file.
func Load(path string) (*Model, error) { return load(path, gguf.Open) }

// LoadInMemory is Load with the file read into memory of its own
// (gguf.OpenInMemory): what the CPU engine decodes fastest from.
func LoadInMemory(path string) (*Model, error) { return load(path, gguf.OpenInMemory) }

func load(path string, open func(string) (*gguf.File, error)) (*Model, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Close releases the mapped file.
func (m *Model) Close() error { return m.File.Close() }

// Params is the number of weight elements.
func (m *Model) Params() int64 {
	var n int64
	for _, t := range m.File.Tensors {
		n += int64(t.Elements())
	}
	return n
}

// WeightBytes is the size of all tensor data.
func (m *Model) WeightBytes() int64 {
	var n int64
	for _, t := range m.File.Tensors {
		n += int64(t.Size)
	}
	return n
}

// FromFile binds the tensors of an opened file.
func FromFile(f *gguf.File) (*Model, error) {
	c, err := ConfigFromMetadata(&f.Metadata)
	if err != nil {
		return nil, err
	}
	b := binder{f: f, bound: make(map[string]bool)}
	m := &Model{File: f}
	m.TokenEmbd = b.matrix("token_embd.weight", c.Dim, -1)
	if b.err != nil {
		return nil, b.err
	}
	c.VocabSize = m.TokenEmbd.Rows
	// Only the families whose llama.cpp graph applies rope_freqs (or
	// LongRoPE's factors) bind them; elsewhere checkAllBound refuses them.
	spec := archs[c.Arch]
	if spec.ropeFreqs {
		if c.Rope.Factors, err = ropeFactors(&b, "rope_freqs.weight", c.Rope.Pairs()); err != nil {
			return nil, err
		}
	}
	if spec.longRope {
		if c.Rope.Factors, err = ropeFactors(&b, "rope_factors_short.weight", c.Rope.Pairs()); err != nil {
			return nil, err
		}
		if c.Rope.LongFactors, err = ropeFactors(&b, "rope_factors_long.weight", c.Rope.Pairs()); err != nil {
			return nil, err
		}
		if (c.Rope.Factors == nil) != (c.Rope.LongFactors == nil) {
			return nil, fmt.Errorf("model: LongRoPE needs both rope_factors_short.weight and rope_factors_long.weight")
		}
		// llama.cpp's n_ctx_orig_yarn.
		c.Rope.ShortContext = int(f.Metadata.IntOr(c.Arch+".rope.scaling.original_context_length", int64(c.ContextLen)))
	}
	if v, ok := f.Int(c.Arch + ".vocab_size"); ok && int(v) != c.VocabSize {
		return nil, fmt.Errorf("model: %s.vocab_size %d differs from token_embd rows %d", c.Arch, v, c.VocabSize)
	}
	m.OutputNorm = b.vector("output_norm.weight", c.Dim)
	if _, ok := f.Tensor("output.weight"); ok {
		m.Output = b.matrix("output.weight", c.Dim, c.VocabSize)
	} else {
		c.TiedEmbeddings = true
		m.Output = m.TokenEmbd
	}
	// Check the last block exists before allocating for NumLayers of them,
	// so a hostile block_count cannot ask for gigabytes.
	if _, ok := f.Tensor(fmt.Sprintf("blk.%d.attn_output.weight", c.NumLayers-1)); !ok || c.NumLayers > len(f.Tensors) {
		return nil, fmt.Errorf("model: %s.block_count is %d but the file has no blk.%d tensors", c.Arch, c.NumLayers, c.NumLayers-1)
	}
	m.Layers = make([]Layer, c.NumLayers)
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		blk := &c.Block
		if !blk.NoPreNorm {
			l.AttnNorm = b.vector(p+"attn_norm.weight", c.Dim)
			l.FFNNorm = b.vector(p+"ffn_norm.weight", c.Dim)
		}
		switch blk.QKNorm {
		case QKNormHead:
			l.QNorm = b.vectorPtr(p+"attn_q_norm.weight", c.HeadDim)
			l.KNorm = b.vectorPtr(p+"attn_k_norm.weight", c.HeadDim)
		case QKNormFull:
			l.QNorm = b.vectorPtr(p+"attn_q_norm.weight", c.QDim())
			l.KNorm = b.vectorPtr(p+"attn_k_norm.weight", c.KVDim())
		}
		if blk.PostNorm {
			l.AttnPostNorm = b.vectorPtr(p+"post_attention_norm.weight", c.Dim)
			l.FFNPostNorm = b.vectorPtr(p+"post_ffw_norm.weight", c.Dim)
		}
		// The projections come apart or fused into attn_qkv (Phi-3; any
		// family in llama.cpp), Q rows first, then K, then V.
		fused := false
		if _, ok := f.Tensor(p + "attn_qkv.weight"); ok {
			fused = true
			qkv := b.matrix(p+"attn_qkv.weight", c.Dim, c.QDim()+2*c.KVDim())
			l.Wq, l.Wk, l.Wv = qkv.rows(0, c.QDim()), qkv.rows(c.QDim(), c.KVDim()), qkv.rows(c.QDim()+c.KVDim(), c.KVDim())
		} else {
			l.Wq = b.matrix(p+"attn_q.weight", c.Dim, c.QDim())
			l.Wk = b.matrix(p+"attn_k.weight", c.Dim, c.KVDim())
			l.Wv = b.matrix(p+"attn_v.weight", c.Dim, c.KVDim())
		}
		l.Wo = b.matrix(p+"attn_output.weight", c.QDim(), c.Dim)
		if c.QKVBias {
			if fused {
				if bias := b.optVector(p+"attn_qkv.bias", c.QDim()+2*c.KVDim()); bias != nil {
					bq, bk, bv := bias.elems(0, c.QDim()), bias.elems(c.QDim(), c.KVDim()), bias.elems(c.QDim()+c.KVDim(), c.KVDim())
					l.Bq, l.Bk, l.Bv = &bq, &bk, &bv
				}
			} else {
				l.Bq = b.optVector(p+"attn_q.bias", c.QDim())
				l.Bk = b.optVector(p+"attn_k.bias", c.KVDim())
				l.Bv = b.optVector(p+"attn_v.bias", c.KVDim())
			}
			// The backends add all three or none.
			if (l.Bq == nil) != (l.Bk == nil) || (l.Bq == nil) != (l.Bv == nil) {
				return nil, fmt.Errorf("model: layer %d has some of the Q/K/V biases but not all three", i)
			}
		}
		if spec.fusedUp {
			// Phi-3's gate_up_proj: the gate rows, then the up rows.
			gateUp := b.matrix(p+"ffn_up.weight", c.Dim, 2*c.FFNDim)
			l.Gate, l.Up = gateUp.rows(0, c.FFNDim), gateUp.rows(c.FFNDim, c.FFNDim)
		} else {
			l.Gate = b.matrix(p+"ffn_gate.weight", c.Dim, c.FFNDim)
			l.Up = b.matrix(p+"ffn_up.weight", c.Dim, c.FFNDim)
		}
		l.Down = b.matrix(p+"ffn_down.weight", c.FFNDim, c.Dim)
	}
	if b.err != nil {
		return nil, b.err
	}
	if err := b.checkAllBound(); err != nil {
		return nil, err
	}
	m.Config = c
	return m, nil
}

// ignoredTensors may be in a file without being used: none so far. Like
// llama.cpp, which refuses a file with tensors it did not create, gotok
// refuses any other tensor it does not bind, since a tensor nobody reads
// (rope_freqs once) is a part of the model left out of the maths. Add a
// name here only with the reason it cannot change the output.
var ignoredTensors = map[string]bool{}

// ropeFactors binds the optional per-frequency divisors name: nil when the
// file has none.
func ropeFactors(b *binder, name string, pairs int) ([]float32, error) {
	t := b.optVector(name, pairs)
	if t == nil || b.err != nil {
		return nil, b.err
	}
	fs := f32s(t.Data)
	for i, v := range fs {
		if !(v > 0) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("model: %s[%d] = %g", name, i, v)
		}
	}
	return fs, nil
}

// rows is the n rows of t from row first: a part of a fused matrix.
func (t Tensor) rows(first, n int) Tensor {
	if t.Data == nil { // binding failed; the binder holds the error
		return Tensor{}
	}
	rb := t.RowBytes()
	return Tensor{Name: fmt.Sprintf("%s[%d:%d]", t.Name, first, first+n), Type: t.Type, Rows: n, Cols: t.Cols,
		Data: t.Data[first*rb : (first+n)*rb]}
}

// elems is the n elements of the F32 vector t from element first.
func (t Tensor) elems(first, n int) Tensor {
	if t.Data == nil { // binding failed; the binder holds the error
		return Tensor{}
	}
	return Tensor{Name: fmt.Sprintf("%s[%d:%d]", t.Name, first, first+n), Type: t.Type, Rows: 1, Cols: n,
		Data: t.Data[4*first : 4*(first+n)]}
}

// checkAllBound refuses a file with a tensor the binder did not take.
func (b *binder) checkAllBound() error {
	for _, t := range b.f.Tensors {
		if !b.bound[t.Name] && !ignoredTensors[t.Name] {
			return fmt.Errorf("model: tensor %s is not supported", t.Name)
		}
	}
	return nil
}

// computeTypes are the weight types the backends can multiply.
var computeTypes = map[quant.Type]bool{
	quant.F32: true, quant.F16: true, quant.BF16: true,
	quant.Q4_0: true, quant.Q4_1: true, quant.Q5_0: true, quant.Q5_1: true, quant.Q8_0: true,
	quant.Q2_K: true, quant.Q3_K: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true,
	quant.IQ4_NL: true, quant.IQ4_XS: true, // CPU only: CUDA refuses them by name
}

type binder struct {
	f     *gguf.File
	err   error
	bound map[string]bool // the tensors taken
}

func (b *binder) get(name string) *gguf.TensorInfo {
	if b.err != nil {
		return nil
	}
	t, ok := b.f.Tensor(name)
	if !ok {
		b.err = fmt.Errorf("model: tensor %s missing", name)
		return nil
	}
	if !computeTypes[t.Type] {
		b.err = fmt.Errorf("model: tensor %s has type %s, which gotok cannot compute with", name, t.Type)
		return nil
	}
	b.bound[name] = true
	return t
}

// matrix binds a 2-D tensor with rows of cols elements; rows < 0 accepts any.
func (b *binder) matrix(name string, cols, rows int) Tensor {
	t := b.get(name)
	if t == nil {
		return Tensor{}
	}
	if len(t.Shape) != 2 || t.Shape[0] != uint64(cols) || (rows >= 0 && t.Shape[1] != uint64(rows)) || t.Shape[1] > 1<<31 {
		b.err = fmt.Errorf("model: tensor %s has shape %v, want [%d %d]", name, t.Shape, cols, rows)
		return Tensor{}
	}
	return Tensor{Name: name, Type: t.Type, Rows: int(t.Shape[1]), Cols: cols, Data: t.Data}
}

func (b *binder) vector(name string, n int) Tensor {
	t := b.get(name)
	if t == nil {
		return Tensor{}
	}
	if len(t.Shape) != 1 || t.Shape[0] != uint64(n) {
		b.err = fmt.Errorf("model: tensor %s has shape %v, want [%d]", name, t.Shape, n)
		return Tensor{}
	}
	if t.Type != quant.F32 {
		b.err = fmt.Errorf("model: tensor %s has type %s, want F32", name, t.Type)
		return Tensor{}
	}
	return Tensor{Name: name, Type: t.Type, Rows: 1, Cols: n, Data: t.Data}
}

func (b *binder) vectorPtr(name string, n int) *Tensor {
	t := b.vector(name, n)
	return &t
}

func (b *binder) optVector(name string, n int) *Tensor {
	if _, ok := b.f.Tensor(name); !ok {
		return nil
	}
	t := b.vector(name, n)
	return &t
}

// f32s decodes little-endian float32s.
func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
