// Package deploy holds the container and Kubernetes files for running
// gotok serve; its test checks that the manifests parse and agree.
package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// readDocs parses every YAML document in a file.
func readDocs(t *testing.T, name string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("k8s", name))
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var m map[string]any
		if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		docs = append(docs, m)
	}
	return docs
}

// get walks a path of map keys and list indexes.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %q", path, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", path, k)
			}
			v = l[k]
		}
	}
	return v
}

func TestManifests(t *testing.T) {
	app := readDocs(t, "gotok.yaml")
	pool := readDocs(t, "inferencepool.yaml")
	kinds := map[string]map[string]any{}
	for _, d := range append(app, pool...) {
		kinds[d["kind"].(string)] = d
	}
	for _, k := range []string{"Deployment", "Service", "InferencePool", "HTTPRoute"} {
		if kinds[k] == nil {
			t.Fatalf("no %s", k)
		}
	}
	dep := kinds["Deployment"]
	c := get(t, dep, "spec", "template", "spec", "containers", 0)
	for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		if p := get(t, c, probe, "httpGet", "path"); p != "/health" {
			t.Errorf("%s on %v, want /health", probe, p)
		}
	}
	if gpu := get(t, c, "resources", "limits", "nvidia.com/gpu"); gpu != float64(1) {
		t.Errorf("GPU limit %v", gpu)
	}
	port := get(t, c, "ports", 0, "containerPort")
	labels := get(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
	// The pool selects the Deployment's pods on the port gotok listens on.
	for k, v := range get(t, kinds["InferencePool"], "spec", "selector", "matchLabels").(map[string]any) {
		if labels[k] != v {
			t.Errorf("pool selects %s=%v; the pods have %v", k, v, labels[k])
		}
	}
	if p := get(t, kinds["InferencePool"], "spec", "targetPorts", 0, "number"); p != port {
		t.Errorf("pool target port %v, container port %v", p, port)
	}
	if av := kinds["InferencePool"]["apiVersion"]; av != "inference.networking.k8s.io/v1" {
		t.Errorf("InferencePool apiVersion %v", av)
	}
	// The image's entrypoint listens where the manifests expect it.
	docker, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docker), `"--port", "8080"`) || port != float64(8080) {
		t.Error("Dockerfile and Deployment disagree on the port")
	}
}
