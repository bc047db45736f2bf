package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestParallelRequestsBatch sends requests at once to a server whose model
// batches (the CPU engine, --parallel 4): each gives the text it gives
// alone, and /metrics reports the KV pool, empty again afterwards.
func TestParallelRequestsBatch(t *testing.T) {
	_, ts, _ := storiesServer(t, Options{Parallel: 4})
	c := client(ts)
	prompts := []string{"Once upon a time", "Lily and Ben", "The cat sat", "One day, a bird", "Tom had a ball", "Sue"}
	complete := func(p string) string {
		got, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
			Model:       "stories260K",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)},
			MaxTokens:   openai.Int(40),
			Temperature: openai.Float(0),
		})
		if err != nil {
			t.Error(err)
			return ""
		}
		return got.Choices[0].Text
	}
	alone := make([]string, len(prompts))
	for i, p := range prompts {
		alone[i] = complete(p)
	}
	together := make([]string, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() { together[i] = complete(p) })
	}
	wg.Wait()
	for i := range prompts {
		if together[i] != alone[i] {
			t.Errorf("prompt %q: %q together, %q alone", prompts[i], together[i], alone[i])
		}
	}
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics := readBody(t, resp)
	for _, want := range []string{`gotok_kv_cache_blocks{model_name="stories260K"}`, `gotok_kv_cache_blocks_used{model_name="stories260K"} 0`, "gotok_engine_steps_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, fmt.Sprintf(`gotok_kv_cache_blocks{model_name="stories260K"} 0%s`, "\n")) {
		t.Error("/metrics reports an empty KV pool")
	}
}
