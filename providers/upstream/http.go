package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/tollgate/tollgate/providers/llm"
)

// DefaultIdlePerHost is the idle pool per backend host of a transport whose caller does not
// say how many calls it runs at once.
const DefaultIdlePerHost = 256

// StreamWindow is the HTTP/2 flow-control window of one response: what the gateway reads of a
// backend's answer ahead of its client. A stream whose client stops reading stops at it,
// holding at most this much, while the connection's other streams go on (the connection's
// own window is the runtime's default, 1 GiB, far above any number of stalled streams). LLM
// answers arrive at tens of kilobytes per second, so the window never limits their speed.
const StreamWindow = 512 << 10

// NewTransport returns a pooled keep-alive transport for LLM backends.
//
// connect bounds dialing and the TLS handshake (zero or negative: none). idle is how many
// idle connections it keeps per backend host: give it the lanes of the provider it serves,
// so that when a call ends its connection always has a place in the pool and no call dials
// at steady load (zero or negative: DefaultIdlePerHost). A pool smaller than the calls in
// flight closes the connections that do not fit, and the next calls dial new ones, leaving
// the old ones in TIME_WAIT until the ephemeral ports run out.
//
// A TLS backend that offers HTTP/2 (ALPN "h2") gets it: one connection carries many calls,
// each with its own flow-control window (StreamWindow), so a client that stops reading one
// stream stalls no other; a connection with nothing to read for 30 s is pinged and closed if
// the ping goes unanswered, since a dead one would fail every call on it. Plain http://
// backends (local servers) stay on HTTP/1.1, one connection per running call.
//
// There is deliberately no whole-call timeout and no response-header timeout: a stream may
// run for many minutes and is bounded by its context, and a non-streaming answer only sends
// its headers once it is complete, so the wait for headers is bounded per call, by Send, for
// streams only. Compression is off so a gzip layer never holds back stream events.
func NewTransport(connect time.Duration, idle int) *http.Transport {
	if idle <= 0 {
		idle = DefaultIdlePerHost
	}
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true, // a custom DialContext alone would turn HTTP/2 off
		MaxIdleConnsPerHost:   idle,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream: StreamWindow,
			SendPingTimeout:           30 * time.Second,
		},
	}
	if connect > 0 {
		d.Timeout = connect
		t.TLSHandshakeTimeout = connect
	}
	return t
}

// NewHTTPClient returns a client over NewTransport(connect, idle) that never follows
// redirects. A redirect then fails the call as an answer that is not 2xx. Following it would
// send the API key to wherever the redirect points: Go strips Authorization on a cross-host
// redirect, but not a provider's own key header (x-api-key, x-goog-api-key). Each adapter
// makes its own, so that its pool is sized to its own provider's lanes.
func NewHTTPClient(connect time.Duration, idle int) *http.Client {
	return &http.Client{Transport: NewTransport(connect, idle), CheckRedirect: noRedirects}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Timeout returns def for zero, 0 (none) for negative values and d otherwise: the reading of
// the adapters' timeout settings.
func Timeout(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// ErrHeaderTimeout is the cause of a call Send aborted for want of response headers.
var ErrHeaderTimeout = errors.New("timed out: no response headers")

// Send makes one HTTP call on a context of its own, derived from ctx, that the returned cancel
// ends; the caller calls it once it has closed the body (it also ends a body still open).
// With headerTimeout > 0 the call is aborted when no headers arrived within it; the error
// then wraps ErrHeaderTimeout. A cancelled ctx comes back as ctx's error, so the caller can
// tell its own client's disconnect from a backend failure; other errors are the client's.
// req's body should be replayable (GetBody set, as http.NewRequest does for a bytes.Reader)
// so the transport can retry it on a dead keep-alive connection. The trace context on ctx,
// if any, goes with the request as a traceparent header (the process's OpenTelemetry
// propagator, which does nothing unless tracing is on).
func Send(ctx context.Context, client *http.Client, req *http.Request, headerTimeout time.Duration) (*http.Response, context.CancelFunc, error) {
	callCtx, cancel := context.WithCancelCause(ctx)
	req = req.WithContext(callCtx)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	var timer *time.Timer
	if headerTimeout > 0 {
		timer = time.AfterFunc(headerTimeout, func() { cancel(ErrHeaderTimeout) })
	}
	resp, err := client.Do(req)
	if timer != nil && !timer.Stop() && err == nil {
		// The timer fired as the headers arrived: the call's context is cancelled, so the
		// body is useless.
		resp.Body.Close()
		err = ErrHeaderTimeout
	}
	if err != nil {
		cancel(nil)
		switch {
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case errors.Is(context.Cause(callCtx), ErrHeaderTimeout) || errors.Is(err, ErrHeaderTimeout):
			return nil, nil, fmt.Errorf("%w within %s", ErrHeaderTimeout, headerTimeout)
		}
		return nil, nil, err
	}
	return resp, func() { cancel(nil) }, nil
}

// TransportError explains a failed HTTP exchange (no answer, or a body that broke off) as an
// upstream *llm.Error naming provider, with the keys scrubbed from its text. Its Message,
// which the client reads, leaves out the backend's URL and addresses (clientText); its
// Detail, for the log, keeps them. The caller's cancellation is returned as its context
// error: a client that went away is not the backend's fault and must not count against it.
func TransportError(ctx context.Context, provider, what string, err error, secrets ...string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	prefix := what + ": "
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() && !errors.Is(err, ErrHeaderTimeout) {
		prefix += "timed out waiting for the backend: "
	}
	return &llm.Error{Kind: llm.KindUpstream, Provider: provider, Message: Redact(prefix+clientText(err), secrets...),
		Detail: Redact(prefix+err.Error(), secrets...), Err: err}
}
