package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"gotok"
)

// metrics is the server's Prometheus registry. Besides gotok's own, it
// exports the gauges an inference gateway's endpoint picker scrapes from a
// model server, under vLLM's names (the ones the Gateway API Inference
// Extension's picker reads by default): queue length, running requests,
// KV-cache use and the LoRA info gauge.
type metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec   // endpoint, code
	requestSeconds *prometheus.HistogramVec // endpoint
	ttft           prometheus.Histogram
	tokensPerSec   prometheus.Histogram
	promptTokens   prometheus.Counter
	genTokens      prometheus.Counter
}

// latencyBuckets span a token on a GPU to a long CPU generation.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newMetrics(model string, sched *scheduler, load func() (running, waiting int64, kvUse float64, eng gotok.EngineStats), parallel int) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gotok_requests_total", Help: "HTTP requests served, by endpoint and status code.",
	}, []string{"endpoint", "code"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gotok_request_duration_seconds", Help: "Time from a request's arrival to its last byte, by endpoint.",
		Buckets: latencyBuckets,
	}, []string{"endpoint"})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "gotok_time_to_first_token_seconds", Help: "Time from a generation request's arrival to its first token, queueing included.",
		Buckets: latencyBuckets,
	})
	m.tokensPerSec = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "gotok_generation_tokens_per_second", Help: "Decode speed of each generation (tokens after the first per second).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	})
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gotok_prompt_tokens_total", Help: "Prompt tokens processed.",
	})
	m.genTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gotok_generation_tokens_total", Help: "Tokens generated.",
	})
	kvUse := func() float64 { _, _, u, _ := load(); return u }
	label := prometheus.Labels{"model_name": model}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: label}, f)
	}
	waiting := func() float64 { _, w, _, _ := load(); return float64(w) }
	running := func() float64 { r, _, _, _ := load(); return float64(r) }
	engine := func(f func(gotok.EngineStats) float64) func() float64 {
		return func() float64 { _, _, _, e := load(); return f(e) }
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: label}, f)
	}
	lora := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm:lora_requests_info",
		Help: "LoRA adapters loaded and waiting (gotok serves none; present for the endpoint picker).",
	}, []string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"})
	lora.WithLabelValues("0", "", "").Set(0)
	m.reg.MustRegister(
		m.requests, m.requestSeconds, m.ttft, m.tokensPerSec, m.promptTokens, m.genTokens,
		gauge("gotok_queue_length", "Requests waiting: queued for a slot or for the engine.", waiting),
		gauge("gotok_requests_running", "Requests generating on the engine.", running),
		gauge("gotok_kv_cache_usage_ratio", "Fraction of the KV cache holding tokens (0 to 1).", kvUse),
		gauge("gotok_parallel_slots", "Requests admitted at once (--parallel).", func() float64 { return float64(parallel) }),
		gauge("gotok_kv_cache_blocks", "Blocks of the KV cache pool (0: the model does not batch).",
			engine(func(e gotok.EngineStats) float64 { return float64(e.KVBlocks) })),
		gauge("gotok_kv_cache_blocks_used", "Blocks of the KV cache pool held by running requests.",
			engine(func(e gotok.EngineStats) float64 { return float64(e.KVBlocksUsed) })),
		counter("gotok_prefix_cache_hit_tokens_total", "Prompt tokens whose keys and values were reused from the prefix cache.",
			engine(func(e gotok.EngineStats) float64 { return float64(e.PromptTokensReused) })),
		counter("gotok_preemptions_total", "Requests that gave up their KV cache to others and were recomputed.",
			engine(func(e gotok.EngineStats) float64 { return float64(e.Preemptions) })),
		counter("gotok_engine_steps_total", "Batched forward steps run.",
			engine(func(e gotok.EngineStats) float64 { return float64(e.Steps) })),
		gauge("vllm:num_requests_waiting", "Requests waiting (vLLM's name, for the inference gateway).", waiting),
		gauge("vllm:num_requests_running", "Requests running (vLLM's name, for the inference gateway).", running),
		gauge("vllm:kv_cache_usage_perc", "KV-cache use, 1 is full (vLLM's name, for the inference gateway).", kvUse),
		gauge("vllm:gpu_cache_usage_perc", "KV-cache use, 1 is full (vLLM's older name, read by older endpoint pickers).", kvUse),
		lora,
	)
	return m
}
