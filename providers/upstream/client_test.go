package upstream_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// adapters are the adapters built on upstream.Client.
var adapters = map[string]func(upstream.Config) (llm.Backend, error){
	"anthropic": func(cfg upstream.Config) (llm.Backend, error) { return anthropic.New(cfg) },
	"gemini":    func(cfg upstream.Config) (llm.Backend, error) { return gemini.New(cfg) },
}

// chatStream is a streamed chat request.
var chatStream = &llm.Request{Model: "m", Stream: true, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}

// sseAnswer is a transport that answers 200 with an event stream whose body is body.
func sseAnswer(body func() io.Reader) *http.Client {
	return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(body()), Request: r}, nil
	})}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBrokenStreamScrubsKey: a broken read whose error quotes the call's key (a proxy on the
// way echoing the request's headers) shows it in neither the error's message for the client
// nor its detail for the log, whichever adapter on upstream.Client reads the stream and
// whether the read breaks before the answer (the error comes from Open) or within it (from
// Next).
func TestBrokenStreamScrubsKey(t *testing.T) {
	const key = "test-key-0123456789abcdef"
	start := map[string]string{ // events that start an answer
		"anthropic": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
		"gemini": "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]}}]}\n\n",
	}
	for name, open := range adapters {
		for _, within := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/before", true: "/within"}[within], func(t *testing.T) {
				sent := ""
				if within {
					sent = start[name]
				}
				hc := sseAnswer(func() io.Reader {
					return io.MultiReader(strings.NewReader(sent), iotest.ErrReader(errors.New("proxy: lost the backend of "+key)))
				})
				b, err := open(upstream.Config{Name: "p", BaseURL: "http://backend", Keys: []string{key}, HTTPClient: hc})
				if err != nil {
					t.Fatal(err)
				}
				s, err := b.Open(t.Context(), chatStream)
				if within {
					if err != nil {
						t.Fatalf("Open = %v; want the answer's start", err)
					}
					defer s.Close()
					for err == nil {
						_, err = s.Next()
					}
				}
				le, ok := errors.AsType[*llm.Error](err)
				if !ok || le.Provider != "p" || strings.Contains(le.Message, key) || strings.Contains(le.Detail, key) ||
					!strings.Contains(le.Detail, "[redacted]") {
					t.Fatalf("error %#v; want an llm.Error with the key redacted from its message and detail", err)
				}
			})
		}
	}
}

// TestCancelledStreamIsTheCallers: a read that fails because the caller's context ended is
// the context's error, not the backend's failure, for every adapter on upstream.Client.
func TestCancelledStreamIsTheCallers(t *testing.T) {
	for name, open := range adapters {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			hc := sseAnswer(func() io.Reader {
				cancel() // the client hangs up once the headers are in
				return iotest.ErrReader(errors.New("connection reset"))
			})
			b, err := open(upstream.Config{Name: "p", BaseURL: "http://backend", HTTPClient: hc})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Open(ctx, chatStream); !errors.Is(err, context.Canceled) {
				t.Fatalf("Open = %v; want context.Canceled", err)
			}
		})
	}
}
