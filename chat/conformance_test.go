package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// conformanceCase is one entry of testdata/conformance.json: a real
// model's chat template, a conversation, and what transformers'
// apply_chat_template returns for them. The file's "about" says where
// the cases come from.
type conformanceCase struct {
	Name                string    `json:"name"`
	Template            string    `json:"template"`
	BOS                 string    `json:"bos"`
	EOS                 string    `json:"eos"`
	Messages            []Message `json:"messages"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
	Want                string    `json:"want"`
	WantFrom            string    `json:"want_from"`
	Note                string    `json:"note"`
}

func loadConformance(t testing.TB) []conformanceCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "conformance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		About string            `json:"about"`
		Cases []conformanceCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("testdata/conformance.json: %v", err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("testdata/conformance.json: no cases")
	}
	return doc.Cases
}

// Every real template renders byte for byte what transformers renders.
func TestJinjaConformance(t *testing.T) {
	for _, c := range loadConformance(t) {
		name := c.Name
		if !c.AddGenerationPrompt {
			name += " (no generation prompt)"
		}
		t.Run(name, func(t *testing.T) {
			j, err := ParseJinja(c.Template, SpecialTokens{BOS: c.BOS, EOS: c.EOS})
			if err != nil {
				t.Fatal(err)
			}
			got, err := j.Render(c.Messages, c.AddGenerationPrompt)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.Want {
				t.Errorf("got\n%q\nwant (%s)\n%q", got, c.WantFrom, c.Want)
			}
		})
	}
}
