// Package anthropic is the backend adapter for Anthropic's Messages API: it translates an
// OpenAI chat request into a Messages request and the answer, streamed or whole, back into
// structured llm.Chunk values. A request that came in as Messages is relayed as sent, with
// only "model" replaced, and its events come back as sent (native.go).
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
)

// DefaultBaseURL is the API root used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

const (
	apiVersion = "2023-06-01"

	defaultConnectTimeout = 10 * time.Second
	defaultHeaderTimeout  = 60 * time.Second

	maxErrorBody   = upstream.DefaultErrorBody
	maxMessageBody = 32 << 20 // a whole non-streaming answer, tool inputs included
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name, put on every error.
	Name string
	// BaseURL is the API root, as in ANTHROPIC_BASE_URL; a trailing /v1 is ignored.
	// Empty: DefaultBaseURL.
	BaseURL string
	// Keys are API keys used in turn, one per call. Empty: no x-api-key header is sent (a
	// local proxy that adds its own).
	Keys []string
	// ModelKeys overrides Keys for the backend model names it lists.
	ModelKeys map[string][]string
	// HTTPClient is used as is when set, and ConnectTimeout is then its owner's business.
	// Nil: a pooled keep-alive client owned by the adapter, without a whole-call timeout
	// (the context given to Open bounds a call).
	HTTPClient *http.Client
	// Lanes is how many calls the provider runs at once; the adapter's own client keeps that
	// many idle connections to the backend, so no call dials at steady load. 0 →
	// upstream.DefaultIdlePerHost. Unused with HTTPClient.
	Lanes int
	// ConnectTimeout bounds dialing and the TLS handshake. Zero: 10s. Negative: none.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for response headers of a streaming call. Zero: 60s.
	// Negative: none. Non-streaming calls are not bounded by it: their headers only come
	// when the whole answer is ready.
	HeaderTimeout time.Duration
	// MaxEventBytes caps one SSE event of a streamed answer (limits.max_event_bytes); a
	// larger one ends the answer as an upstream error. Zero: sse.DefaultMaxEvent (8 MiB).
	MaxEventBytes int
}

// Client calls the Messages API. It is safe for concurrent use.
type Client struct {
	name          string
	base          string
	keys          *upstream.KeyRing
	http          *http.Client
	headerTimeout time.Duration
	maxEvent      int              // SSE event size limit; 0: the reader's default
	now           func() time.Time // clock for Retry-After dates; a test seam
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
	c := &Client{name: cfg.Name, base: base, keys: upstream.NewKeyRing(cfg.Keys, cfg.ModelKeys),
		http: cfg.HTTPClient, headerTimeout: upstream.Timeout(cfg.HeaderTimeout, defaultHeaderTimeout),
		maxEvent: cfg.MaxEventBytes, now: time.Now}
	if c.http == nil {
		c.http = upstream.NewHTTPClient(upstream.Timeout(cfg.ConnectTimeout, defaultConnectTimeout), cfg.Lanes)
	}
	return c, nil
}

// Open sends req and returns once the backend answered with headers. Errors the backend
// reports before the first chunk come back as *llm.Error. The keys are used in turn.
func (c *Client) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	return c.keys.OpenTurn(ctx, req, c.open)
}

// OpenWithKey is Open with key i of the model's keys (llm.KeyedBackend).
func (c *Client) OpenWithKey(ctx context.Context, req *llm.Request, i int) (llm.Stream, error) {
	return c.keys.OpenKey(ctx, req, i, c.open)
}

// Keys is how many keys a call to the backend model rotates over (llm.KeyedBackend).
func (c *Client) Keys(model string) int { return c.keys.Count(model) }

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
	resp, cancel, err := c.sendWith(ctx, http.MethodPost, "/v1/messages", body, key, req.Stream, header)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b := upstream.ReadBody(resp.Body, maxErrorBody)
		resp.Body.Close()
		cancel()
		return nil, c.statusError(resp.StatusCode, resp.Header, b, key)
	}
	errorf := func(ae *apiError) *llm.Error { return c.streamError(ae, key) }
	if req.Stream {
		var s *upstream.ChunkStream
		if native {
			s = upstream.NewChunkStream(c.name, resp.Body, cancel,
				&nativeEvents{&events{ctx: ctx, r: sse.NewReaderLimit(resp.Body, c.maxEvent), dec: newDecoder(errorf), key: key}})
		} else {
			s = newStream(ctx, c.name, resp.Body, cancel, newDecoder(errorf), c.maxEvent, key)
		}
		s = s.WithQuota(resp.Header, c.now())
		if err := s.Prime(); err != nil {
			return nil, err
		}
		return s, nil
	}
	defer cancel()
	defer resp.Body.Close()
	b, err := upstream.ReadAnswer(ctx, c.name, resp.Body, maxMessageBody, c.keys.Secrets()...)
	if err != nil {
		return nil, err
	}
	var eb errorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
		return nil, errorf(eb.Error) // an error in a 200 is an error
	}
	chunks, err := decodeMessage(b)
	if err != nil {
		return nil, upstream.WithProvider(err, c.name)
	}
	if native {
		chunks = []llm.Chunk{merge(llm.Chunk{Raw: b, Complete: true, Format: llm.FormatMessages}, chunks)}
	}
	return upstream.Chunks(chunks, io.EOF).WithQuota(resp.Header, c.now()), nil
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
		if err := c.getJSON(ctx, path, &list); err != nil {
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

// getJSON GETs path and decodes a 2xx JSON answer into v.
func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	key := c.keys.ForListing()
	resp, cancel, err := c.send(ctx, http.MethodGet, path, nil, key, true)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return c.statusError(resp.StatusCode, resp.Header, upstream.ReadBody(resp.Body, maxErrorBody), key)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMessageBody)).Decode(v); err != nil {
		return &llm.Error{Kind: llm.KindUpstream, Provider: c.name, Message: "bad model list: " + err.Error(), Err: err}
	}
	return nil
}

// send makes one HTTP call; see upstream.Send. The caller calls the returned cancel once it
// has closed the body. With headerTimeout set the call is aborted when no headers arrived
// within c.headerTimeout.
func (c *Client) send(ctx context.Context, method, path string, body []byte, key string, headerTimeout bool) (*http.Response, context.CancelFunc, error) {
	return c.sendWith(ctx, method, path, body, key, headerTimeout, nil)
}

// sendWith is send with extra headers, which replace the adapter's own of the same name.
func (c *Client) sendWith(ctx context.Context, method, path string, body []byte, key string, headerTimeout bool,
	extra map[string]string) (*http.Response, context.CancelFunc, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body) // fresh per call, so the transport can replay it on a dead connection
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("anthropic: building request: %w", err)
	}
	hreq.Header.Set("anthropic-version", apiVersion)
	if body != nil {
		hreq.Header.Set("content-type", "application/json")
	}
	if key != "" {
		hreq.Header.Set("x-api-key", key)
	}
	for k, v := range extra {
		hreq.Header.Set(k, v)
	}
	var wait time.Duration
	if headerTimeout {
		wait = c.headerTimeout
	}
	resp, cancel, err := upstream.Send(ctx, c.http, hreq, wait)
	if err != nil {
		return nil, nil, upstream.TransportError(ctx, c.name, "calling backend", err, c.keys.Secrets()...)
	}
	return resp, cancel, nil
}
