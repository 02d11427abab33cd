package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// ollamaEmbed is the body of Ollama's native POST /api/embed (docs.ollama.com/api/embed).
// Truncate is false: an input longer than the model takes is the backend's 400, as OpenAI
// answers it, not an embedding of its first part.
type ollamaEmbed struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Truncate   bool     `json:"truncate"`
	Dimensions int      `json:"dimensions,omitempty"`
}

// ollamaEmbedAnswer is its answer; prompt_eval_count is the inputs' tokens.
type ollamaEmbedAnswer struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	PromptEvalCount int         `json:"prompt_eval_count"`
}

// openOllamaEmbed embeds texts through Ollama's own /api/embed, which counts the inputs'
// tokens and refuses an input too long instead of truncating it, and answers with
// OpenAI's list. Token arrays, which /api/embed does not take, go to /v1/embeddings.
func (c *Client) openOllamaEmbed(ctx context.Context, req *llm.Request, key string) (llm.Stream, error) {
	body, err := json.Marshal(ollamaEmbed{Model: req.Model, Input: req.Embed.Texts, Dimensions: req.Embed.Dimensions})
	if err != nil {
		return nil, fmt.Errorf("encode embeddings request: %w", err)
	}
	resp, cancel, err := c.post(ctx, upstream.Call{URL: c.beside("/api/embed"), Body: body, Key: key})
	if err != nil {
		return nil, err
	}
	b, err := c.up.Whole(ctx, resp, cancel, maxEmbeddings)
	if err != nil {
		return nil, err
	}
	raw, usage, err := c.ollamaList(b, len(req.Embed.Texts), req.Embed.Base64)
	if err != nil {
		if be, ok := parseError(b); ok {
			return nil, c.bodyError(resp.Header, be)
		}
		return nil, err
	}
	ch := llm.Chunk{Raw: raw, Complete: true, Format: llm.FormatEmbeddings, Usage: usage}
	return upstream.Chunks([]llm.Chunk{ch}, io.EOF).WithQuota(resp.Header, c.now()), nil
}

// ollamaList turns /api/embed's answer b, which must hold want vectors, into OpenAI's list.
func (c *Client) ollamaList(b []byte, want int, asBase64 bool) ([]byte, *llm.Usage, error) {
	var a ollamaEmbedAnswer
	if err := wirejson.Unmarshal(b, &a); err != nil || len(a.Embeddings) != want {
		return nil, nil, c.upstreamError(fmt.Sprintf("backend answered 200 with a body that is not %d embeddings: %s", want, c.snippet(b)), err)
	}
	v := llm.Vectors{Model: a.Model, Vectors: a.Embeddings, PromptTokens: a.PromptEvalCount}
	raw, err := json.Marshal(llm.EmbeddingsBody(&v, asBase64))
	if err != nil {
		return nil, nil, fmt.Errorf("encode embeddings: %w", err)
	}
	return raw, &llm.Usage{PromptTokens: a.PromptEvalCount, TotalTokens: a.PromptEvalCount}, nil
}
