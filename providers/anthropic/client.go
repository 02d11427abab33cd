// Package anthropic is the backend adapter for Anthropic's Messages API: it translates an
// OpenAI chat request into a Messages request and the answer, streamed or whole, back into
// structured llm.Chunk values. A request that came in as Messages is relayed as sent, with
// only "model" replaced, and its events come back as sent (native.go). The HTTP exchange is
// upstream.Client's; this package keeps what is Anthropic's own: the URL and headers, the
// request, the events and the error bodies.
package anthropic

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
const DefaultBaseURL = "https://api.anthropic.com"

const (
	apiVersion = "2023-06-01"

	defaultHeaderTimeout = 60 * time.Second
)

// Config configures a Client. BaseURL is the API root, as in ANTHROPIC_BASE_URL; a trailing
// /v1 is ignored; empty: DefaultBaseURL. Keys go in x-api-key. A zero HeaderTimeout is 60s.
type Config = upstream.Config

// Client calls the Messages API. It is safe for concurrent use.
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
	// A base given OpenAI-style, with /v1, is accepted too: paths here start with /v1.
	base := strings.TrimSuffix(strings.TrimRight(cfg.BaseURL, "/"), "/v1")
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("anthropic provider %q: base_url %q must start with http:// or https://", cfg.Name, cfg.BaseURL)
	}
	c := &Client{name: cfg.Name}
	c.http = upstream.NewClient(cfg, upstream.Wire{Base: base, HeaderTimeout: defaultHeaderTimeout,
		Header: setHeader, StatusError: c.statusError})
	return c, nil
}

// setHeader sets the API version and the key, if any.
func setHeader(h http.Header, key string) {
	h.Set("anthropic-version", apiVersion)
	if key != "" {
		h.Set("x-api-key", key)
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

// A request that came in as Messages is relayed as sent (openNative).
func (c *Client) open(ctx context.Context, req *llm.Request, key string) (llm.Stream, error) {
	if n := req.NativeFor(llm.FormatMessages); n != nil {
		return c.openNative(ctx, req, n, key)
	}
	body, err := buildRequest(req)
	if err != nil {
		return nil, upstream.WithProvider(err, c.name)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("anthropic: encoding request: %w", err)
	}
	return c.exchange(ctx, req, data, key, nil, false)
}

// exchange posts body to /v1/messages with key and the extra headers and reads the answer:
// decoded into chat chunks, or, when native, as the backend's own events (each also decoded,
// see openNative). Errors the backend reports before the first chunk come back as *llm.Error.
func (c *Client) exchange(ctx context.Context, req *llm.Request, body []byte, key string, header map[string]string,
	native bool) (llm.Stream, error) {
	errorf := func(ae *apiError) *llm.Error { return streamError(c.name, ae, key) }
	var dec upstream.Decoder = newDecoder(errorf)
	if native {
		dec = nativeDecoder{newDecoder(errorf)}
	}
	call := upstream.Call{Path: "/v1/messages", Body: body, Key: key, Stream: req.Stream, Header: header}
	return c.http.Open(ctx, call, dec, func(b []byte) ([]llm.Chunk, error) {
		var eb errorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
			return nil, errorf(eb.Error) // an error in a 200 is an error
		}
		chunks, err := decodeMessage(b)
		if err != nil || !native {
			return chunks, err
		}
		return []llm.Chunk{merge(llm.Chunk{Raw: b, Complete: true, Format: llm.FormatMessages}, chunks)}, nil
	})
}

// ListModels returns the models the API lists for the first key.
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	var models []llm.ModelInfo
	after := ""
	for page := 0; page < 50; page++ { // a bound against a backend that never says "no more"
		path := "/v1/models?limit=1000"
		if after != "" {
			path += "&after_id=" + url.QueryEscape(after)
		}
		var list struct {
			Data []struct {
				ID             string `json:"id"`
				MaxInputTokens int    `json:"max_input_tokens"`
				MaxTokens      int    `json:"max_tokens"`
			} `json:"data"`
			HasMore bool   `json:"has_more"`
			LastID  string `json:"last_id"`
		}
		if err := c.http.GetJSON(ctx, path, &list); err != nil {
			return nil, err
		}
		for _, m := range list.Data {
			models = append(models, llm.ModelInfo{ID: m.ID, ContextWindow: m.MaxInputTokens, MaxOutputTokens: m.MaxTokens})
		}
		if !list.HasMore || list.LastID == "" || list.LastID == after {
			break
		}
		after = list.LastID
	}
	return models, nil
}
