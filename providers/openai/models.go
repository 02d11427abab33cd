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
	hr, err := c.newRequest(ctx, http.MethodGet, "/models", c.keys.ForListing(), nil)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Accept", "application/json")
	resp, cancel, err := c.send(ctx, "list models", hr, false)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	body := upstream.ReadBody(resp.Body, maxCompletion)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.statusError(resp, body)
	}
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
			ContextLength    int `json:"context_length"`
			MaxContextLength int `json:"max_context_length"`
		}
		if json.Unmarshal(raw, &extra) == nil {
			info.ContextWindow = max(extra.ContextLength, extra.MaxContextLength)
		}
		out = append(out, info)
	}
	return out, nil
}
