package gotok

import (
	"fmt"
	"log/slog"

	"gotok/backend"
	"gotok/backend/cuda"
	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/quant"
)

// cudaAvailable reports whether a CUDA driver and device are here.
func cudaAvailable() bool { return cu.Available() == nil }

func newCUDA(mm *model.Model, o Options, log *slog.Logger) (backend.Backend, error) {
	kv, err := o.kvType()
	if err != nil {
		return nil, err
	}
	if kv != quant.F16 {
		return nil, fmt.Errorf("%w (KV cache type %q)", errCUDAKVType, o.KVType)
	}
	b, err := cuda.New(mm, cuda.Options{ContextLen: o.ContextLen})
	if err != nil {
		return nil, err // not a typed nil *cuda.Backend inside the interface
	}
	// What the engine took on the device (gotok -v): the weights, the KV
	// cache for the whole context, and the rest (scratch, kernels, graphs).
	st := b.Stats()
	log.Debug("GPU memory", "weights", mib(st.WeightBytes), "kv_cache", mib(st.KVBytes), "context", b.ContextLen(),
		"other", mib(st.DeviceBytes-st.WeightBytes-st.KVBytes), "total", mib(st.DeviceBytes),
		"kernels_per_token", st.KernelsPerToken)
	// Generations run together when asked for several (a server); alone,
	// the decode graphs are the fast path.
	if o.Sequences > 1 {
		kv := o.kvTokens(&mm.Config, b.ContextLen(), quant.F16.BlockBytes())
		bb, err := b.EnableBatching(kv, o.Sequences)
		if err != nil {
			log.Info("GPU generations take turns", "reason", err)
			return b, nil
		}
		log.Debug("GPU KV cache pool", "tokens", kv, "bytes", mib(int64(kv)*int64(mm.Config.NumLayers)*int64(mm.Config.KVDim())*2*cuda.KVElemBytes))
		return bb, nil
	}
	return b, nil
}

// mib formats n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
