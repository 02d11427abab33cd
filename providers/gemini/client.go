// Package gemini is the backend adapter for the Gemini API's generateContent and
// streamGenerateContent: it translates an OpenAI chat request into a Gemini request and the
// answer, streamed or whole, back into structured llm.Chunk values.
package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// DefaultBaseURL is the API root used when Config.BaseURL is empty.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// Google may hold a stream's headers until its first chunk, which a thinking model can take
// minutes to produce without includeThoughts; a short bound would kill such calls.
const defaultHeaderTimeout = 3 * time.Minute

// Config configures a Client. BaseURL is the API root including the version, e.g.
// .../v1beta; a bare host gets /v1beta; empty: DefaultBaseURL. Keys go in x-goog-api-key. A
// zero HeaderTimeout is 3m.
type Config = upstream.Config

// Client calls the Gemini API. It is safe for concurrent use.
type Client struct {
	name string
	http *upstream.Client
}

var (
	_ llm.Backend      = (*Client)(nil)
	_ llm.KeyedBackend = (*Client)(nil)
	_ llm.ModelLister  = (*Client)(nil)
)

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini provider %q: base_url %q must be an http:// or https:// URL", cfg.Name, cfg.BaseURL)
	}
	if u.Path == "" {
		base += "/v1beta" // a bare host, as in GOOGLE_GEMINI_BASE_URL: the API version is implied
	}
	c := &Client{name: cfg.Name}
	c.http = upstream.NewClient(cfg, upstream.Wire{Base: base, HeaderTimeout: defaultHeaderTimeout,
		Header: setHeader, StatusError: c.statusError})
	return c, nil
}

// setHeader sets the key, if any: a header, not ?key=, so URLs in logs and errors hold no key.
func setHeader(h http.Header, key string) {
	if key != "" {
		h.Set("x-goog-api-key", key)
	}
}

// Open sends req and returns once the backend answered with headers. Errors the backend
// reports before the first chunk come back as *llm.Error. The keys are used in turn.
func (c *Client) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	return c.http.Keys().OpenTurn(ctx, req, c.open)
}

// OpenWithKey is Open with key i of the model's keys (llm.KeyedBackend).
func (c *Client) OpenWithKey(ctx context.Context, req *llm.Request, i int) (llm.Stream, error) {
	return c.http.Keys().OpenKey(ctx, req, i, c.open)
}

// Keys is how many keys a call to the backend model rotates over (llm.KeyedBackend).
func (c *Client) Keys(model string) int { return c.http.Keys().Count(model) }

func (c *Client) open(ctx context.Context, req *llm.Request, key string) (llm.Stream, error) {
	if req.Op() == llm.FormatEmbeddings {
		return c.openEmbed(ctx, req, key)
	}
	body, err := buildRequest(req)
	if err != nil {
		return nil, upstream.WithProvider(err, c.name)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("gemini: encoding request: %w", err)
	}
	model := url.PathEscape(strings.TrimPrefix(req.Model, "models/"))
	path := "/models/" + model + ":generateContent"
	if req.Stream {
		path = "/models/" + model + ":streamGenerateContent?alt=sse"
	}
	errorf := func(ae *apiError) *llm.Error {
		return apiErrorToLLM(c.name, ae, 0, nil, c.http.Now(), key)
	}
	call := upstream.Call{Path: path, Body: data, Key: key, Stream: req.Stream}
	return c.http.Open(ctx, call, newDecoder(errorf), func(b []byte) ([]llm.Chunk, error) {
		return decodeResponse(b, errorf)
	})
}

// ListModels returns the models that can generate content or embed it (typed
// llm.TypeEmbedding), for the first key.
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	var models []llm.ModelInfo
	token := ""
	for page := 0; page < 50; page++ { // a bound against a backend that never stops paging
		path := "/models?pageSize=1000"
		if token != "" {
			path += "&pageToken=" + url.QueryEscape(token)
		}
		var list struct {
			Models []struct {
				Name                       string   `json:"name"`
				InputTokenLimit            int      `json:"inputTokenLimit"`
				OutputTokenLimit           int      `json:"outputTokenLimit"`
				SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
			} `json:"models"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := c.http.GetJSON(ctx, path, &list); err != nil {
			return nil, err
		}
		for _, m := range list.Models {
			info := llm.ModelInfo{ID: strings.TrimPrefix(m.Name, "models/"),
				ContextWindow: m.InputTokenLimit, MaxOutputTokens: m.OutputTokenLimit}
			switch {
			case canGenerate(m.SupportedGenerationMethods):
			case canEmbed(m.SupportedGenerationMethods):
				info.Type, info.MaxOutputTokens = llm.TypeEmbedding, 0
			default:
				continue // models a client of the gateway cannot use
			}
			models = append(models, info)
		}
		if list.NextPageToken == "" || list.NextPageToken == token {
			break
		}
		token = list.NextPageToken
	}
	return models, nil
}

// canEmbed reports whether a listed model embeds (embedContent) rather than generates.
func canEmbed(methods []string) bool {
	for _, m := range methods {
		if m == "embedContent" || m == "batchEmbedContents" {
			return true
		}
	}
	return false
}

// canGenerate reports whether a model lists generateContent among its methods; a model that
// lists none is given the benefit of the doubt.
func canGenerate(methods []string) bool {
	if len(methods) == 0 {
		return true
	}
	for _, m := range methods {
		if m == "generateContent" || m == "streamGenerateContent" {
			return true
		}
	}
	return false
}
