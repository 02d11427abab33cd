package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// TestEmbedOllamaDiscovered: an Ollama provider configured without models lists what the
// server has, and the model whose /api/tags capabilities say "embedding" is an embedding
// model on its card: openai-go's embeddings.create reaches it through Ollama's /api/embed,
// a chat call to it is 400 invalid_request, and so is an embeddings call to the chat model.
// The server is fakellm behind Ollama's documented listings (ollama/ollama docs/api.md).
func TestEmbedOllamaDiscovered(t *testing.T) {
	fake := fakellm.New(fakellm.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama3.2:latest","object":"model","created":1746405464,"owned_by":"library"},`+
				`{"id":"nomic-embed-text:latest","object":"model","created":1746405000,"owned_by":"library"}]}`)
		case "/api/tags":
			_, _ = io.WriteString(w, `{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest","details":{"family":"llama"},"capabilities":["completion","tools"]},`+
				`{"name":"nomic-embed-text:latest","model":"nomic-embed-text:latest","details":{"family":"nomic-bert"},"capabilities":["embedding"]}]}`)
		default:
			fake.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	g := startGateway(t, fmt.Sprintf("providers:\n  - {name: ollama, kind: ollama, base_url: %s/v1}\n", srv.URL), nil)
	res, err := rawClient.Get(g.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			ID   string `json:"id"`
			Spec struct {
				Type string `json:"type"`
			} `json:"spec"`
		} `json:"data"`
	}
	err = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, m := range list.Data {
		types[m.ID] = m.Spec.Type
	}
	if types["ollama/nomic-embed-text:latest"] != "embedding" || types["ollama/llama3.2:latest"] != "chat" {
		t.Fatalf("/v1/models types %v, want nomic-embed-text embedding and llama3.2 chat", types)
	}
	c := sdkClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	emb, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: "ollama/nomic-embed-text:latest",
		Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta"}}})
	if err != nil || len(emb.Data) != 2 || len(emb.Data[0].Embedding) != fakellm.EmbeddingDims {
		t.Fatalf("embeddings on the discovered model: %v, %+v", err, emb)
	}
	if st := fake.Stats(); st.Requests != 1 {
		t.Errorf("the backend saw %d calls, want the one embeddings call", st.Requests)
	}
	var ae *oai.Error
	_, err = c.Chat.Completions.New(ctx, userParams("ollama/nomic-embed-text:latest"))
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Code != "invalid_request" {
		t.Errorf("chat on the embedding model: %v, want 400 invalid_request", err)
	}
	_, err = c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: "ollama/llama3.2:latest",
		Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String("alpha")}})
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Code != "invalid_request" {
		t.Errorf("embeddings on the chat model: %v, want 400 invalid_request", err)
	}
}
