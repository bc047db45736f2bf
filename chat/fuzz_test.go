package chat

import (
	"testing"
	"time"
)

// FuzzJinja parses and renders arbitrary templates (seeded with the real
// ones of testdata/conformance.json) over an arbitrary message: a model
// file's template may be anything, and it must fail with an error, never
// crash the process (a Go stack overflow or an allocation past memory is
// fatal, not a panic Render recovers) or run for long.
func FuzzJinja(f *testing.F) {
	for _, c := range loadConformance(f) {
		f.Add(c.Template, "user", "hi")
	}
	f.Add(`{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}`, "system", "x")
	f.Fuzz(func(t *testing.T, src, role, content string) {
		start := time.Now()
		j, err := ParseJinja(src, SpecialTokens{BOS: "<s>", EOS: "</s>"})
		if err == nil {
			j.Render([]Message{{Role: role, Content: content}, {Role: "assistant", Content: content}}, true)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%v to parse and render %q", d, src)
		}
	})
}
