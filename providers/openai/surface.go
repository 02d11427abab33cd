package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// maxEmbeddings caps an embeddings answer held in memory: 2,048 vectors of 3,072 floats
// written as JSON text take about 70 MiB.
const maxEmbeddings = 128 << 20

// The kinds whose API has /embeddings and /completions (SPEC §19). DeepSeek has no
// embeddings; Qwen, Doubao and ERNIE have no legacy completions.
var (
	embeddingKinds   = map[string]bool{KindOpenAI: true, KindNvidia: true, KindQwen: true, KindDoubao: true, KindErnie: true, KindLMStudio: true, KindOllama: true}
	completionsKinds = map[string]bool{KindOpenAI: true, KindDeepSeek: true, KindLMStudio: true, KindOllama: true, KindNvidia: true}
)

var _ llm.Surface = (*Client)(nil)

// Serves reports whether the backend's kind answers calls in format f (llm.Surface).
func (c *Client) Serves(f llm.Format) bool {
	switch f {
	case llm.FormatEmbeddings:
		return embeddingKinds[c.kind]
	case llm.FormatCompletions:
		return completionsKinds[c.kind]
	}
	return false
}

// completionsCall is where legacy completions go: DeepSeek serves them (fill-in-the-middle)
// only under its beta base URL, {host}/beta/completions, beside its /v1.
func (c *Client) completionsCall() upstream.Call {
	if c.kind == KindDeepSeek {
		return upstream.Call{URL: c.beside("/beta/completions")}
	}
	return upstream.Call{Path: "/completions"}
}

// openCompletions relays a legacy completions request as sent, with "model" replaced (and,
// streaming, stream_options.include_usage set, as for chat). Its answer is a
// text_completion, which the chat stream reader reads as it is: choices with finish
// reasons, usage, [DONE].
func (c *Client) openCompletions(ctx context.Context, req *llm.Request, key string) (llm.Stream, error) {
	body, err := requestBody(req)
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Provider: c.name, Message: err.Error(), Err: err}
	}
	call := c.completionsCall()
	call.Body, call.Key, call.Stream = body, key, req.Stream
	resp, cancel, err := c.post(ctx, call)
	if err != nil {
		return nil, err
	}
	return c.answer(ctx, req, resp, cancel)
}

// openEmbeddings relays an embeddings request to {base}/embeddings (Ollama's texts go to its
// native /api/embed instead, ollama_embed.go). OpenAI encodes base64
// itself; the compatible servers are asked for floats, which the adapter encodes when the
// client asked for base64 (not every one of them knows encoding_format).
func (c *Client) openEmbeddings(ctx context.Context, req *llm.Request, key string) (llm.Stream, error) {
	if c.kind == KindOllama && req.Embed != nil && len(req.Embed.Texts) > 0 {
		return c.openOllamaEmbed(ctx, req, key)
	}
	model, err := json.Marshal(req.Model)
	if err != nil {
		return nil, fmt.Errorf("encode model: %w", err)
	}
	encode := req.Embed != nil && req.Embed.Base64 && c.kind != KindOpenAI
	edits := []upstream.Edit{{Key: "model", Value: func([]byte) []byte { return model }}}
	if encode {
		edits = append(edits, upstream.Edit{Key: "encoding_format", Value: func([]byte) []byte { return []byte(`"float"`) }})
	}
	body, err := upstream.SetMembers(req.Native.Body, edits...)
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Provider: c.name, Message: "request body: " + err.Error(), Err: err}
	}
	resp, cancel, err := c.post(ctx, upstream.Call{Path: "/embeddings", Body: body, Key: key})
	if err != nil {
		return nil, err
	}
	b, err := c.up.Whole(ctx, resp, cancel, maxEmbeddings)
	if err != nil {
		return nil, err
	}
	ch, err := c.embeddingsChunk(b, encode)
	if err != nil {
		if be, ok := parseError(bytes.Trim(b, jsonSpace)); ok {
			return nil, c.bodyError(resp.Header, be)
		}
		return nil, err
	}
	return upstream.Chunks([]llm.Chunk{ch}, io.EOF).WithQuota(resp.Header, c.now()), nil
}

// embeddingList is what the adapter reads of an embeddings answer.
type embeddingList struct {
	Object string `json:"object"`
	Data   []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage *struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embeddingsChunk checks that b is an embeddings answer and makes it the call's one chunk:
// relayed as it came, or with its float vectors encoded as base64 when encode is set.
func (c *Client) embeddingsChunk(b []byte, encode bool) (llm.Chunk, error) {
	b = bytes.Trim(b, jsonSpace)
	var l embeddingList
	if err := wirejson.Unmarshal(b, &l); err != nil || l.Data == nil {
		return llm.Chunk{}, c.upstreamError("backend answered 200 with a body that is not an embeddings list: "+c.snippet(b), err)
	}
	ch := llm.Chunk{Raw: b, Complete: true, Format: llm.FormatEmbeddings}
	if l.Usage != nil {
		ch.Usage = &llm.Usage{PromptTokens: l.Usage.PromptTokens, TotalTokens: max(l.Usage.TotalTokens, l.Usage.PromptTokens)}
	}
	if !encode {
		return ch, nil
	}
	v := llm.Vectors{Model: l.Model, Vectors: make([][]float32, len(l.Data))}
	if ch.Usage != nil {
		v.PromptTokens = ch.Usage.PromptTokens
	}
	for i, d := range l.Data {
		if d.Index != i {
			return llm.Chunk{}, c.upstreamError(fmt.Sprintf("backend's embeddings answer has data[%d].index %d", i, d.Index), nil)
		}
		if err := json.Unmarshal(d.Embedding, &v.Vectors[i]); err != nil {
			return llm.Chunk{}, c.upstreamError(fmt.Sprintf("backend's data[%d].embedding is not a list of numbers", i), err)
		}
	}
	raw, err := json.Marshal(llm.EmbeddingsBody(&v, true))
	if err != nil {
		return llm.Chunk{}, fmt.Errorf("encode embeddings: %w", err)
	}
	ch.Raw = raw
	return ch, nil
}
