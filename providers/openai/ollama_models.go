package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// Which of Ollama's models embed. Its OpenAI-compatible GET /v1/models does not say; its
// own API does, as the model's capabilities: "embedding" for a model whose GGUF declares a
// pooling type, "completion" otherwise (ollama/ollama server/images.go, ggufCapabilities).
// GET /api/tags lists each model's capabilities since Ollama 0.30 (ollama/ollama#16215);
// before that only POST /api/show {"model": ...} says them, one model at a time, since
// 0.6.4 (ollama/ollama#10066). An older show (since 0.1.45, ollama/ollama#4881) has no
// capabilities but the GGUF's metadata (model_info), where the same rule reads: a model
// embeds when it has "<general.architecture>.pooling_type". Wire formats: ollama/ollama docs/api.md, "List
// Local Models" and "Show Model Information".

// maxOllamaShows bounds the /api/show calls one listing makes: a server with more models
// whose capabilities its tags leave unsaid has the rest listed as chat models.
const maxOllamaShows = 64

// maxOllamaInfo caps an /api/tags or /api/show answer held in memory: a show carries the
// model's template, parameters and license, a few hundred KiB at most.
const maxOllamaInfo = 8 << 20

// ollamaTag is one model of GET /api/tags; Capabilities is nil when the server lists none.
type ollamaTag struct {
	Name         string   `json:"name"`
	Model        string   `json:"model"`
	Capabilities []string `json:"capabilities"`
}

// markOllamaEmbedding types out's embedding models from Ollama's own API: the tags'
// capabilities, else each model's /api/show. A server that answers neither (a proxy, an
// Ollama before 0.6.4) leaves every model a chat model, as before; so does a show that
// fails, for its model.
func (c *Client) markOllamaEmbedding(ctx context.Context, out []llm.ModelInfo) {
	var tags struct {
		Models []ollamaTag `json:"models"`
	}
	if c.ollamaAPI(ctx, "/api/tags", nil, &tags) != nil {
		return
	}
	caps := map[string][]string{}
	for _, t := range tags.Models {
		if t.Capabilities != nil {
			caps[t.Name], caps[t.Model] = t.Capabilities, t.Capabilities
		}
	}
	shows := 0
	for i := range out {
		cs, ok := caps[out[i].ID]
		if !ok && shows < maxOllamaShows && ctx.Err() == nil {
			shows++
			cs = c.ollamaShow(ctx, out[i].ID)
		}
		if slices.Contains(cs, "embedding") {
			out[i].Type = llm.TypeEmbedding
		}
	}
}

// ollamaShow is model's capabilities as POST /api/show says them, or as its model_info
// implies them when it lists none (an Ollama before 0.6.4); nil when the show fails.
// (Ollama's own rule without a pooling type is "completion".)
func (c *Client) ollamaShow(ctx context.Context, model string) []string {
	body, err := json.Marshal(struct {
		Model string `json:"model"`
	}{model})
	if err != nil {
		return nil
	}
	var show struct {
		Capabilities []string       `json:"capabilities"`
		ModelInfo    map[string]any `json:"model_info"`
	}
	if c.ollamaAPI(ctx, "/api/show", body, &show) != nil {
		return nil
	}
	if show.Capabilities != nil {
		return show.Capabilities
	}
	if arch, ok := show.ModelInfo["general.architecture"].(string); ok && arch != "" {
		if _, pooled := show.ModelInfo[arch+".pooling_type"]; pooled {
			return []string{"embedding"}
		}
	}
	return []string{"completion"}
}

// ollamaAPI calls path of Ollama's own API (beside /v1), a POST of body when there is one and
// a GET otherwise, and decodes its JSON answer into v.
func (c *Client) ollamaAPI(ctx context.Context, path string, body []byte, v any) error {
	call := upstream.Call{URL: c.beside(path), Body: body, Key: c.up.Keys().ForListing(), Op: "list models", Header: acceptJSON}
	send := c.up.Get
	if body != nil {
		send = c.up.Post
	}
	resp, cancel, err := send(ctx, call)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	b := upstream.ReadBody(resp.Body, maxOllamaInfo)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
