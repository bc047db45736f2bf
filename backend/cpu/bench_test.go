package cpu

import (
	"context"
	"os"
	"testing"

	"gotok/model"
)

// benchModel loads $GOTOK_BENCH_MODEL (e.g. a `gotok gen --preset
// smollm-135m` file) or skips.
func benchModel(b *testing.B) *model.Model {
	path := os.Getenv("GOTOK_BENCH_MODEL")
	if path == "" {
		b.Skip("set GOTOK_BENCH_MODEL to a GGUF model to benchmark")
	}
	m, err := model.Load(path)
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
		if _, err := be.Forward(ctx, []int32{int32(i % 1000)}, i%256); err != nil {
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
