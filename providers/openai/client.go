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

// Config describes one OpenAI-compatible provider.
type Config struct {
	Kind string // one of the Kind* constants; required
	Name string // provider name, used in errors; "" → Kind
	// BaseURL is the URL that /chat/completions and /models are appended to; "" → the kind's
	// DefaultBaseURL.
	BaseURL string
	// Keys are used round-robin, one per call. Nil or "" entries mean no Authorization header
	// (local servers).
	Keys []string
	// ModelKeys, when it has an entry for the backend model of a call, replaces Keys for it
	// (NVIDIA issues a key per model).
	ModelKeys map[string][]string
	// HTTPClient is used for every call; nil → upstream.NewHTTPClient(ConnectTimeout, Lanes),
	// a pooled client of the adapter's own that never follows redirects. Its Timeout should stay zero: streams run
	// for minutes.
	HTTPClient *http.Client
	// Lanes is how many calls the provider runs at once; the adapter's own client keeps that
	// many idle connections to the backend, so no call dials at steady load. 0 →
	// upstream.DefaultIdlePerHost. Unused with HTTPClient.
	Lanes int
	// ConnectTimeout bounds dialing and the TLS handshake; 0 → 10s; negative → none.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for response headers of a streaming call; 0 → 60s, or 5m
	// for lmstudio and ollama, which load a model on first use before answering; negative →
	// none. It is applied per call (upstream.Send), so it holds with a given HTTPClient too.
	// Non-streaming calls are not bounded by it: their headers only come with the whole
	// answer, which a reasoning model may take minutes to write.
	HeaderTimeout time.Duration
	// MaxEventBytes caps one SSE event of a streamed answer (limits.max_event_bytes); a
	// larger one ends the answer as an upstream error. 0 → sse.DefaultMaxEvent (8 MiB).
	MaxEventBytes int
}

// Client calls one OpenAI-compatible provider. It is safe for concurrent use.
type Client struct {
	kind, name    string
	base          string // without trailing slash
	http          *http.Client
	headerTimeout time.Duration // for streaming calls; 0: none
	keys          *upstream.KeyRing
	secrets       []string // every key, for Redact
	maxEvent      int      // SSE event size limit; 0: the reader's default
	now           func() time.Time
}

var (
	_ llm.Backend      = (*Client)(nil)
	_ llm.KeyedBackend = (*Client)(nil)
	_ llm.ModelLister  = (*Client)(nil)
)

// New validates cfg and returns a Client. An unknown kind or a malformed base URL is an error
// that names the provider and the offending value.
func New(cfg Config) (*Client, error) {
	if !Supports(cfg.Kind) {
		return nil, fmt.Errorf("openai provider %q: unknown kind %q", cfg.Name, cfg.Kind)
	}
	name := cfg.Name
	if name == "" {
		name = cfg.Kind
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL(cfg.Kind)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provider %q: base_url %q: want an absolute http(s) URL", name, base)
	}
	header := 60 * time.Second
	if cfg.Kind == KindLMStudio || cfg.Kind == KindOllama {
		header = 5 * time.Minute
	}
	keys := upstream.NewKeyRing(cfg.Keys, cfg.ModelKeys)
	c := &Client{
		kind: cfg.Kind, name: name, base: strings.TrimRight(base, "/"),
		http: cfg.HTTPClient, headerTimeout: upstream.Timeout(cfg.HeaderTimeout, header),
		keys: keys, secrets: keys.Secrets(), maxEvent: cfg.MaxEventBytes, now: time.Now,
	}
	if c.http == nil {
		c.http = upstream.NewHTTPClient(upstream.Timeout(cfg.ConnectTimeout, 10*time.Second), cfg.Lanes)
	}
	return c, nil
}

// Keys is how many keys a call to the backend model rotates over (llm.KeyedBackend).
func (c *Client) Keys(model string) int { return c.keys.Count(model) }

// newRequest builds a request to path (under the base URL, or an absolute URL) with the auth
// and content headers every call carries; key "" sends no Authorization header.
func (c *Client) newRequest(ctx context.Context, method, path, key string, body []byte) (*http.Request, error) {
	target := path
	if !strings.Contains(path, "://") {
		target = c.base + path
	}
	var req *http.Request
	var err error
	if body != nil {
		// A fresh in-memory reader per attempt: NewRequest sets GetBody and ContentLength
		// from it, so the transport can replay the body on a dead keep-alive connection.
		req, err = http.NewRequestWithContext(ctx, method, target, bytesReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, method, target, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", c.name, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req, nil
}

// send makes the call hr (built by newRequest) through upstream.Send, bounding the wait for
// headers when stream is set. The caller calls the returned cancel once it has closed the
// body. A failure is the caller's context error or an upstream *llm.Error.
func (c *Client) send(ctx context.Context, op string, hr *http.Request, stream bool) (*http.Response, context.CancelFunc, error) {
	var wait time.Duration
	if stream {
		wait = c.headerTimeout
	}
	resp, cancel, err := upstream.Send(ctx, c.http, hr, wait)
	if err != nil {
		return nil, nil, upstream.TransportError(ctx, c.name, op, err, c.secrets...)
	}
	return resp, cancel, nil
}
