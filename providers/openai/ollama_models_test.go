package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ollamaModelsDir holds the fake Ollama servers of TestOllamaEmbeddingModels, each from
// Ollama's documented wire format (ollama/ollama docs/api.md, api/types.go), and what the
// listing makes of them.
const ollamaModelsDir = "../../testdata/openai-models/ollama"

// TestOllamaEmbeddingModels: an Ollama provider's listing types as embedding the models
// whose capabilities say "embedding", from /api/tags where it lists them and from
// /api/show where it does not; a server that says neither leaves them chat models. The
// golden file holds the requests the server received, then the models listed.
func TestOllamaEmbeddingModels(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(ollamaModelsDir, "*.json"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases in %s: %v", ollamaModelsDir, err)
	}
	for _, path := range cases {
		if strings.HasSuffix(path, ".golden.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var fx struct {
				Routes map[string]json.RawMessage `json:"routes"`
			}
			if err := json.Unmarshal(raw, &fx); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			var mu sync.Mutex
			var seen []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				route := r.Method + " " + r.URL.Path
				if r.Method == http.MethodPost {
					var show struct {
						Model string `json:"model"`
					}
					_ = json.Unmarshal(body, &show)
					route += " " + show.Model
				}
				mu.Lock()
				seen = append(seen, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(body)))
				mu.Unlock()
				answer, ok := fx.Routes[route]
				if !ok {
					w.WriteHeader(http.StatusNotFound)
					_, _ = io.WriteString(w, `{"error":"model not found"}`)
					return
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				_, _ = w.Write(answer)
			}))
			defer srv.Close()
			models, err := newTestClient(t, KindOllama, srv.URL+"/v1").ListModels(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			type model struct {
				ID   string `json:"id"`
				Type string `json:"type,omitempty"`
			}
			got := struct {
				Requests []string `json:"requests"`
				Models   []model  `json:"models"`
			}{Requests: seen}
			for _, m := range models {
				got.Models = append(got.Models, model{m.ID, m.Type})
			}
			out, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, '\n')
			golden := filepath.Join(ollamaModelsDir, name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("%s:\ngot:\n%s\nwant:\n%s", golden, out, want)
			}
		})
	}
}
