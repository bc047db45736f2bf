package cpu

import (
	"context"
	"os"
	"testing"

	"gotok/backend"
	"gotok/model"
)

// benchModel loads $GOTOK_BENCH_MODEL (e.g. a `gotok gen --preset
// smollm-135m` file) or skips.
func benchModel(b *testing.B) *model.Model {
	path := os.Getenv("GOTOK_BENCH_MODEL")
	if path == "" {
		b.Skip("set GOTOK_BENCH_MODEL to a GGUF model to benchmark")
	}
	// As gotok.Load reads a CPU model: into memory of its own, on huge
	// pages (mapped from the file, decode is up to a third slower).
	m, err := model.LoadInMemory(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

func BenchmarkDecode(b *testing.B) {
	m := benchModel(b)
	be, err := New(m, Options{ContextLen: 512})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := be.Forward(ctx, []int32{int32(i % m.Config.VocabSize)}, i%256); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

func BenchmarkPrefill128(b *testing.B) { benchPrefill(b, 128) }

func BenchmarkPrefill512(b *testing.B) { benchPrefill(b, 512) }

func benchPrefill(b *testing.B, n int) {
	m := benchModel(b)
	be, err := New(m, Options{ContextLen: 2 * n})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(i * 37 % m.Config.VocabSize)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := be.Forward(ctx, prompt, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkDecodeDepth decodes after a context of 1,500 tokens, where
// attention over the cache is a good part of a token's time.
func BenchmarkDecodeDepth(b *testing.B) {
	m := benchModel(b)
	be, err := New(m, Options{ContextLen: 2048})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	const depth = 1500
	prompt := make([]int32, depth)
	for i := range prompt {
		prompt[i] = int32(i * 37 % m.Config.VocabSize)
	}
	ctx := context.Background()
	if _, err := be.Forward(ctx, prompt, 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := be.Forward(ctx, []int32{int32(i % 1000)}, depth+i%32); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkStep8 decodes 8 sequences together (Step), each after a
// 128-token prompt: the batched engine's steady state.
func BenchmarkStep8(b *testing.B) { benchStep(b, 8) }

// BenchmarkStep32 is BenchmarkStep8 for 32 sequences.
func BenchmarkStep32(b *testing.B) { benchStep(b, 32) }

// BenchmarkStep1 is BenchmarkStep8 for one sequence: a server's step when
// one stream is active, against BenchmarkDecode's single-sequence path.
func BenchmarkStep1(b *testing.B) { benchStep(b, 1) }

func benchStep(b *testing.B, n int) {
	m := benchModel(b)
	be, err := New(m, Options{ContextLen: 1024, KVTokens: n * 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ctx := context.Background()
	st := make([]backend.SeqStep, n)
	for i := range st {
		p := make([]int32, 128)
		for j := range p {
			p[j] = int32((i*131 + j*37) % m.Config.VocabSize)
		}
		seq, _ := be.KV().NewSeq(p)
		if err := seq.Reserve(len(p)); err != nil {
			b.Fatal(err)
		}
		st[i] = backend.SeqStep{Seq: seq, Tokens: p, Sample: true}
	}
	if err := be.Step(ctx, st); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for i := range st {
			if st[i].Seq.Len() >= 1000 {
				b.Fatal("context full: lower -benchtime")
			}
			if err := st[i].Seq.Reserve(1); err != nil {
				b.Fatal(err)
			}
			st[i].Tokens = []int32{st[i].Next}
		}
		if err := be.Step(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
}
