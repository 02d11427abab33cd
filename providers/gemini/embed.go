package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// maxBatchEmbed is how many inputs one batchEmbedContents call takes; a longer list is
// sent as several calls in turn, within the one call the gateway admitted.
const maxBatchEmbed = 100

// maxEmbedBody caps one embeddings answer held in memory (maxBatchEmbed vectors).
const maxEmbedBody = 16 << 20

var _ llm.Surface = (*Client)(nil)

// Serves reports that the Gemini API has embeddings (embedContent, batchEmbedContents) and
// no legacy completions (llm.Surface).
func (c *Client) Serves(f llm.Format) bool { return f == llm.FormatEmbeddings }

// embedContent is one input of Gemini's embedContent and batchEmbedContents.
type embedContent struct {
	Model                string  `json:"model,omitempty"` // "models/NAME", in a batch only
	Content              content `json:"content"`
	OutputDimensionality int     `json:"outputDimensionality,omitempty"`
}

// embedAnswer is both answers: embedContent's one embedding, batchEmbedContents' list.
type embedAnswer struct {
	Embedding *struct {
		Values []float32 `json:"values"`
	} `json:"embedding"`
	Embeddings []struct {
		Values []float32 `json:"values"`
	} `json:"embeddings"`
}

// embedBodies is the Gemini requests an embeddings call e on model becomes: one
// embedContent body for a single input, else batchEmbedContents bodies of at most
// maxBatchEmbed inputs each. Gemini takes text only: token arrays are a 400 naming input.
func embedBodies(model string, e *llm.Embed) (paths []string, bodies []any, err error) {
	if len(e.Tokens) > 0 {
		return nil, nil, &llm.Error{Kind: llm.KindInvalidRequest, Param: "input",
			Message: "input: the Gemini API embeds text only, not token arrays"}
	}
	m := url.PathEscape(strings.TrimPrefix(model, "models/"))
	one := func(s string, named bool) embedContent {
		ec := embedContent{Content: content{Parts: []part{{Text: s}}}, OutputDimensionality: e.Dimensions}
		if named {
			ec.Model = "models/" + strings.TrimPrefix(model, "models/")
		}
		return ec
	}
	if len(e.Texts) == 1 {
		return []string{"/models/" + m + ":embedContent"}, []any{one(e.Texts[0], false)}, nil
	}
	for start := 0; start < len(e.Texts); start += maxBatchEmbed {
		part := e.Texts[start:min(start+maxBatchEmbed, len(e.Texts))]
		reqs := make([]embedContent, len(part))
		for i, s := range part {
			reqs[i] = one(s, true)
		}
		paths = append(paths, "/models/"+m+":batchEmbedContents")
		bodies = append(bodies, map[string]any{"requests": reqs})
	}
	return paths, bodies, nil
}

// decodeEmbed reads one embeddings answer, which must hold want vectors.
func decodeEmbed(b []byte, want int) ([][]float32, error) {
	var a embedAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: "embeddings answer is not JSON: " + upstream.Cut(string(b), 200), Err: err}
	}
	var out [][]float32
	if a.Embedding != nil {
		out = append(out, a.Embedding.Values)
	}
	for _, e := range a.Embeddings {
		out = append(out, e.Values)
	}
	if len(out) != want {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: fmt.Sprintf("embeddings answer has %d vectors for %d inputs", len(out), want)}
	}
	return out, nil
}

// openEmbed makes an embeddings call through embedContent or batchEmbedContents and answers
// with OpenAI's embeddings list. Gemini reports no token counts for embeddings: the
// answer's usage is zero (unknown).
func (c *Client) openEmbed(ctx context.Context, req *llm.Request, key string) (llm.Stream, error) {
	if req.Embed == nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Provider: c.name, Param: "input", Message: "an embeddings call without inputs"}
	}
	paths, bodies, err := embedBodies(req.Model, req.Embed)
	if err != nil {
		return nil, upstream.WithProvider(err, c.name)
	}
	v := llm.Vectors{Model: req.Model}
	var h http.Header
	for i := range paths {
		want := maxBatchEmbed
		if i == len(paths)-1 {
			want = req.Embed.Count() - i*maxBatchEmbed
		}
		vecs, hdr, err := c.embedOnce(ctx, paths[i], bodies[i], want, key)
		if err != nil {
			return nil, err
		}
		v.Vectors, h = append(v.Vectors, vecs...), hdr
	}
	raw, err := json.Marshal(llm.EmbeddingsBody(&v, req.Embed.Base64))
	if err != nil {
		return nil, fmt.Errorf("gemini: encoding embeddings: %w", err)
	}
	ch := llm.Chunk{Raw: raw, Complete: true, Format: llm.FormatEmbeddings, Usage: &llm.Usage{}}
	return upstream.Chunks([]llm.Chunk{ch}, io.EOF).WithQuota(h, c.http.Now()), nil
}

// embedOnce sends one embeddings request and reads its want vectors.
func (c *Client) embedOnce(ctx context.Context, path string, body any, want int, key string) ([][]float32, http.Header, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, nil, fmt.Errorf("gemini: encoding request: %w", err)
	}
	resp, cancel, err := c.http.Post(ctx, upstream.Call{Path: path, Body: data, Key: key})
	if err != nil {
		return nil, nil, err
	}
	b, err := c.http.Whole(ctx, resp, cancel, maxEmbedBody)
	if err != nil {
		return nil, nil, err
	}
	if ae := parseErrorBody(b); ae != nil {
		return nil, nil, apiErrorToLLM(c.name, ae, 0, resp.Header, c.http.Now(), key)
	}
	vecs, err := decodeEmbed(b, want)
	if err != nil {
		return nil, nil, upstream.WithProvider(err, c.name)
	}
	return vecs, resp.Header, nil
}
