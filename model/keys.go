package model

import (
	"fmt"
	"slices"
	"strings"

	"gotok/gguf"
)

// A file's metadata under its architecture's prefix says how the model
// computes. Every such key must be one gotok applies, one that does not
// change the maths, or one set to the value that means "off": a key gotok
// does not know could change the forward pass, and running the model
// without it would be a silent wrong answer. This is how llama3's
// rope_freqs went unnoticed once; the same rule holds for tensors
// (model.go).

// appliedKeys are read by ConfigFromMetadata or ropeFromMetadata, or do
// not change the forward pass (vocab_size is checked against the
// embedding; finetuned is informational).
var appliedKeys = map[string]bool{
	"context_length": true, "embedding_length": true, "block_count": true, "feed_forward_length": true,
	"vocab_size":           true,
	"attention.head_count": true, "attention.head_count_kv": true,
	"attention.key_length": true, "attention.value_length": true,
	"attention.layer_norm_rms_epsilon": true,
	"rope.dimension_count":             true, "rope.freq_base": true,
	"rope.scaling.type": true, "rope.scaling.factor": true, "rope.scale_linear": true,
	"rope.scaling.attn_factor": true, "rope.scaling.original_context_length": true,
	"rope.scaling.finetuned":       true,
	"rope.scaling.yarn_ext_factor": true, "rope.scaling.yarn_beta_fast": true, "rope.scaling.yarn_beta_slow": true,
	"rope.scaling.yarn_log_multiplier": true,
}

// offKeys change the maths unless they hold the value that turns them off
// (converters write some of them for every model): a zero expert count, a
// causal mask, no soft-capping, unit multipliers.
var offKeys = map[string]func(m *gguf.Metadata, key string) bool{
	"expert_count":                 isNumber(0),
	"expert_used_count":            isNumber(0),
	"expert_shared_count":          isNumber(0),
	"leading_dense_block_count":    isNumber(0),
	"attention.causal":             isBool(true),
	"use_parallel_residual":        isBool(false),
	"attn_logit_softcapping":       isNumber(0),
	"final_logit_softcapping":      isNumber(0),
	"attention.clamp_kqv":          isNumber(0),
	"attention.max_alibi_bias":     isNumber(0),
	"attention.sliding_window":     isNumber(0),
	"attention.scale":              isNumber(0), // 0: 1/√head_dim
	"logit_scale":                  isNumber(1),
	"residual_scale":               isNumber(1),
	"embedding_scale":              isNumber(1),
	"pooling_type":                 isNumber(0),
	"attention.layer_norm_epsilon": never, // LayerNorm, not RMSNorm
}

func isNumber(want float64) func(*gguf.Metadata, string) bool {
	return func(m *gguf.Metadata, key string) bool {
		f, ok := m.Float(key)
		return ok && f == want
	}
}

func isBool(want bool) func(*gguf.Metadata, string) bool {
	return func(m *gguf.Metadata, key string) bool {
		b, ok := m.Bool(key)
		return ok && b == want
	}
}

func never(*gguf.Metadata, string) bool { return false }

// checkKeys refuses metadata that would change how a model of
// architecture a computes in ways gotok does not apply, naming the key.
// The keys in applied are read by the architecture's setup.
func checkKeys(m *gguf.Metadata, a string, applied []string) error {
	prefix := a + "."
	for _, k := range m.Keys() {
		switch {
		case strings.HasPrefix(k, "adapter."):
			return fmt.Errorf("model: the file is an adapter (%s), not a model", k)
		case strings.HasPrefix(k, prefix):
			s := k[len(prefix):]
			if appliedKeys[s] || slices.Contains(applied, s) {
				continue
			}
			if off, ok := offKeys[s]; ok && off(m, k) {
				continue
			}
			v, _ := m.Value(k)
			return fmt.Errorf("model: metadata %s = %v is not supported: it changes how the model computes", k, v)
		}
	}
	return nil
}
