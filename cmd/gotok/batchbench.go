package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"gotok"
	"gotok/backend"
)

// batchedResult is one row of bench --npl, with llama-batched-bench's
// columns: B sequences of PP prompt tokens each, then TG tokens each
// generated together.
type batchedResult struct {
	PP      int     `json:"pp"`
	TG      int     `json:"tg"`
	B       int     `json:"pl"`
	NKV     int     `json:"n_kv"`
	TPP     float64 `json:"t_pp"`
	SpeedPP float64 `json:"speed_pp"`
	TTG     float64 `json:"t_tg"`
	SpeedTG float64 `json:"speed_tg"`
	T       float64 `json:"t"`
	Speed   float64 `json:"speed"`
}

// runBatchedBench runs bench --npl: for each batch size b, b sequences'
// prompts in one step, then tg steps of one token each for all of them,
// greedy, twice (the first warms up: on the GPU it captures the step's
// graph), the second reported.
func runBatchedBench(ctx context.Context, m *gotok.Model, npl []int, pp, tg int) ([]batchedResult, error) {
	bb, ok := m.Backend().(backend.Batcher)
	if !ok {
		return nil, fmt.Errorf("bench --npl: %s does not run sequences together", m.Backend().Name())
	}
	if pp < 1 || tg < 1 {
		return nil, fmt.Errorf("bench --npl needs -p and -n of at least 1")
	}
	if pp+tg > m.ContextLen() {
		return nil, fmt.Errorf("bench --npl: %d+%d tokens a sequence do not fit the context of %d (raise --ctx)", pp, tg, m.ContextLen())
	}
	vocab := m.Config().VocabSize
	rng := rand.New(rand.NewPCG(1, 2))
	var out []batchedResult
	for _, b := range npl {
		if b < 1 {
			return nil, fmt.Errorf("bench --npl: %d sequences", b)
		}
		var r batchedResult
		for range 2 {
			st := make([]backend.SeqStep, b)
			free := func() {
				for _, s := range st {
					if s.Seq != nil {
						s.Seq.Free()
					}
				}
			}
			for i := range st {
				p := make([]int32, pp)
				for j := range p {
					p[j] = int32(rng.IntN(vocab))
				}
				seq, _ := bb.KV().NewSeq(nil) // random prompts: nothing to reuse
				st[i] = backend.SeqStep{Seq: seq, Tokens: p, Sample: true}
				if err := seq.Reserve(pp + tg); err != nil {
					free()
					return nil, fmt.Errorf("bench --npl %d: %d sequences of %d tokens do not fit the KV cache (raise --kv-tokens): %w", b, b, pp+tg, err)
				}
			}
			start := time.Now()
			if err := bb.Step(ctx, st); err != nil {
				free()
				return nil, err
			}
			tpp := time.Since(start)
			start = time.Now()
			for range tg {
				for i := range st {
					st[i].Tokens = []int32{max(st[i].Next, 0)}
				}
				if err := bb.Step(ctx, st); err != nil {
					free()
					return nil, err
				}
			}
			ttg := time.Since(start)
			free()
			r = batchedResult{PP: pp, TG: tg, B: b, NKV: b * (pp + tg), TPP: tpp.Seconds(), TTG: ttg.Seconds()}
			r.SpeedPP = float64(b*pp) / r.TPP
			r.SpeedTG = float64(b*tg) / r.TTG
			r.T = r.TPP + r.TTG
			r.Speed = float64(r.NKV) / r.T
		}
		out = append(out, r)
	}
	return out, nil
}

func printBatchedBench(w io.Writer, rs []batchedResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, " PP\t TG\t B\t N_KV\t T_PP s\t S_PP t/s\t T_TG s\t S_TG t/s\t T s\t S t/s\t")
	for _, r := range rs {
		fmt.Fprintf(tw, " %d\t %d\t %d\t %d\t %.3f\t %.2f\t %.3f\t %.2f\t %.3f\t %.2f\t\n",
			r.PP, r.TG, r.B, r.NKV, r.TPP, r.SpeedPP, r.TTG, r.SpeedTG, r.T, r.Speed)
	}
	tw.Flush()
}
