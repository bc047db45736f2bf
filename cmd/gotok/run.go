package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gotok"
	"gotok/backend"
	"gotok/sample"
)

// loadFlags are the flags of every command that loads a model to run it.
type loadFlags struct {
	model   string
	device  string
	ctx     int
	threads int
	mmap    bool
	kvType  string
	verbose bool
	// sequences and kvTokens are gotok.Options' (commands set them; no flag
	// here).
	sequences, kvTokens int
}

func (l *loadFlags) add(f *pflag.FlagSet) {
	f.StringVarP(&l.model, "model", "m", "", modelFlagHelp)
	f.StringVar(&l.device, "device", "auto", "cpu, cuda, or auto (CUDA when a GPU is present)")
	f.IntVarP(&l.ctx, "ctx", "c", 0, "context length in tokens (0: the model's, at most 4096)")
	f.IntVarP(&l.threads, "threads", "t", 0, "CPU threads (0: all cores)")
	f.BoolVar(&l.mmap, "mmap", false, "CPU: map the weights from the file instead of reading them into memory (less memory, slower decode)")
	f.StringVar(&l.kvType, "kv-type", "", "KV cache elements, f16 or f32 (f32: the CPU engine only)")
	f.BoolVarP(&l.verbose, "verbose", "v", false, "log what happens to stderr")
}

// load resolves -m (pulling a Hugging Face name on first use) and loads
// the model; the time returned is the load's alone.
func (l *loadFlags) load(ctx context.Context, stderr io.Writer) (*gotok.Model, time.Duration, error) {
	path, err := resolveModel(ctx, l.model, stderr)
	if err != nil {
		return nil, 0, err
	}
	return l.open(path, stderr)
}

// open loads the model file at path.
func (l *loadFlags) open(path string, stderr io.Writer) (*gotok.Model, time.Duration, error) {
	if l.ctx < 0 || l.threads < 0 {
		return nil, 0, fmt.Errorf("--ctx and --threads must not be negative")
	}
	level := slog.LevelInfo
	if l.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(&noticeHandler{w: stderr, level: level})
	start := time.Now()
	m, err := gotok.Load(path, gotok.Options{Device: l.device, ContextLen: l.ctx, Threads: l.threads, Logger: log,
		Sequences: l.sequences, KVTokens: l.kvTokens, Mmap: l.mmap, KVType: l.kvType})
	return m, time.Since(start), err
}

// sampleFlags are the sampler options, named as llama.cpp names them.
type sampleFlags struct {
	p    sample.Params
	seed int64
}

func (s *sampleFlags) add(f *pflag.FlagSet) {
	d := sample.DefaultParams()
	s.p = d
	f.Float32Var(&s.p.Temperature, "temp", d.Temperature, "temperature; 0 means greedy")
	f.IntVar(&s.p.TopK, "top-k", d.TopK, "keep the k most likely tokens (0: off)")
	f.Float32Var(&s.p.TopP, "top-p", d.TopP, "keep the smallest set with this much probability (1: off)")
	f.Float32Var(&s.p.MinP, "min-p", d.MinP, "drop tokens less likely than this fraction of the best (0: off)")
	f.Float32Var(&s.p.RepeatPenalty, "repeat-penalty", d.RepeatPenalty, "penalize repeated tokens (1: off)")
	f.Float32Var(&s.p.PresencePenalty, "presence-penalty", d.PresencePenalty, "subtract from the logits of tokens present (0: off)")
	f.Float32Var(&s.p.FrequencyPenalty, "frequency-penalty", d.FrequencyPenalty, "subtract this times the count of each token (0: off)")
	f.IntVar(&s.p.PenaltyLastN, "repeat-last-n", d.PenaltyLastN, "how many recent tokens the penalties look at (-1: the whole context)")
	f.Int64Var(&s.seed, "seed", -1, "random seed (-1: a random one)")
}

// params returns the sampler settings for a context of ctxLen tokens
// (--repeat-last-n -1 means all of it, as in llama.cpp).
func (s *sampleFlags) params(ctxLen int) sample.Params {
	p := s.p
	if p.PenaltyLastN < 0 {
		p.PenaltyLastN = ctxLen
	}
	if s.seed >= 0 {
		p.Seed = uint64(s.seed)
	} else {
		p.Seed = uint64(time.Now().UnixNano())
	}
	return p
}

func newRunCmd() *cobra.Command {
	var (
		lf                                          loadFlags
		sf                                          sampleFlags
		prompt, promptFile                          string
		n                                           int
		stops                                       []string
		ignoreEOS, noSpecial, parseSpecial, special bool
	)
	cmd := &cobra.Command{
		Use:   "run [-m MODEL] -p PROMPT",
		Short: "Generate a continuation of a prompt, streamed to stdout",
		Long: `run continues a prompt with the model and streams the text to stdout as it
is produced (the prompt itself is not echoed); timings go to stderr.
Without -m the model named by $GOTOK_MODEL is used. Sampling follows
llama.cpp's flags and defaults; --temp 0 is greedy, and --seed makes sampled
runs repeatable. Ctrl-C stops generation and prints the statistics so far.

Example:
  gotok run -m ../shared/models/stories260K.gguf -p "Once upon a time" -n 64`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if promptFile != "" {
				data, err := os.ReadFile(promptFile)
				if err != nil {
					return err
				}
				prompt = string(data)
			}
			if n < 0 {
				n = 0 // llama.cpp's -1: no limit
			}
			if err := sf.params(0).Validate(); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			m, loadTime, err := lf.load(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			defer m.Close()
			params := sf.params(m.ContextLen())

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			out := cmd.OutOrStdout()
			opts := gotok.GenerateOptions{MaxTokens: n, Sample: params, Stop: stops, IgnoreEOS: ignoreEOS, NoSpecial: noSpecial, ParseSpecial: parseSpecial, Special: special}
			st, err := m.Generate(ctx, prompt, opts, func(text string) error {
				_, err := io.WriteString(out, text)
				return err
			})
			if st.GeneratedTokens == 0 && err != nil {
				return err // nothing ran: no statistics to show
			}
			fmt.Fprintln(out)
			printStats(stderr, m, loadTime, st)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	lf.add(f)
	sf.add(f)
	f.StringVarP(&prompt, "prompt", "p", "", "prompt text")
	f.StringVarP(&promptFile, "file", "f", "", "read the prompt from a file")
	f.IntVarP(&n, "n-predict", "n", 256, "most tokens to generate (0 or -1: until the context is full)")
	f.StringArrayVar(&stops, "stop", nil, "stop when this text is generated (repeatable)")
	f.BoolVar(&ignoreEOS, "ignore-eos", false, "keep generating past end-of-generation tokens")
	f.BoolVar(&noSpecial, "no-bos", false, "do not add the BOS/EOS tokens the model asks for")
	f.BoolVar(&special, "special", false, "print generated control tokens (<|im_start|>, ...) as their text, as llama-cli's --special (default: as nothing)")
	f.BoolVar(&parseSpecial, "parse-special", false, "turn special-token text in the prompt into special tokens (off by default, unlike llama-cli: raw text stays text)")
	return cmd
}

func printStats(w io.Writer, m *gotok.Model, load time.Duration, st gotok.Stats) {
	be := m.Backend()
	fmt.Fprintf(w, "\nbackend:  %s\n", be.Name())
	if r, ok := be.(backend.MemoryReporter); ok {
		fmt.Fprintf(w, "memory:   %s\n", memoryLine(r.Memory()))
	}
	fmt.Fprintf(w, "load:     %8.1f ms\n", float64(load.Microseconds())/1000)
	fmt.Fprintf(w, "prompt:   %8.1f ms, %5d tokens, %9.1f tok/s\n", ms(st.PromptDuration), st.PromptTokens, st.PromptTokensPerSecond())
	fmt.Fprintf(w, "generate: %8.1f ms, %5d tokens, %9.1f tok/s (stop: %s)\n", ms(st.DecodeDuration), st.GeneratedTokens, st.DecodeTokensPerSecond(), st.StopReason)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// memoryLine says what a backend holds, in MiB.
func memoryLine(m backend.Memory) string {
	where := "host"
	if m.Device {
		where = "device"
	}
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	return fmt.Sprintf("%.1f MiB of %s memory: weights %.1f, KV cache %.1f, the rest %.1f",
		mib(m.Weights+m.KV+m.Other), where, mib(m.Weights), mib(m.KV), mib(m.Other))
}
