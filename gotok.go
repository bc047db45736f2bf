// Package gotok runs GGUF language models: load a model, tokenize with its
// own tokenizer, generate text and stream it, on the CPU in pure Go or on an
// NVIDIA GPU.
//
//	m, err := gotok.Load("model.gguf", gotok.Options{})
//	if err != nil { ... }
//	defer m.Close()
//	stats, err := m.Generate(ctx, "Once upon a time", gotok.GenerateOptions{MaxTokens: 64},
//		func(text string) error { fmt.Print(text); return nil })
package gotok

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"

	"gotok/backend"
	"gotok/backend/cpu"
	"gotok/constrain"
	"gotok/model"
	"gotok/quant"
	"gotok/tokenizer"
)

// Options configures Load.
type Options struct {
	// Device is "cpu", "cuda" or "auto" (the default: CUDA when a driver and
	// GPU are present, else the CPU).
	Device string
	// ContextLen is the KV cache length in tokens (0: the model's, capped at
	// 4096).
	ContextLen int
	// Threads for the CPU backend (0: all cores).
	Threads int
	// Logger receives notices such as the device chosen (nil: discarded).
	Logger *slog.Logger
	// Sequences is the most generations that run together on a backend
	// that batches (0: 4); more wait their turn. The CPU always batches;
	// the GPU does when Sequences > 1, and otherwise runs one generation
	// at a time on its decode graphs, the fastest path for one.
	Sequences int
	// KVTokens is the KV cache pool of a backend that batches, in tokens
	// shared by every running generation (0: Sequences × ContextLen, less
	// where that would pass backend.MaxKVBytes, never less than one
	// context). When it runs out, the newest generation waits and is
	// recomputed.
	KVTokens int
	// Mmap keeps the CPU engine's weights mapped from the file, as the GPU
	// engine's are before their upload, instead of reading them into memory
	// of their own on huge pages (Linux with transparent huge pages on,
	// files well within the memory available): less memory taken at once,
	// decode up to a third slower (a TLB miss every 4 KiB page streamed).
	Mmap bool
	// KVType is the KV cache's element type: "f16" or "f32"; "" is the
	// device's default: f16 (half the memory and bandwidth of f32,
	// llama.cpp's default), on CUDA its only type.
	KVType string
}

// kvType is the KV cache's element type: Options.KVType, or the default.
func (o Options) kvType() (quant.Type, error) {
	switch o.KVType {
	case "":
		return quant.F16, nil
	case "f32":
		return quant.F32, nil
	case "f16":
		return quant.F16, nil
	}
	return 0, fmt.Errorf("KV cache type %q: want f32 or f16", o.KVType)
}

// Model is a loaded model with its tokenizer and backend. It is safe for
// concurrent use, but runs one generation at a time: concurrent calls wait.
type Model struct {
	mu      sync.Mutex // serializes generations: one KV cache
	model   *model.Model
	tok     *tokenizer.Tokenizer
	backend backend.Backend
	// cached holds the tokens whose keys and values are in the backend's
	// cache at positions 0, 1, …; a prompt that starts with them (the next
	// turn of a chat) skips recomputing that prefix.
	cached []int32
	// vocab is the vocabulary prepared for constraints, built by the first
	// generation that needs it.
	vocabOnce sync.Once
	vocab     *constrain.Vocab
	closed    bool
	// kvType names the KV cache's element type (KVType).
	kvType string
	// engine runs generations together when the backend batches; nil
	// otherwise, and generations take turns under mu.
	engine *engine
}

// kvTokens is the KV cache pool for contexts of ctxLen with elements of
// elem bytes: Options.KVTokens, or its default.
func (o *Options) kvTokens(c *model.Config, ctxLen, elem int) int {
	if o.KVTokens > 0 {
		return o.KVTokens
	}
	seqs := o.Sequences
	if seqs <= 0 {
		seqs = defaultSequences
	}
	perToken := int64(c.NumLayers) * int64(c.KVDim()) * 2 * int64(elem)
	return int(min(int64(ctxLen)*int64(seqs), max(backend.MaxKVBytes/perToken, int64(ctxLen))))
}

// defaultSequences is Options.Sequences' default, as llama-server's four
// slots.
const defaultSequences = 4

// ErrNoCUDA is returned when Device is "cuda" and CUDA cannot be used.
var ErrNoCUDA = errors.New("CUDA is not available")

// errCUDAKVType is newCUDA's refusal of a KV cache type the CUDA engine
// lacks: CUDA may well be here.
var errCUDAKVType = errors.New("the CUDA engine's KV cache is f16 only")

// Load opens a GGUF model and prepares a backend for it.
func Load(path string, o Options) (*Model, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The CPU engine streams every weight each token: its model is read
	// into memory of its own on huge pages where it can be
	// (inMemoryWeights), unless asked otherwise. "auto" decides here by the
	// driver alone; a model the GPU then refuses runs mapped.
	inMemory := false
	if !o.Mmap && (o.Device == "cpu" || (o.Device == "" || o.Device == "auto") && !cudaAvailable()) {
		if st, err := os.Stat(path); err == nil {
			var why string
			if inMemory, why = inMemoryWeights(st.Size()); !inMemory {
				log.Debug("CPU weights mapped from the file", "reason", why)
			}
		}
	}
	var mm *model.Model
	var err error
	if inMemory {
		mm, err = model.LoadInMemory(path)
		if errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EFBIG) {
			// No room for the copy after all: the mapping pages in and out.
			log.Debug("CPU weights mapped from the file", "reason", err)
			inMemory = false
		}
	}
	if !inMemory {
		mm, err = model.Load(path)
	}
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(&mm.File.Metadata)
	if err != nil {
		mm.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range tok.Warnings() {
		log.Warn(w)
	}
	if tok.VocabSize() != mm.Config.VocabSize {
		mm.Close()
		return nil, fmt.Errorf("%s: tokenizer has %d tokens but the model's embedding has %d rows", path, tok.VocabSize(), mm.Config.VocabSize)
	}
	be, kv, err := newBackend(mm, o, log)
	if err != nil {
		mm.Close()
		return nil, err
	}
	m := &Model{model: mm, tok: tok, backend: be, kvType: strings.ToLower(kv.String())}
	if b, ok := be.(backend.Batcher); ok {
		m.engine = newEngine(m, b, o.Sequences)
	}
	return m, nil
}

// newBackend loads mm on o.Device and says which KV cache type it took.
func newBackend(mm *model.Model, o Options, log *slog.Logger) (backend.Backend, quant.Type, error) {
	kv, err := o.kvType()
	if err != nil {
		return nil, 0, err
	}
	switch o.Device {
	case "", "auto":
		be, err := newCUDA(mm, o, log)
		if err == nil {
			log.Info("running on the GPU", "device", be.Name())
			return be, quant.F16, nil
		}
		if errors.Is(err, errCUDAKVType) && cudaAvailable() {
			// Asked for what only the CPU engine has, on a GPU: say so
			// louder.
			log.Warn("running on the CPU", "reason", err)
		} else {
			log.Info("running on the CPU", "reason", err)
		}
	case "cuda":
		be, err := newCUDA(mm, o, log)
		if errors.Is(err, errCUDAKVType) { // CUDA may well be here
			return nil, 0, fmt.Errorf("device cuda: %w", err)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrNoCUDA, err)
		}
		return be, quant.F16, nil
	case "cpu":
	default:
		return nil, 0, fmt.Errorf("unknown device %q (want cpu, cuda or auto)", o.Device)
	}
	ctxLen, err := backend.ContextLenKV(o.ContextLen, &mm.Config, kv.BlockBytes())
	if err != nil {
		return nil, 0, err
	}
	be, err := cpu.New(mm, cpu.Options{ContextLen: ctxLen, KVTokens: o.kvTokens(&mm.Config, ctxLen, kv.BlockBytes()), Threads: o.Threads, KVType: kv})
	if err != nil {
		return nil, 0, err
	}
	return be, kv, nil
}

// KVType is the KV cache's element type, "f16" or "f32": Options.KVType,
// or the device's default.
func (m *Model) KVType() string { return m.kvType }

// Close releases the backend and the mapped file, after any generation in
// progress has finished. The Model must not be used afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.engine != nil {
		m.engine.close()
	}
	return errors.Join(m.backend.Close(), m.model.Close())
}

// Tokenizer is the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Config is the model's architecture.
func (m *Model) Config() model.Config { return m.model.Config }

// Backend is what runs the model, for direct use (benchmarks, logits).
// Running it directly overwrites the KV cache, so this forgets the cached
// prompt prefix: the next Generate recomputes its whole prompt. Do not use
// the backend concurrently with Generate.
func (m *Model) Backend() backend.Backend {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cached = nil
	return m.backend
}

// Batches reports whether concurrent generations run together (continuous
// batching) rather than taking turns.
func (m *Model) Batches() bool { return m.engine != nil }

// EngineStats reports what the batching engine is doing: generations
// running and waiting, the KV cache pool's use, prefix-cache hits. It is
// the zero value on a backend that runs one generation at a time.
func (m *Model) EngineStats() EngineStats {
	if m.engine == nil {
		return EngineStats{}
	}
	return m.engine.Stats()
}

// ContextLen is the KV cache length in tokens.
func (m *Model) ContextLen() int { return m.backend.ContextLen() }

// ChatTemplate is the model's chat template (tokenizer.chat_template, a
// Jinja text; package chat renders the formats it names).
func (m *Model) ChatTemplate() (string, bool) {
	return m.model.File.String("tokenizer.chat_template")
}

// Params is the number of weights.
func (m *Model) Params() int64 { return m.model.Params() }

// WeightBytes is the size of the weights.
func (m *Model) WeightBytes() int64 { return m.model.WeightBytes() }
