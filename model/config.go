// Package model describes a llama-family model from its GGUF metadata and
// binds its tensors to their roles, checking every shape and type once so the
// backends can trust them.
package model

import (
	"fmt"
	"math"

	"gotok/gguf"
)

// Config holds the hyper-parameters of a llama-family model.
type Config struct {
	Arch       string
	NumLayers  int
	Dim        int // d_model
	NumHeads   int
	NumKVHeads int
	HeadDim    int
	FFNDim     int
	VocabSize  int
	ContextLen int // the context the model was trained for
	RMSEps     float32
	Rope       Rope
	// TiedEmbeddings: the output head reuses token_embd.
	TiedEmbeddings bool
	// QKVBias: the attention projections carry biases (qwen2).
	QKVBias bool
	// Block is how the decoder block differs from llama's (arch.go).
	Block Block
	// LayerAttn says how each layer attends (sliding windows, which
	// rotation).
	LayerAttn []LayerAttention
	// LocalRope is the rotation of the layers with LayerAttn[l].LocalRope.
	LocalRope Rope
}

// QDim is the width of the concatenated query heads.
func (c *Config) QDim() int { return c.NumHeads * c.HeadDim }

// KVDim is the width of the concatenated key (or value) heads.
func (c *Config) KVDim() int { return c.NumKVHeads * c.HeadDim }

// maxLayers bounds block_count before anything is allocated per layer.
const maxLayers = 1 << 16

// ConfigFromMetadata reads the hyper-parameters of m.
func ConfigFromMetadata(m *gguf.Metadata) (Config, error) {
	var c Config
	// llama.cpp's gguf-split keeps the metadata in the first part and
	// spreads the tensors over the rest (later parts lack even the
	// architecture).
	if n, ok := m.Int("split.count"); ok && n > 1 {
		return c, fmt.Errorf("model: part %d of a %d-part GGUF model: gotok loads single-file models only; join the parts first with llama.cpp's llama-gguf-split --merge FIRST-PART OUT.gguf", m.IntOr("split.no", 0)+1, n)
	}
	a, ok := m.String("general.architecture")
	if !ok {
		return c, fmt.Errorf("model: general.architecture missing")
	}
	spec, ok := archs[a]
	if !ok {
		return c, fmt.Errorf("model: architecture %q is not supported (gotok runs %s)", a, archNames)
	}
	if err := checkKeys(m, a, spec.keys); err != nil {
		return c, err
	}
	c.Arch, c.QKVBias = a, spec.qkvBias

	var err error
	need := func(key string) int {
		v, ok := m.Int(a + "." + key)
		if err == nil && !ok {
			err = fmt.Errorf("model: %s.%s missing or not an integer", a, key)
		}
		if err == nil && (v <= 0 || v > math.MaxInt32) {
			err = fmt.Errorf("model: %s.%s = %d is out of range", a, key, v)
		}
		return int(v)
	}
	c.NumLayers = need("block_count")
	c.Dim = need("embedding_length")
	c.FFNDim = need("feed_forward_length")
	c.NumHeads = need("attention.head_count")
	c.ContextLen = need("context_length")
	if err == nil && c.NumLayers > maxLayers {
		err = fmt.Errorf("model: %s.block_count = %d is out of range", a, c.NumLayers)
	}
	if err != nil {
		return c, err
	}
	c.NumKVHeads = int(m.IntOr(a+".attention.head_count_kv", int64(c.NumHeads)))
	if c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0 {
		return c, fmt.Errorf("model: %d heads cannot share %d KV heads", c.NumHeads, c.NumKVHeads)
	}
	c.HeadDim = int(m.IntOr(a+".attention.key_length", int64(c.Dim/c.NumHeads)))
	if vl := m.IntOr(a+".attention.value_length", int64(c.HeadDim)); vl != int64(c.HeadDim) {
		return c, fmt.Errorf("model: value_length %d differs from key_length %d (not supported)", vl, c.HeadDim)
	}
	if c.HeadDim <= 0 || c.HeadDim%2 != 0 || c.HeadDim > 1024 {
		return c, fmt.Errorf("model: head dimension %d is not supported", c.HeadDim)
	}
	c.RMSEps = float32(m.FloatOr(a+".attention.layer_norm_rms_epsilon", 1e-5))
	if !(c.RMSEps > 0) {
		return c, fmt.Errorf("model: bad rms epsilon %g", c.RMSEps)
	}
	if c.Rope, err = ropeFromMetadata(m, a, c.HeadDim, c.ContextLen); err != nil {
		return c, err
	}
	c.Rope.Neox = spec.ropeNeox
	c.Block = LlamaBlock(c.HeadDim)
	c.LayerAttn = make([]LayerAttention, c.NumLayers)
	if spec.setup != nil {
		if err := spec.setup(&c, m); err != nil {
			return c, err
		}
	}
	return c, nil
}
