package gemini

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
	cfg := Config{Name: "gemini", BaseURL: srv.URL + "/v1beta", Keys: []string{"test-key-1"}}
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

// writeSSE writes a transcript from testdata/gemini/stream, flushing after every event.
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

// drain reads the request body, as a real backend does before answering. Go's server only
// notices a client hanging up (and cancels r.Context()) once the body has been read.
func drain(r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }

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
	return &llm.Request{Model: "gemini-2.5-flash", Stream: stream,
		Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
}

func TestOpenStreaming(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" ||
			r.URL.Query().Get("alt") != "sse" || r.URL.Query().Has("key") {
			t.Errorf("got %s %s", r.Method, r.URL)
		}
		if r.Header.Get("x-goog-api-key") != "test-key-1" || r.Header.Get("content-type") != "application/json" {
			t.Errorf("headers %v", r.Header)
		}
		var body generateRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Contents) != 1 {
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
	if text != "Hello, 世界! 🌍" || !last.UsageOnly || last.Usage.TotalTokens != 11 {
		t.Errorf("text %q, last chunk %+v", text, last)
	}
}

func TestOpenNonStreaming(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || r.URL.RawQuery != "" {
			t.Errorf("got %s", r.URL)
		}
		http.ServeFile(w, r, testdata+"/response/thinking_tools.response.json")
	}, nil)
	s, err := c.Open(t.Context(), userRequest(false))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	for _, ch := range chunks {
		calls += len(ch.ToolCalls)
	}
	if calls != 2 || chunks[len(chunks)-2].FinishReason != llm.FinishToolCalls || chunks[len(chunks)-1].Usage.CompletionTokens != 80 {
		t.Errorf("chunks %+v", chunks)
	}
}

func TestKeysRoundRobin(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("x-goog-api-key"))
		mu.Unlock()
		http.ServeFile(w, r, testdata+"/response/text.response.json")
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
		{"per-minute quota with RetryInfo", 429, nil,
			`{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 10.68s.","status":"RESOURCE_EXHAUSTED","details":[` +
				`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},` +
				`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"10.68s"}]}}`,
			llm.KindUpstreamRateLimited, 10680 * time.Millisecond, "You exceeded your current quota. Please retry in 10.68s."},
		{"retry delay only in the message", 429, nil,
			`{"error":{"code":429,"message":"Quota exceeded. Please retry in 350ms.","status":"RESOURCE_EXHAUSTED"}}`,
			llm.KindUpstreamRateLimited, 350 * time.Millisecond, "Quota exceeded. Please retry in 350ms."},
		{"retry delay only in headers", 429, map[string]string{"Retry-After": "3"},
			`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`,
			llm.KindUpstreamRateLimited, 3 * time.Second, "Resource has been exhausted (e.g. check quota)."},
		{"daily quota", 429, nil,
			`{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 20s.","status":"RESOURCE_EXHAUSTED","details":[` +
				`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},` +
				`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"20s"}]}}`,
			llm.KindUpstreamQuota, 0, "You exceeded your current quota. Please retry in 20s."},
		{"invalid", 400, nil, `{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}`,
			llm.KindUpstreamInvalid, 0, "Invalid JSON payload"},
		{"bad key", 400, nil,
			`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
				`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`,
			llm.KindUpstreamAuth, 0, "API key not valid. Please pass a valid API key."},
		{"denied, key echoed", 403, nil, `{"error":{"code":403,"message":"key test-key-1 is blocked","status":"PERMISSION_DENIED"}}`,
			llm.KindUpstreamAuth, 0, "key [redacted] is blocked"},
		{"model not found", 404, nil, `{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}`,
			llm.KindUpstreamInvalid, 0, "models/x is not found"},
		{"unavailable", 503, nil, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`,
			llm.KindProviderUnavailable, 0, "The model is overloaded."},
		{"internal", 500, nil, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`,
			llm.KindUpstream, 0, "An internal error has occurred."},
		{"array body", 429, nil, `[{"error":{"code":429,"message":"slow","status":"RESOURCE_EXHAUSTED"}}]`,
			llm.KindUpstreamRateLimited, 0, "slow"},
		{"html from a proxy", 502, nil, "<html>Bad Gateway</html>", llm.KindUpstream, 0, "HTTP 502: <html>Bad Gateway</html>"},
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
				e.Provider != "gemini" || e.UpstreamStatus != tt.status {
				t.Errorf("got %+v", e)
			}
		})
	}
}

func TestInStreamErrorAfter200(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(t, w, "error_in_stream.sse")
	}, nil)
	s, err := c.Open(t.Context(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	e, ok := errors.AsType[*llm.Error](err)
	if len(chunks) != 2 || !ok || e.Kind != llm.KindUpstreamRateLimited || e.RetryAfter != 10*time.Second {
		t.Errorf("chunks %+v, err %v", chunks, err)
	}
}

// blockingBackend sends one chunk and then holds the stream open until the request's
// context ends, which it reports on done.
func blockingBackend(done chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		drain(r)
		w.Header().Set("content-type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}]}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(done)
	}
}

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

func TestCancelStopsBackend(t *testing.T) {
	done := make(chan struct{})
	c := newTestClient(t, blockingBackend(done), nil)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := c.Open(ctx, userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ch, err := s.Next(); err != nil || ch.Role != "assistant" {
		t.Fatalf("first chunk %+v, %v", ch, err)
	}
	if ch, err := s.Next(); err != nil || ch.Content != "Hel" {
		t.Fatalf("second chunk %+v, %v", ch, err)
	}
	next := make(chan error, 1)
	go func() { // exits when Next returns, which the cancel below forces
		_, err := s.Next()
		next <- err
	}()
	cancel()
	waitDone(t, done, 100*time.Millisecond, "cancel")
	if err := <-next; !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: %v, want context.Canceled", err)
	}
}

func TestCloseStopsBackend(t *testing.T) {
	done := make(chan struct{})
	c := newTestClient(t, blockingBackend(done), nil)
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
	if _, err := s.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("Next after Close: %v, want an error other than io.EOF", err)
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

func TestListModels(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1beta/models" || r.Header.Get("x-goog-api-key") != "test-key-1" {
			t.Errorf("got %s", r.URL)
		}
		switch r.URL.Query().Get("pageToken") {
		case "":
			_, _ = io.WriteString(w, `{"models":[{"name":"models/gemini-2.5-pro","inputTokenLimit":1048576,"outputTokenLimit":65536,`+
				`"supportedGenerationMethods":["generateContent","countTokens"]},`+
				`{"name":"models/text-embedding-004","supportedGenerationMethods":["embedContent"]}],"nextPageToken":"p2"}`)
		case "p2":
			_, _ = io.WriteString(w, `{"models":[{"name":"models/gemini-2.5-flash"}]}`)
		default:
			t.Errorf("unexpected page token %q", r.URL.Query().Get("pageToken"))
		}
	}, nil)
	models, err := c.ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ModelInfo{{ID: "gemini-2.5-pro", ContextWindow: 1048576, MaxOutputTokens: 65536},
		{ID: "text-embedding-004", Type: llm.TypeEmbedding}, {ID: "gemini-2.5-flash"}}
	if len(models) != 3 || models[0] != want[0] || models[1] != want[1] || models[2] != want[2] {
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
		{"unknown tool call id", `{"messages":[{"role":"tool","tool_call_id":"call_9","content":"x"}]}`, "messages[0].tool_call_id"},
		{"bad arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"nope"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"bad part", `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0].type"},
		{"bad effort", `{"reasoning_effort":"extreme","messages":[]}`, "reasoning_effort"},
		{"bad tool_choice", `{"tool_choice":{"type":"function"},"messages":[]}`, "tool_choice"},
	}
	c, err := New(Config{Name: "gemini"})
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
			if !ok || e.Kind != llm.KindInvalidRequest || e.Param != tt.param || e.Provider != "gemini" {
				t.Errorf("got %#v", err)
			}
		})
	}
}

func TestNeedsSignature(t *testing.T) {
	for model, want := range map[string]bool{
		"gemini-2.5-pro": false, "gemini-3-pro-preview": true, "gemini-3.1-flash": true,
		"models/gemini-4-argon": true, "gemini-exp": false, "gemma-3-27b-it": false, "": false,
	} {
		if got := needsSignature(model); got != want {
			t.Errorf("needsSignature(%q) = %v, want %v", model, got, want)
		}
	}
}

// An error as the first event, right after the 200 headers, comes back from Open so the
// gateway can still retry the call or answer its client with a proper status.
func TestErrorBeforeFirstChunkFailsOpen(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(t, w, "error_unavailable.sse")
	}, nil)
	s, err := c.Open(t.Context(), userRequest(true))
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded")
	}
	if e, ok := errors.AsType[*llm.Error](err); !ok || e.Kind != llm.KindProviderUnavailable || e.Provider != "gemini" {
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

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                        DefaultBaseURL,
		"http://127.0.0.1:9":      "http://127.0.0.1:9/v1beta",
		"http://127.0.0.1:9/":     "http://127.0.0.1:9/v1beta",
		"http://127.0.0.1:9/v1/":  "http://127.0.0.1:9/v1",
		"https://proxy/google/v1": "https://proxy/google/v1",
	} {
		c, err := New(Config{Name: "x", BaseURL: in})
		if err != nil || c.http.Base() != want {
			t.Errorf("New(%q): base %v, err %v; want %q", in, c, err, want)
		}
	}
	for _, bad := range []string{"generativelanguage.googleapis.com", "ftp://x", "http://"} {
		if _, err := New(Config{Name: "x", BaseURL: bad}); err == nil {
			t.Errorf("New accepted base_url %q", bad)
		}
	}
}

// TestRefusedKeyOrModel: Google names a bad or blocked key in its ErrorInfo reason; a bare
// PERMISSION_DENIED refuses only what was asked (docs/capacity-signals.md).
func TestRefusedKeyOrModel(t *testing.T) {
	info := func(reason string) string {
		return `,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + reason + `","domain":"googleapis.com"}]`
	}
	tests := []struct {
		name       string
		status     int
		body       string
		keyInvalid bool
	}{
		{"bad key", 400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"` + info("API_KEY_INVALID") + `}}`, true},
		{"blocked key", 403, `{"error":{"code":403,"message":"Requests to this API are blocked.","status":"PERMISSION_DENIED"` + info("API_KEY_SERVICE_BLOCKED") + `}}`, true},
		{"api disabled", 403, `{"error":{"code":403,"message":"Generative Language API has not been used in project 1 before or it is disabled.","status":"PERMISSION_DENIED"` + info("SERVICE_DISABLED") + `}}`, true},
		{"unauthenticated", 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`, true},
		{"model denied", 403, `{"error":{"code":403,"message":"Permission denied on resource project.","status":"PERMISSION_DENIED"}}`, false},
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
