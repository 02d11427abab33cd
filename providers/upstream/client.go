package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// DefaultMaxAnswer caps a whole non-streaming answer a Client reads (tool inputs included)
// and a model list.
const DefaultMaxAnswer = 32 << 20

// defaultConnect bounds dialing and the TLS handshake when Config.ConnectTimeout is zero.
const defaultConnect = 10 * time.Second

// Config configures an adapter built on Client (anthropic.Config, gemini.Config and
// openai.Config are this type). What BaseURL may be and which header carries a key is each
// adapter's to say.
type Config struct {
	// Name is the provider's name, put on every error.
	Name string
	// BaseURL is the API root; the adapter's New reads and checks it.
	BaseURL string
	// Keys are API keys used in turn, one per call. Empty: no key header is sent (a local
	// proxy that adds its own).
	Keys []string
	// ModelKeys overrides Keys for the backend model names it lists.
	ModelKeys map[string][]string
	// HTTPClient is used as is when set, and ConnectTimeout is then its owner's business.
	// Nil: a pooled keep-alive client owned by the adapter (NewHTTPClient), without a
	// whole-call timeout (the context given to Open bounds a call).
	HTTPClient *http.Client
	// Lanes is how many calls the provider runs at once; the adapter's own client keeps that
	// many idle connections to the backend, so no call dials at steady load. 0 →
	// DefaultIdlePerHost. Unused with HTTPClient.
	Lanes int
	// ConnectTimeout bounds dialing and the TLS handshake. Zero: 10s. Negative: none.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for response headers of a streaming call (and of a model
	// list). Zero: the adapter's default (Wire.HeaderTimeout). Negative: none. Non-streaming
	// calls are not bounded by it: their headers only come when the whole answer is ready.
	HeaderTimeout time.Duration
	// MaxEventBytes caps one SSE event of a streamed answer (limits.max_event_bytes); a
	// larger one ends the answer as an upstream error. Zero: sse.DefaultMaxEvent (8 MiB).
	MaxEventBytes int
}

// Wire is what an adapter built on Client knows of its vendor's API and the skeleton does
// not: where it is, its own headers, and how it words a refusal.
type Wire struct {
	// Base is the API root that every Call's Path is appended to, already checked.
	Base string
	// HeaderTimeout is the wait for a stream's headers when Config.HeaderTimeout is zero.
	HeaderTimeout time.Duration
	// Header sets the vendor's own headers on every request: its API version, and key in
	// the vendor's key header unless key is "".
	Header func(h http.Header, key string)
	// StatusError maps a non-2xx answer onto the error it means, from its status, headers
	// and the start of its body (DefaultErrorBody at most). key is the call's: anything the
	// backend echoes must have it redacted.
	StatusError func(status int, h http.Header, body []byte, key string) *llm.Error
}

// Client is the HTTP skeleton of the adapters (Anthropic, Gemini, and the OpenAI-compatible
// ones): the part of a call that does not depend on the vendor. It builds each
// request with a body the transport can replay, sends it with the caller's context and a
// bounded wait for a stream's headers, turns a transport failure into an upstream error and
// a non-2xx answer into the vendor's error (its body read capped), reads a whole answer
// without taking a cut-off one for complete, streams server-sent events through the
// vendor's Decoder, and scrubs the keys from what may reach a client. A cancelled context
// aborts the exchange and comes back as the context's error, and closing a stream closes its
// body and ends the call's context: a client's hang-up stops the backend's work. It is safe
// for concurrent use.
type Client struct {
	provider      string
	keys          *KeyRing
	http          *http.Client
	headerTimeout time.Duration
	maxEvent      int // SSE event size limit; 0: the reader's default
	wire          Wire
	now           func() time.Time // clock for Retry-After dates and quota resets
}

// NewClient returns the Client of an adapter configured by cfg for the API w describes.
func NewClient(cfg Config, w Wire) *Client {
	c := &Client{provider: cfg.Name, keys: NewKeyRing(cfg.Keys, cfg.ModelKeys), http: cfg.HTTPClient,
		headerTimeout: Timeout(cfg.HeaderTimeout, w.HeaderTimeout), maxEvent: cfg.MaxEventBytes, wire: w, now: time.Now}
	if c.http == nil {
		c.http = NewHTTPClient(Timeout(cfg.ConnectTimeout, defaultConnect), cfg.Lanes)
	}
	return c
}

// Base is the API root request paths are appended to.
func (c *Client) Base() string { return c.wire.Base }

// Keys is the provider's key ring.
func (c *Client) Keys() *KeyRing { return c.keys }

// Now is the Client's clock.
func (c *Client) Now() time.Time { return c.now() }

// HTTP is the HTTP client calls go through: Config.HTTPClient, or the adapter's own.
func (c *Client) HTTP() *http.Client { return c.http }

// HeaderTimeout is the wait for a stream's headers; 0: none.
func (c *Client) HeaderTimeout() time.Duration { return c.headerTimeout }

// CloseIdleConnections closes the HTTP client's idle connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Call is one request to the vendor's API.
type Call struct {
	Path   string            // under the API root, with its query if any
	URL    string            // the whole address, in place of root and Path: an endpoint beside the API
	Op     string            // what the call does, in a failed exchange's message; "": "calling backend"
	Body   []byte            // the JSON request body
	Key    string            // the API key; "" sends none
	Stream bool              // the answer streams: the wait for its headers is bounded
	Header map[string]string // headers that replace the adapter's own of the same name
}

// Open posts call and returns its answer: a streamed one read by dec (and primed, so that an
// error right after the headers comes back from Open), or a whole one decoded by whole.
// Either keeps what the answer's headers said of the backend's buckets (llm.QuotaReporter).
// Errors before the first chunk come back here, as *llm.Error or the context's error.
func (c *Client) Open(ctx context.Context, call Call, dec Decoder, whole func([]byte) ([]llm.Chunk, error)) (llm.Stream, error) {
	resp, cancel, err := c.Post(ctx, call)
	if err != nil {
		return nil, err
	}
	if call.Stream {
		s := NewEventStream(ctx, c.provider, resp.Body, cancel, dec, c.maxEvent, call.Key).WithQuota(resp.Header, c.now())
		if err := s.Prime(); err != nil {
			return nil, err
		}
		return s, nil
	}
	b, err := c.Whole(ctx, resp, cancel, DefaultMaxAnswer)
	if err != nil {
		return nil, err
	}
	chunks, err := whole(b)
	if err != nil {
		return nil, WithProvider(err, c.provider)
	}
	return Chunks(chunks, io.EOF).WithQuota(resp.Header, c.now()), nil
}

// Post sends call and returns its 2xx answer. The caller closes the body and then calls the
// returned cancel. A non-2xx answer is the vendor's error (Wire.StatusError); a failed
// exchange is an upstream *llm.Error, or the context's error when ctx ended.
func (c *Client) Post(ctx context.Context, call Call) (*http.Response, context.CancelFunc, error) {
	return c.do(ctx, http.MethodPost, call)
}

// Get is Post with a GET.
func (c *Client) Get(ctx context.Context, call Call) (*http.Response, context.CancelFunc, error) {
	return c.do(ctx, http.MethodGet, call)
}

// GetJSON GETs path with the key for listing and decodes a 2xx JSON answer into v.
func (c *Client) GetJSON(ctx context.Context, path string, v any) error {
	resp, cancel, err := c.do(ctx, http.MethodGet, Call{Path: path, Key: c.keys.ForListing(), Stream: true})
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, DefaultMaxAnswer)).Decode(v); err != nil {
		return &llm.Error{Kind: llm.KindUpstream, Provider: c.provider, Message: "bad model list: " + err.Error(), Err: err}
	}
	return nil
}

// Whole reads the whole answer resp carries, of at most max bytes (see ReadAnswer), then
// closes its body and calls cancel.
func (c *Client) Whole(ctx context.Context, resp *http.Response, cancel context.CancelFunc, max int64) ([]byte, error) {
	defer cancel()
	defer resp.Body.Close()
	return ReadAnswer(ctx, c.provider, resp.Body, max, c.keys.Secrets()...)
}

// do makes one call with method. A body is given a fresh reader per call, so the transport
// can replay it on a dead keep-alive connection.
func (c *Client) do(ctx context.Context, method string, call Call) (*http.Response, context.CancelFunc, error) {
	var body io.Reader
	if call.Body != nil {
		body = bytes.NewReader(call.Body)
	}
	target := call.URL
	if target == "" {
		target = c.wire.Base + call.Path
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, nil, fmt.Errorf("provider %q: building request: %w", c.provider, err)
	}
	c.wire.Header(req.Header, call.Key)
	if call.Body != nil {
		req.Header.Set("content-type", "application/json")
	}
	for k, v := range call.Header {
		req.Header.Set(k, v)
	}
	var wait time.Duration
	if call.Stream {
		wait = c.headerTimeout
	}
	resp, cancel, err := Send(ctx, c.http, req, wait)
	if err != nil {
		op := call.Op
		if op == "" {
			op = "calling backend"
		}
		return nil, nil, TransportError(ctx, c.provider, op, err, c.keys.Secrets()...)
	}
	if resp.StatusCode/100 != 2 {
		b := ReadBody(resp.Body, DefaultErrorBody)
		resp.Body.Close()
		cancel()
		return nil, nil, c.wire.StatusError(resp.StatusCode, resp.Header, b, call.Key)
	}
	return resp, cancel, nil
}
