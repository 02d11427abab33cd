package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestClient starts a backend running h and a Client pointed at it, both torn down when
// the test ends.
func newTestClient(t *testing.T, h http.HandlerFunc, edit func(*Config)) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	cfg := Config{Name: "claude", BaseURL: srv.URL, Keys: []string{"sk-test-key"}}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.http.CloseIdleConnections()
		srv.Close()
	})
	return c
}

// writeSSE writes a transcript from testdata/anthropic/stream, flushing after every event.
func writeSSE(t *testing.T, w http.ResponseWriter, name string) {
	raw, err := os.ReadFile(testdata + "/stream/" + name)
	if err != nil {
		t.Error(err)
		return
	}
	w.Header().Set("content-type", "text/event-stream")
	for _, ev := range strings.SplitAfter(string(raw), "\n\n") {
		_, _ = io.WriteString(w, ev)
		w.(http.Flusher).Flush()
	}
}

// collect reads s to its end and closes it.
func collect(t *testing.T, s llm.Stream) ([]llm.Chunk, error) {
	t.Helper()
	defer s.Close()
	var out []llm.Chunk
	for len(out) < 1000 {
		c, err := s.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, err
		}
		out = append(out, c)
	}
	return out, errors.New("stream does not end") // not t.Fatal: collect also runs off the test goroutine
}

func userRequest(stream bool) *llm.Request {
	return &llm.Request{Model: "claude-sonnet-4-6", Stream: stream,
		Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
}

func TestOpenStreaming(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			t.Errorf("got %s %s", r.Method, r.URL.Path)
		}
		for h, want := range map[string]string{"x-api-key": "sk-test-key", "anthropic-version": "2023-06-01",
			"content-type": "application/json"} {
			if got := r.Header.Get(h); got != want {
				t.Errorf("header %s = %q, want %q", h, got, want)
			}
		}
		var body messagesRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream || body.MaxTokens != 4096 {
			t.Errorf("body %+v, err %v", body, err)
		}
		writeSSE(t, w, "text.sse")
	}, nil)
	s, err := c.Open(t.Context(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, ch := range chunks {
		text += ch.Content
	}
	last := chunks[len(chunks)-1]
	if text != "Hello, 世界! 🌍" || !last.UsageOnly || last.Usage.TotalTokens != 29 {
		t.Errorf("text %q, last chunk %+v", text, last)
	}
}

func TestOpenNonStreaming(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if _, ok := body["stream"]; ok {
			t.Errorf("non-streaming call sent stream: %v", body["stream"])
		}
		http.ServeFile(w, r, testdata+"/message/thinking_tools.response.json")
	}, nil)
	s, err := c.Open(t.Context(), userRequest(false))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 2 || chunks[0].FinishReason != llm.FinishToolCalls || len(chunks[0].ToolCalls) != 2 ||
		chunks[0].ReasoningContent == "" || chunks[1].Usage.PromptTokens != 120 {
		t.Errorf("chunks %+v", chunks)
	}
}

func TestKeysRoundRobin(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("x-api-key"))
		mu.Unlock()
		http.ServeFile(w, r, testdata+"/message/text.response.json")
	}, func(cfg *Config) {
		cfg.Keys = []string{"key-a", "key-b"}
		cfg.ModelKeys = map[string][]string{"special": {"key-c"}}
	})
	for _, model := range []string{"m", "m", "special", "m"} {
		req := userRequest(false)
		req.Model = model
		s, err := c.Open(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if got := strings.Join(seen, ","); got != "key-a,key-b,key-c,key-a" {
		t.Errorf("keys used: %s", got)
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		kind       llm.Kind
		retryAfter time.Duration
		message    string
	}{
		{"rate limited", 429, map[string]string{"retry-after": "7"},
			`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			llm.KindUpstreamRateLimited, 7 * time.Second, "slow down"},
		{"spend limit", 429, map[string]string{"retry-after": "7"},
			`{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your spend limit."}}`,
			llm.KindUpstreamQuota, 0, "You have reached your spend limit."},
		{"overloaded", 529, nil,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			llm.KindProviderUnavailable, 0, "Overloaded"},
		{"billing", 402, nil, `{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}`,
			llm.KindUpstreamQuota, 0, "credit balance too low"},
		{"auth", 401, nil, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-test-key"}}`,
			llm.KindUpstreamAuth, 0, "invalid x-api-key [redacted]"},
		{"permission", 403, nil, `{"type":"error","error":{"type":"permission_error","message":"no access"}}`,
			llm.KindUpstreamAuth, 0, "no access"},
		{"invalid", 400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}`,
			llm.KindUpstreamInvalid, 0, "max_tokens: too big"},
		{"html from a proxy", 502, nil, "<html>\n<body>Bad Gateway</body></html>",
			llm.KindUpstream, 0, "HTTP 502: <html> <body>Bad Gateway</body></html>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}, nil)
			s, err := c.Open(t.Context(), userRequest(true))
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			e, ok := errors.AsType[*llm.Error](err)
			if !ok {
				t.Fatalf("error %T %v is not an *llm.Error", err, err)
			}
			if e.Kind != tt.kind || e.RetryAfter != tt.retryAfter || e.Message != tt.message ||
				e.Provider != "claude" || e.UpstreamStatus != tt.status {
				t.Errorf("got %+v", e)
			}
		})
	}
}

// TestErrorBeforeContent: an error event before any content, even after message_start's role
// chunk, comes back from Open, so the gateway can answer 503 and the client's SDK retries.
func TestErrorBeforeContent(t *testing.T) {
	const (
		overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
		rateLimit  = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n"
		ping       = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
		emptyText  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	)
	tests := []struct {
		name   string
		events string
		kind   llm.Kind
	}{
		{"overloaded right after message_start", sseMessageStart + overloaded, llm.KindProviderUnavailable},
		{"overloaded after a ping", sseMessageStart + ping + overloaded, llm.KindProviderUnavailable},
		{"overloaded in an empty text block", sseMessageStart + emptyText + overloaded, llm.KindProviderUnavailable},
		{"rate limited right after message_start", sseMessageStart + rateLimit, llm.KindUpstreamRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				drain(r)
				w.Header().Set("content-type", "text/event-stream")
				_, _ = io.WriteString(w, tt.events)
			}, nil)
			s, err := c.Open(t.Context(), userRequest(true))
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if e, ok := errors.AsType[*llm.Error](err); !ok || e.Kind != tt.kind || e.Provider != "claude" {
				t.Errorf("Open error %#v, want kind %v", err, tt.kind)
			}
		})
	}
}

func TestInStreamErrorAfter200(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(t, w, "error_overloaded.sse")
	}, nil)
	s, err := c.Open(t.Context(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	if len(chunks) != 2 || llm.KindOf(err) != llm.KindProviderUnavailable {
		t.Errorf("chunks %+v, err %v", chunks, err)
	}
}

// Event stream openings for blockingBackend: message_start yields only a role chunk, so
// Open is still reading after it; a text delta is the first content, after which Open returns.
const (
	sseMessageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n"
	sseFirstText    = sseMessageStart +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
)

// blockingBackend answers with the events of opening, reports on sent that they are flushed,
// and then holds the stream open until the request's context ends, which it reports on done.
func blockingBackend(opening string, sent, done chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		drain(r)
		w.Header().Set("content-type", "text/event-stream")
		_, _ = io.WriteString(w, opening)
		w.(http.Flusher).Flush()
		if sent != nil {
			close(sent)
		}
		<-r.Context().Done()
		close(done)
	}
}

// drain reads the request body, as a real backend does before answering. Go's server only
// notices a client hanging up (and cancels r.Context()) once the body has been read.
func drain(r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }

// waitDone fails the test unless done is closed within d. On failure it waits a while longer
// to report how late the backend was, which tells a slow path from a missing one.
func waitDone(t *testing.T, done <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	}
	timer.Reset(5 * time.Second)
	select {
	case <-done:
		t.Fatalf("%s: backend saw the request end after %s, want within %s", what, time.Since(start), d)
	case <-timer.C:
		t.Fatalf("%s: backend did not see the request end within %s", what, time.Since(start))
	}
}

// TestCancelStopsBackend: cancelling the call's context stops the backend within 100 ms,
// whether Open is still waiting for the first content (after message_start) or has returned
// and Next is waiting.
func TestCancelStopsBackend(t *testing.T) {
	tests := []struct {
		name    string
		opening string
		opened  bool // Open returns before the cancel
	}{
		{name: "Open waiting after message_start", opening: sseMessageStart},
		{name: "Next waiting after content", opening: sseFirstText, opened: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent, done := make(chan struct{}), make(chan struct{})
			c := newTestClient(t, blockingBackend(tt.opening, sent, done), nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			type result struct {
				s   llm.Stream
				err error
			}
			opened := make(chan result, 1)
			go func() { // exits when Open returns, which the content or the cancel below forces
				s, err := c.Open(ctx, userRequest(true))
				opened <- result{s, err}
			}()
			<-sent
			next := make(chan error, 1)
			if tt.opened {
				r := <-opened
				if r.err != nil {
					t.Fatal(r.err)
				}
				defer r.s.Close()
				for _, want := range []string{"", "Hi"} { // the role chunk, then the text
					if ch, err := r.s.Next(); err != nil || ch.Content != want {
						t.Fatalf("chunk %+v, %v; want content %q", ch, err, want)
					}
				}
				go func() { // exits when Next returns, which the cancel below forces
					_, err := r.s.Next()
					next <- err
				}()
			}
			cancel()
			waitDone(t, done, 100*time.Millisecond, "cancel")
			if !tt.opened {
				r := <-opened
				if r.err == nil {
					r.s.Close()
				}
				if !errors.Is(r.err, context.Canceled) {
					t.Errorf("Open after cancel: %v, want context.Canceled", r.err)
				}
				return
			}
			if err := <-next; !errors.Is(err, context.Canceled) {
				t.Errorf("Next after cancel: %v, want context.Canceled", err)
			}
		})
	}
}

func TestCloseStopsBackend(t *testing.T) {
	done := make(chan struct{})
	c := newTestClient(t, blockingBackend(sseFirstText, nil, done), nil)
	s, err := c.Open(t.Context(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, 100*time.Millisecond, "Close")
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestHeaderTimeout(t *testing.T) {
	done := make(chan struct{})
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		drain(r)
		<-r.Context().Done() // never sends headers
		close(done)
	}, func(cfg *Config) { cfg.HeaderTimeout = 20 * time.Millisecond })
	// On a loaded machine the timeout may pass before the request is out whole, and then no
	// handler runs that could see it end: the check needs the request written.
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	})
	_, err := c.Open(ctx, userRequest(true))
	if e, ok := errors.AsType[*llm.Error](err); !ok || e.Kind != llm.KindUpstream || !strings.Contains(e.Message, "no response headers") {
		t.Fatalf("got %v", err)
	}
	if !wrote.Load() {
		t.Log("the header timeout passed before the request was written whole: nothing reached the backend to stop")
		return
	}
	waitDone(t, done, time.Second, "header timeout")
}

func TestCancelBeforeHeaders(t *testing.T) {
	done := make(chan struct{})
	arrived := make(chan struct{})
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		drain(r)
		close(arrived)
		<-r.Context().Done()
		close(done)
	}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { // exits once the request reached the backend
		<-arrived
		cancel()
	}()
	_, err := c.Open(ctx, userRequest(false))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	waitDone(t, done, 100*time.Millisecond, "cancel before headers")
}

func TestListModels(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("x-api-key") != "sk-test-key" {
			t.Errorf("got %s with key %q", r.URL.Path, r.Header.Get("x-api-key"))
		}
		switch r.URL.Query().Get("after_id") {
		case "":
			_, _ = io.WriteString(w, `{"data":[{"id":"claude-opus-4-6","max_input_tokens":200000,"max_tokens":64000}],"has_more":true,"last_id":"claude-opus-4-6"}`)
		case "claude-opus-4-6":
			_, _ = io.WriteString(w, `{"data":[{"id":"claude-haiku-4-5","type":"model"}],"has_more":false,"last_id":"claude-haiku-4-5"}`)
		default:
			t.Errorf("unexpected after_id %q", r.URL.Query().Get("after_id"))
		}
	}, nil)
	models, err := c.ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ModelInfo{{ID: "claude-opus-4-6", ContextWindow: 200000, MaxOutputTokens: 64000}, {ID: "claude-haiku-4-5"}}
	if len(models) != 2 || models[0] != want[0] || models[1] != want[1] {
		t.Errorf("got %+v", models)
	}
}

func TestInvalidRequest(t *testing.T) {
	tests := []struct {
		name  string
		req   string
		param string
	}{
		{"bad role", `{"messages":[{"role":"robot","content":"x"}]}`, "messages[0].role"},
		{"bad image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"bad arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"tool without id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"bad effort", `{"reasoning_effort":"extreme","messages":[]}`, "reasoning_effort"},
		{"bad tool_choice", `{"tool_choice":"sometimes","messages":[]}`, "tool_choice"},
	}
	c, err := New(Config{Name: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req llm.Request
			if err := json.Unmarshal([]byte(tt.req), &req); err != nil {
				t.Fatal(err)
			}
			_, err := c.Open(t.Context(), &req)
			e, ok := errors.AsType[*llm.Error](err)
			if !ok || e.Kind != llm.KindInvalidRequest || e.Param != tt.param || e.Provider != "claude" {
				t.Errorf("got %#v", err)
			}
		})
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	if _, err := New(Config{Name: "x", BaseURL: "api.anthropic.com"}); err == nil {
		t.Error("New accepted a base URL without scheme")
	}
}

// An error event before any content, right after the 200 headers, comes back from Open so the
// gateway can still retry the call or answer its client with a proper status.
func TestErrorBeforeFirstChunkFailsOpen(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
		writeSSE(t, w, "error_rate_limit.sse")
	}, nil)
	s, err := c.Open(t.Context(), userRequest(true))
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded")
	}
	if e, ok := errors.AsType[*llm.Error](err); !ok || e.Kind != llm.KindUpstreamRateLimited || e.Provider != "claude" {
		t.Errorf("got %v", err)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}, nil)
	_, err := c.Open(t.Context(), userRequest(true))
	if e, ok := errors.AsType[*llm.Error](err); !ok || e.UpstreamStatus != http.StatusTemporaryRedirect {
		t.Errorf("got %v", err)
	}
	if len(paths) != 1 {
		t.Errorf("backend saw %v, want only the first request", paths)
	}
}

// Many calls at once share the client's pool and keys without races (run with -race).
func TestConcurrentCalls(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		drain(r)
		writeSSE(t, w, "text.sse")
	}, func(cfg *Config) { cfg.Keys = []string{"key-a", "key-b", "key-c"} })
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() { // exits when its call has been read to the end
			s, err := c.Open(t.Context(), userRequest(true))
			if err == nil {
				_, err = collect(t, s)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestBaseURLWithV1(t *testing.T) {
	c, err := New(Config{Name: "x", BaseURL: "http://127.0.0.1:9/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.http.Base() != "http://127.0.0.1:9" {
		t.Errorf("base %q, want the root without /v1", c.http.Base())
	}
}

// TestRefusedKeyOrModel: a 401 authentication_error names the key; a 403 permission_error
// only what was asked, unless its message says the key is disabled (docs/capacity-signals.md).
func TestRefusedKeyOrModel(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		keyInvalid bool
	}{
		{"invalid key", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, true},
		{"permission", 403, `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`, false},
		{"disabled key", 403, `{"type":"error","error":{"type":"permission_error","message":"This API key has been disabled."}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}, nil)
			_, err := c.Open(t.Context(), userRequest(true))
			e, ok := errors.AsType[*llm.Error](err)
			if !ok || e.Kind != llm.KindUpstreamAuth || e.KeyInvalid != tt.keyInvalid {
				t.Fatalf("error %+v; want upstream_auth_failed, KeyInvalid %v", err, tt.keyInvalid)
			}
		})
	}
}
