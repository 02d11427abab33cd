// Package openai is the adapter for every backend that speaks OpenAI's Chat Completions wire
// format: OpenAI itself, DeepSeek, Qwen (DashScope compatible mode), Doubao (Volcengine Ark),
// ERNIE (Qianfan v2), NVIDIA NIM, LM Studio and Ollama. It relays the backend's chunks byte for
// byte and turns each backend's way of failing — HTTP statuses, errors inside 200 bodies and
// inside streams — into one *llm.Error vocabulary. A request that came in as OpenAI's
// Responses API goes to the openai kind's /responses as sent, with only "model" replaced,
// and its events come back as sent (responses.go).
package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// The backend kinds this package serves (SPEC §8).
const (
	KindOpenAI   = "openai"
	KindDeepSeek = "deepseek"
	KindQwen     = "qwen"
	KindDoubao   = "doubao"
	KindErnie    = "ernie"
	KindNvidia   = "nvidia"
	KindLMStudio = "lmstudio"
	KindOllama   = "ollama"
)

var defaultBaseURLs = map[string]string{
	KindOpenAI:   "https://api.openai.com/v1",
	KindDeepSeek: "https://api.deepseek.com/v1",
	KindQwen:     "https://dashscope.aliyuncs.com/compatible-mode/v1",
	KindDoubao:   "https://ark.cn-beijing.volces.com/api/v3",
	KindErnie:    "https://qianfan.baidubce.com/v2",
	KindNvidia:   "https://integrate.api.nvidia.com/v1",
	KindLMStudio: "http://127.0.0.1:1234/v1",
	KindOllama:   "http://127.0.0.1:11434/v1",
}

// DefaultBaseURL returns the base URL of a kind's public endpoint, or "" for an unknown kind.
func DefaultBaseURL(kind string) string { return defaultBaseURLs[kind] }

// Supports reports whether kind is served by this package.
func Supports(kind string) bool { _, ok := defaultBaseURLs[kind]; return ok }

// Config configures a Client: what every HTTP adapter is given (upstream.Config). A zero Name
// is the kind. BaseURL is the URL that /chat/completions and /models are appended to; "" → the
// kind's DefaultBaseURL. Keys go in Authorization as bearer tokens; a nil or "" entry sends
// none (local servers); ModelKeys serves NVIDIA's key per model. A zero HeaderTimeout is 60s,
// or 5m for lmstudio and ollama, which load a model on first use before answering.
type Config = upstream.Config

// Client calls one OpenAI-compatible provider. The HTTP exchange is upstream.Client's; this
// package keeps what is the OpenAI wire format's own: the URLs and headers, the request body,
// the stream's frames and whole answers, and the error bodies. It is safe for concurrent use.
type Client struct {
	kind, name string
	up         *upstream.Client
	secrets    []string // every key, for Redact
	maxEvent   int      // SSE event size limit; 0: the reader's default
	now        func() time.Time
}

var (
	_ llm.Backend      = (*Client)(nil)
	_ llm.KeyedBackend = (*Client)(nil)
	_ llm.ModelLister  = (*Client)(nil)
)

// New validates cfg and returns a Client for a backend of kind (one of the Kind* constants).
// An unknown kind or a malformed base URL is an error that names the provider and the
// offending value.
func New(kind string, cfg Config) (*Client, error) {
	if !Supports(kind) {
		return nil, fmt.Errorf("openai provider %q: unknown kind %q", cfg.Name, kind)
	}
	if cfg.Name == "" {
		cfg.Name = kind
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL(kind)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provider %q: base_url %q: want an absolute http(s) URL", cfg.Name, base)
	}
	header := 60 * time.Second
	if kind == KindLMStudio || kind == KindOllama {
		header = 5 * time.Minute
	}
	c := &Client{kind: kind, name: cfg.Name, maxEvent: cfg.MaxEventBytes, now: time.Now}
	c.up = upstream.NewClient(cfg, upstream.Wire{Base: strings.TrimRight(base, "/"), HeaderTimeout: header,
		Header: setHeader, StatusError: c.statusError})
	c.secrets = c.up.Keys().Secrets()
	return c, nil
}

// setHeader sets the key, if any, as a bearer token.
func setHeader(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// Keys is how many keys a call to the backend model rotates over (llm.KeyedBackend).
func (c *Client) Keys(model string) int { return c.up.Keys().Count(model) }

// beside is the URL of path on the backend's host root, beside its /v1 (Ollama's and LM
// Studio's own APIs, DeepSeek's beta).
func (c *Client) beside(path string) string { return strings.TrimSuffix(c.up.Base(), "/v1") + path }

// The Accept headers of a call: a stream's, and a JSON answer's.
var (
	acceptSSE  = map[string]string{"Accept": "text/event-stream"}
	acceptJSON = map[string]string{"Accept": "application/json"}
)

// post sends call, with its Accept header, and returns a 2xx answer; any other status is an
// *llm.Error (statusError). The caller calls cancel once it has closed the body.
func (c *Client) post(ctx context.Context, call upstream.Call) (*http.Response, context.CancelFunc, error) {
	call.Op, call.Header = "call backend", acceptJSON
	if call.Stream {
		call.Header = acceptSSE
	}
	return c.up.Post(ctx, call)
}
