package openai

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// ListModels asks GET {base}/models. OpenAI, LM Studio, Ollama and the hosted compatible
// APIs all answer {"data": [{"id": ...}]}; a context length is kept when a backend gives one.
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	// A provider with per-model keys only borrows one of those: any valid key may list.
	resp, cancel, err := c.up.Get(ctx, upstream.Call{Path: "/models", Key: c.up.Keys().ForListing(), Op: "list models", Header: acceptJSON})
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	body := upstream.ReadBody(resp.Body, maxCompletion)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, c.upstreamError("list models: answer is not a model list: "+c.snippet(body), err)
	}
	out := make([]llm.ModelInfo, 0, len(list.Data))
	for _, raw := range list.Data {
		var m struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &m) != nil || m.ID == "" {
			continue
		}
		info := llm.ModelInfo{ID: m.ID}
		// Optional and typed differently by different servers: read each on its own.
		var extra struct {
			ContextLength    int    `json:"context_length"`
			MaxContextLength int    `json:"max_context_length"`
			Type             string `json:"type"`
		}
		if json.Unmarshal(raw, &extra) == nil {
			info.ContextWindow = max(extra.ContextLength, extra.MaxContextLength)
			if embeddingType(extra.Type) {
				info.Type = llm.TypeEmbedding
			}
		}
		out = append(out, info)
	}
	switch c.kind {
	case KindLMStudio:
		c.markEmbedding(ctx, out)
	case KindOllama:
		c.markOllamaEmbedding(ctx, out) // ollama_models.go
	}
	return out, nil
}

// embeddingType reports whether a listing's "type" says the model embeds: LM Studio's
// "embeddings", or "embedding".
func embeddingType(t string) bool { return t == "embeddings" || t == "embedding" }

// markEmbedding types out's embedding models from LM Studio's own listing, GET
// {host}/api/v0/models, whose entries say "type": "llm", "vlm" or "embeddings" (its
// OpenAI-compatible /v1/models does not). A server without that listing (an older LM
// Studio, a proxy) leaves every model a chat model, as before.
func (c *Client) markEmbedding(ctx context.Context, out []llm.ModelInfo) {
	resp, cancel, err := c.up.Get(ctx, upstream.Call{URL: c.beside("/api/v0/models"), Key: c.up.Keys().ForListing(), Op: "list models"})
	if err != nil {
		return
	}
	defer cancel()
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(upstream.ReadBody(resp.Body, maxCompletion), &list) != nil {
		return
	}
	embeds := map[string]bool{}
	for _, m := range list.Data {
		embeds[m.ID] = embeddingType(m.Type)
	}
	for i := range out {
		if embeds[out[i].ID] {
			out[i].Type = llm.TypeEmbedding
		}
	}
}
