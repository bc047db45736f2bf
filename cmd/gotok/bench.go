package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gotok"
	"gotok/backend"
	"gotok/sample"
)

func newBenchCmd() *cobra.Command {
	var (
		lf     loadFlags
		pp, tg []int
		depth  []int
		reps   int
		asJSON bool
		npl    []int
		kv     int
	)
	cmd := &cobra.Command{
		Use:   "bench [-m MODEL] [-p 512] [-n 128] [-r 5] [--json]",
		Short: "Measure prompt processing and generation speed, llama-bench style",
		Long: `bench measures prompt processing (pp N: N prompt tokens in one pass) and
text generation (tg N: N tokens one at a time, greedy) on random tokens, as
llama-bench does, and prints tok/s as mean ± standard deviation over the
repetitions after one warm-up run. -p and -n take comma-separated lists; -d
runs the tests after a context of that many tokens. --json prints one object
per test with llama-bench's field names (n_prompt, n_gen, avg_ts, stddev_ts, …).

--npl 1,8,32 measures sequences run together instead, as llama-batched-bench
does: for each count, that many sequences of -p prompt tokens in one step,
then -n steps of one token each for all of them (the first -p and -n
values), with its table (S_TG: generated tokens a second, all sequences
together).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if reps <= 0 {
				return fmt.Errorf("-r must be positive")
			}
			for _, v := range append(append(append([]int{}, pp...), tg...), depth...) {
				if v < 0 {
					return fmt.Errorf("test sizes must not be negative")
				}
			}
			path, err := resolveModel(cmd.Context(), lf.model, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if len(npl) > 0 {
				// Room for the largest batch, and on the GPU batching on.
				lf.sequences = max(slices.Max(npl), 2)
				lf.kvTokens = kv
				if lf.kvTokens == 0 && len(pp) > 0 && len(tg) > 0 {
					// At least one whole context, which the pool must hold.
					lf.kvTokens = max(slices.Max(npl)*(pp[0]+tg[0]+16), cmp.Or(lf.ctx, backend.DefaultMaxContext))
				}
			}
			m, _, err := lf.open(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer func() {
				if m != nil {
					m.Close()
				}
			}()
			if len(npl) > 0 {
				if len(pp) == 0 || len(tg) == 0 {
					return fmt.Errorf("bench --npl needs -p and -n")
				}
				rs, err := runBatchedBench(cmd.Context(), m, npl, pp[0], tg[0])
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(rs)
				}
				printBatchedBench(cmd.OutOrStdout(), rs)
				return nil
			}
			var tests []benchTest
			for _, d := range depth {
				for _, p := range pp {
					if p > 0 {
						tests = append(tests, benchTest{prompt: p, depth: d})
					}
				}
				for _, n := range tg {
					if n > 0 {
						tests = append(tests, benchTest{gen: n, depth: d})
					}
				}
			}
			// As llama-bench sizes its context to the tests: without --ctx,
			// a test past the default context loads the model again with
			// room for it.
			need := 0
			for _, t := range tests {
				need = max(need, t.depth+max(t.prompt, t.gen))
			}
			if lf.ctx == 0 && need > m.ContextLen() {
				m.Close()
				lf.ctx = need
				if m, _, err = lf.open(path, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			var results []benchResult
			for _, t := range tests {
				r, err := runBench(cmd.Context(), m, t, reps)
				if err != nil {
					return err
				}
				r.ModelFilename = filepath.Base(path)
				results = append(results, r)
				if !asJSON {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %.2f ± %.2f tok/s\n", t.name(), r.AvgTS, r.StddevTS)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(results)
			}
			printBench(cmd.OutOrStdout(), m, results)
			return nil
		},
	}
	f := cmd.Flags()
	lf.add(f)
	f.IntSliceVarP(&pp, "n-prompt", "p", []int{512}, "prompt lengths to test")
	f.IntSliceVarP(&tg, "n-gen", "n", []int{128}, "generation lengths to test")
	f.IntSliceVarP(&depth, "n-depth", "d", []int{0}, "context depth before each test")
	f.IntVarP(&reps, "repetitions", "r", 5, "repetitions of each test")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.IntSliceVar(&npl, "npl", nil, "sequence counts to run together, llama-batched-bench style (e.g. 1,8,32)")
	f.IntVar(&kv, "kv-tokens", 0, "with --npl: the KV cache pool in tokens (0: the largest count × (p + n))")
	return cmd
}

type benchTest struct{ prompt, gen, depth int }

func (t benchTest) name() string {
	s := fmt.Sprintf("tg%d", t.gen)
	if t.prompt > 0 {
		s = fmt.Sprintf("pp%d", t.prompt)
	}
	if t.depth > 0 {
		s += fmt.Sprintf(" @ d%d", t.depth)
	}
	return s
}

// benchResult uses llama-bench's JSON field names.
type benchResult struct {
	ModelFilename string    `json:"model_filename"`
	ModelSize     int64     `json:"model_size"`
	ModelNParams  int64     `json:"model_n_params"`
	Backend       string    `json:"backends"`
	NThreads      int       `json:"n_threads"`
	NCtx          int       `json:"n_ctx"`
	TypeK         string    `json:"type_k"`
	TypeV         string    `json:"type_v"`
	NPrompt       int       `json:"n_prompt"`
	NGen          int       `json:"n_gen"`
	NDepth        int       `json:"n_depth"`
	TestTime      string    `json:"test_time"`
	AvgNS         int64     `json:"avg_ns"`
	StddevNS      int64     `json:"stddev_ns"`
	AvgTS         float64   `json:"avg_ts"`
	StddevTS      float64   `json:"stddev_ts"`
	SamplesNS     []int64   `json:"samples_ns"`
	SamplesTS     []float64 `json:"samples_ts"`
}

func runBench(ctx context.Context, m *gotok.Model, t benchTest, reps int) (benchResult, error) {
	need := t.depth + t.prompt + t.gen
	if need > m.ContextLen() {
		return benchResult{}, fmt.Errorf("bench %s needs %d tokens of context, have %d (raise --ctx)", t.name(), need, m.ContextLen())
	}
	be := m.Backend()
	vocab := m.Config().VocabSize
	rng := rand.New(rand.NewPCG(1, 2))
	randTokens := func(n int) []int32 {
		ts := make([]int32, n)
		for i := range ts {
			ts[i] = int32(rng.IntN(vocab))
		}
		return ts
	}
	s, err := sample.New(sample.Params{})
	if err != nil {
		return benchResult{}, err
	}
	once := func() (time.Duration, error) {
		if t.depth > 0 {
			if _, err := be.Prefill(ctx, randTokens(t.depth), 0, s); err != nil {
				return 0, err
			}
		}
		if t.prompt > 0 {
			start := time.Now()
			_, err := be.Prefill(ctx, randTokens(t.prompt), t.depth, s)
			return time.Since(start), err
		}
		tok := randTokens(1)[0]
		start := time.Now()
		for i := 0; i < t.gen; i++ {
			tok, err = be.Decode(ctx, tok, t.depth+i, s)
			if err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	if _, err := once(); err != nil { // warm-up
		return benchResult{}, err
	}
	r := benchResult{
		ModelSize: m.WeightBytes(), ModelNParams: m.Params(), Backend: be.Name(),
		NCtx: m.ContextLen(), TypeK: m.KVType(), TypeV: m.KVType(), NPrompt: t.prompt, NGen: t.gen, NDepth: t.depth,
		TestTime: time.Now().UTC().Format(time.RFC3339),
	}
	n := float64(t.prompt + t.gen)
	for range reps {
		d, err := once()
		if err != nil {
			return r, err
		}
		r.SamplesNS = append(r.SamplesNS, d.Nanoseconds())
		r.SamplesTS = append(r.SamplesTS, n/d.Seconds())
	}
	var ns []float64
	for _, v := range r.SamplesNS {
		ns = append(ns, float64(v))
	}
	avg, sd := meanSD(ns)
	r.AvgNS, r.StddevNS = int64(avg), int64(sd)
	r.AvgTS, r.StddevTS = meanSD(r.SamplesTS)
	return r, nil
}

func meanSD(x []float64) (float64, float64) {
	var sum float64
	for _, v := range x {
		sum += v
	}
	mean := sum / float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / float64(len(x)-1))
}

func printBench(w io.Writer, m *gotok.Model, results []benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, " model\t size\t params\t backend\t test\t t/s\t")
	for _, r := range results {
		t := benchTest{prompt: r.NPrompt, gen: r.NGen, depth: r.NDepth}
		fmt.Fprintf(tw, " %s\t %s\t %s\t %s\t %s\t %.2f ± %.2f\t\n", r.ModelFilename, mib(uint64(r.ModelSize)),
			humanCount(uint64(r.ModelNParams)), r.Backend, t.name(), r.AvgTS, r.StddevTS)
	}
	tw.Flush()
}
