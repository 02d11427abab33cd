package app

import (
	"testing"

	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/llm"
)

// TestMergeModelsType: a model's type is the configuration's when it says one, else the
// backend's listing's (an embedding model discovered, or configured without a type), else
// none (a chat model).
func TestMergeModelsType(t *testing.T) {
	p := &config.Provider{Name: "ollama", ModelLanes: 1, Models: []config.Model{
		{ID: "nomic-embed-text:latest"}, {ID: "declared", Type: llm.TypeChat}, {ID: "plain"}}}
	listed := []llm.ModelInfo{{ID: "nomic-embed-text:latest", Type: llm.TypeEmbedding}, {ID: "declared", Type: llm.TypeEmbedding},
		{ID: "all-minilm:latest", Type: llm.TypeEmbedding}, {ID: "llama3.2:latest"}}
	want := map[string]string{"nomic-embed-text:latest": llm.TypeEmbedding, "declared": llm.TypeChat, "plain": "",
		"all-minilm:latest": llm.TypeEmbedding, "llama3.2:latest": ""}
	models := mergeModels(p, listed)
	if len(models) != len(want) {
		t.Fatalf("%d models, want %d: %+v", len(models), len(want), models)
	}
	for _, m := range models {
		if w, ok := want[m.Name]; !ok || m.Card.Type != w {
			t.Errorf("%s: type %q, want %q", m.Name, m.Card.Type, w)
		}
	}
}
