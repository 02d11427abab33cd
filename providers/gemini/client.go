// Package gemini is the backend adapter for the Gemini API's generateContent and
// streamGenerateContent: it translates an OpenAI chat request into a Gemini request and the
// answer, streamed or whole, back into structured llm.Chunk values.
package gemini

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
	"github.com/tollgate/tollgate/providers/upstream"
)

// DefaultBaseURL is the API root used when Config.BaseURL is empty.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

const (
	defaultConnectTimeout = 10 * time.Second
	// Google may hold a stream's headers until its first chunk, which a thinking model can
	// take minutes to produce without includeThoughts; a short bound would kill such calls.
	defaultHeaderTimeout = 3 * time.Minute

	maxErrorBody    = upstream.DefaultErrorBody
	maxResponseBody = 32 << 20 // a whole non-streaming answer
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name, put on every error.
	Name string
	// BaseURL is the API root including the version, e.g. .../v1beta; a bare host gets
	// /v1beta. Empty: DefaultBaseURL.
	BaseURL string
	// Keys are API keys used in turn, one per call. Empty: no x-goog-api-key header is sent
	// (a local proxy that adds its own).
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
	// HeaderTimeout bounds the wait for response headers of a streaming call. Zero: 3m.
	// Negative: none. Non-streaming calls are not bounded by it: their headers only come
	// when the whole answer is ready.
	HeaderTimeout time.Duration
	// MaxEventBytes caps one SSE event of a streamed answer (limits.max_event_bytes); a
	// larger one ends the answer as an upstream error. Zero: sse.DefaultMaxEvent (8 MiB).
	MaxEventBytes int
}

// Client calls the Gemini API. It is safe for concurrent use.
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
	resp, cancel, err := c.send(ctx, http.MethodPost, path, data, key, req.Stream)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b := upstream.ReadBody(resp.Body, maxErrorBody)
		resp.Body.Close()
		cancel()
		return nil, c.statusError(resp.StatusCode, resp.Header, b, key)
	}
	errorf := func(ae *apiError) *llm.Error {
		return apiErrorToLLM(c.name, ae, 0, nil, c.now(), key)
	}
	if req.Stream {
		s := newStream(ctx, c.name, resp.Body, cancel, newDecoder(errorf), c.maxEvent, key).WithQuota(resp.Header, c.now())
		if err := s.Prime(); err != nil {
			return nil, err
		}
		return s, nil
	}
	defer cancel()
	defer resp.Body.Close()
	b, err := upstream.ReadAnswer(ctx, c.name, resp.Body, maxResponseBody, c.keys.Secrets()...)
	if err != nil {
		return nil, err
	}
	chunks, err := decodeResponse(b, errorf)
	if err != nil {
		return nil, upstream.WithProvider(err, c.name)
	}
	return upstream.Chunks(chunks, io.EOF).WithQuota(resp.Header, c.now()), nil
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
		if err := c.getJSON(ctx, path, &list); err != nil {
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

// canGenerate reports whether a model lists generateContent among its methods; a model that
// lists none is given the benefit of the doubt.
// canEmbed reports whether a listed model embeds (embedContent) rather than generates.
func canEmbed(methods []string) bool {
	for _, m := range methods {
		if m == "embedContent" || m == "batchEmbedContents" {
			return true
		}
	}
	return false
}

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
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBody)).Decode(v); err != nil {
		return &llm.Error{Kind: llm.KindUpstream, Provider: c.name, Message: "bad model list: " + err.Error(), Err: err}
	}
	return nil
}

// send makes one HTTP call; see upstream.Send. The caller calls the returned cancel once it
// has closed the body. With headerTimeout set the call is aborted when no headers arrived
// within c.headerTimeout.
func (c *Client) send(ctx context.Context, method, path string, body []byte, key string, headerTimeout bool) (*http.Response, context.CancelFunc, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body) // fresh per call, so the transport can replay it on a dead connection
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("gemini: building request: %w", err)
	}
	if body != nil {
		hreq.Header.Set("content-type", "application/json")
	}
	if key != "" {
		hreq.Header.Set("x-goog-api-key", key) // a header, not ?key=, so URLs in logs and errors hold no key
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
