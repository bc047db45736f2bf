package hub_test

import (
	"context"
	"fmt"
	"log"

	"gotok/hub"
)

// A server or a program resolves a model name to a file once, at start:
// from the cache when it is there, from the Hub (HF_ENDPOINT, HF_TOKEN,
// HF_HUB_CACHE, offline mode all from the environment) the first time.
func ExampleResolve() {
	o := hub.OptionsFromEnv()
	o.Progress = func(p hub.Progress) { fmt.Printf("\r%s: %d of %d bytes", p.File, p.Done, p.Total) }
	path, err := hub.Resolve(context.Background(), "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", o)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("\nload", path)
}

func ExampleList() {
	models, err := hub.List(hub.OptionsFromEnv().CacheDir)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range models {
		fmt.Println(m.Name(), m.Size, m.Path)
	}
}
