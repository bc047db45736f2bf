package tokenizer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// benchText reads a file of the Go distribution: a long English text
// (Newton's Opticks, 567 KB) or Go code, so the benchmarks need no download.
func benchText(b *testing.B, rel ...string) string {
	b.Helper()
	root := os.Getenv("GOROOT")
	if root == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Skipf("no GOROOT for the benchmark text: %v", err)
		}
		root = strings.TrimSpace(string(out))
	}
	var sb strings.Builder
	for _, r := range rel {
		data, err := os.ReadFile(filepath.Join(root, r))
		if err != nil {
			b.Skipf("benchmark text: %v", err)
		}
		sb.Write(data)
	}
	return sb.String()
}

var (
	englishFile = []string{"src/testdata/Isaac.Newton-Opticks.txt"}
	codeFiles   = []string{"src/net/http/server.go", "src/net/http/transport.go", "src/go/parser/parser.go"}
)

func benchmarkEncode(b *testing.B, tok *Tokenizer, text string) {
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = len(tok.Encode(text, false, false))
	}
	b.ReportMetric(float64(len(text))/float64(n), "bytes/token")
}

// Encode throughput in MB/s on one core: go test -bench Encode -cpu 1
func BenchmarkEncodeSmolLM2English(b *testing.B) {
	benchmarkEncode(b, importSmolLM2(b), benchText(b, englishFile...))
}

func BenchmarkEncodeSmolLM2Code(b *testing.B) {
	benchmarkEncode(b, importSmolLM2(b), benchText(b, codeFiles...))
}

func BenchmarkEncodeLlamaSPMEnglish(b *testing.B) {
	tok := loadGGUFTokenizer(b, filepath.Join(sharedDir(b), "tokenizer-tests", "ggml-vocab-llama-spm.gguf"))
	benchmarkEncode(b, tok, benchText(b, englishFile...))
}

func BenchmarkEncodeGPT2English(b *testing.B) {
	tok := loadGGUFTokenizer(b, filepath.Join(sharedDir(b), "tokenizer-tests", "ggml-vocab-gpt-2.gguf"))
	benchmarkEncode(b, tok, benchText(b, englishFile...))
}
