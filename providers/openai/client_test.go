package openai

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func userRequest(stream bool) *llm.Request {
	return &llm.Request{Model: "m", Stream: stream,
		Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
}

const okStream = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n"

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		cfg     Config
		wantErr string
		wantURL string
	}{
		{"default url", KindDeepSeek, Config{}, "", "https://api.deepseek.com/v1"},
		{"trailing slash", KindOpenAI, Config{BaseURL: "http://127.0.0.1:9/v1/"}, "", "http://127.0.0.1:9/v1"},
		{"unknown kind", "anthropic", Config{Name: "a"}, `unknown kind "anthropic"`, ""},
		{"relative url", KindOllama, Config{Name: "o", BaseURL: "localhost:11434/v1"}, `base_url "localhost:11434/v1"`, ""},
		{"bad scheme", KindOllama, Config{Name: "o", BaseURL: "ftp://h/v1"}, `provider "o": base_url "ftp://h/v1"`, ""},
		{"garbage url", KindOpenAI, Config{BaseURL: "http://[::1"}, `base_url "http://[::1"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.kind, tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.up.Base() != tt.wantURL {
				t.Errorf("base = %q, want %q", c.up.Base(), tt.wantURL)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	for _, kind := range []string{KindOpenAI, KindDeepSeek, KindQwen, KindDoubao, KindErnie, KindNvidia, KindLMStudio, KindOllama} {
		if DefaultBaseURL(kind) == "" || !Supports(kind) {
			t.Errorf("kind %s has no default base URL", kind)
		}
	}
	local, _ := New(KindOllama, Config{})
	cloud, _ := New(KindOpenAI, Config{Lanes: 500})
	ct := cloud.up.HTTP().Transport.(*http.Transport)
	if local.up.HeaderTimeout() != 5*time.Minute || cloud.up.HeaderTimeout() != 60*time.Second {
		t.Errorf("header timeouts: local %v, cloud %v", local.up.HeaderTimeout(), cloud.up.HeaderTimeout())
	}
	if ct.MaxIdleConnsPerHost != 500 || local.up.HTTP().Timeout != 0 {
		t.Errorf("pool: MaxIdleConnsPerHost %d for 500 lanes, whole-call timeout %v", ct.MaxIdleConnsPerHost, local.up.HTTP().Timeout)
	}
	if again, _ := New(KindOpenAI, Config{Lanes: 500}); again.up.HTTP() == cloud.up.HTTP() {
		t.Error("two providers share one pool: it would be sized to neither's lanes")
	}
}

// TestKeys: keys rotate per call, per-model keys replace them, and no key means no header.
func TestKeys(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, okStream)
	}))
	defer srv.Close()
	c, err := New(KindNvidia, Config{BaseURL: srv.URL, Keys: []string{"k1", "k2"},
		ModelKeys: map[string][]string{"special": {"m1"}}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(c *Client, model string) {
		t.Helper()
		req := userRequest(true)
		req.Model = model
		s, err := c.Open(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
	}
	for _, m := range []string{"a", "b", "special", "c", "special"} {
		call(c, m)
	}
	nokey, _ := New(KindOllama, Config{BaseURL: srv.URL})
	call(nokey, "a")
	want := []string{"Bearer k1", "Bearer k2", "Bearer m1", "Bearer k1", "Bearer m1", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Authorization headers = %q, want %q", got, want)
	}
}

// TestRelayBytesExact: chunks reach the gateway byte for byte, whatever their spacing.
func TestRelayBytesExact(t *testing.T) {
	frames := []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a  b"},"finish_reason":null}]}`,
		`{ "id" : "c", "choices" : [ { "index" : 0, "delta" : { "content" : "\u00e9" }, "finish_reason" : "stop" } ] }`,
		`{"id":"c","choices":[],"usage": {"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	}
	var body strings.Builder
	for _, f := range frames {
		body.WriteString("data: " + f + "\r\n\r\n")
	}
	body.WriteString("data: [DONE]\r\n\r\n")
	srv := replayServer(t, 200, http.Header{"Content-Type": {"text/event-stream"}}, []byte(body.String()), 3)
	c := newTestClient(t, KindOpenAI, srv.URL)
	s, err := c.Open(context.Background(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, f := range frames {
		ch, err := s.Next()
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if string(ch.Raw) != f {
			t.Errorf("chunk %d = %s, want %s", i, ch.Raw, f)
		}
	}
	if ch, err := s.Next(); err != io.EOF {
		t.Fatalf("after last chunk: %v %s, want io.EOF", err, ch.Raw)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("Next after the end = %v, want io.EOF again", err)
	}
}

// firstReadTransport signals once the client has read the first bytes of a response body.
type firstReadTransport struct {
	rt   http.RoundTripper
	read chan struct{}
	once sync.Once
}

func (f *firstReadTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.rt.RoundTrip(r)
	if err == nil {
		resp.Body = &notifyBody{ReadCloser: resp.Body, f: f}
	}
	return resp, err
}

type notifyBody struct {
	io.ReadCloser
	f *firstReadTransport
}

func (n *notifyBody) Read(p []byte) (int, error) {
	k, err := n.ReadCloser.Read(p)
	if k > 0 {
		n.f.once.Do(func() { close(n.f.read) })
	}
	return k, err
}

// TestUTF8SplitAcrossWrites: a character cut in half by a flush, and read by the client in
// two reads, comes out whole.
func TestUTF8SplitAcrossWrites(t *testing.T) {
	frame := `{"id":"c","choices":[{"index":0,"delta":{"content":"你好🙂"},"finish_reason":null}]}`
	full := "data: " + frame + "\n\ndata: [DONE]\n\n"
	cut := strings.Index(full, "好") + 1 // inside the 3-byte character
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, full[:cut])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, full[cut:])
	}))
	defer srv.Close()
	ft := &firstReadTransport{rt: NewTransport(time.Second, 5*time.Second), read: make(chan struct{})}
	c, err := New(KindOpenAI, Config{BaseURL: srv.URL, HTTPClient: &http.Client{Transport: ft}})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		s   llm.Stream
		err error
	}
	opened := make(chan result, 1)
	go func() { // exits when Open returns, which the second half (or srv.Close) guarantees
		s, err := c.Open(context.Background(), userRequest(true))
		opened <- result{s, err}
	}()
	<-ft.read // the client holds half a character and no more
	close(release)
	r := <-opened
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.s.Close()
	ch, err := r.s.Next()
	if err != nil || string(ch.Raw) != frame {
		t.Fatalf("chunk = %q, %v; want %q", ch.Raw, err, frame)
	}
}

// TestBrokenStream: a connection that dies mid-stream is a truncated answer, not a clean end.
func TestBrokenStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"c\",\"choices\":[]}\n\ndata: {\"id\":\"c\",\"cho")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drops the connection without ending the chunked body
	}))
	defer srv.Close()
	srv.Config.ErrorLog = nil
	c := newTestClient(t, KindOpenAI, srv.URL)
	s, err := c.Open(context.Background(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	if _, err := s.Next(); err == nil || err == io.EOF {
		t.Fatalf("Next on a broken stream = %v, want an error", err)
	} else if k := llm.KindOf(err); k != llm.KindUpstreamTruncated {
		t.Fatalf("kind = %v (%v), want upstream_truncated", k, err)
	}
}

// TestCancelAbortsBackend: cancelling the context is seen by the backend promptly, both
// while a stream is being relayed and while a non-streaming answer is awaited.
func TestCancelAbortsBackend(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "complete"}[stream]
		t.Run(name, func(t *testing.T) {
			gone := make(chan struct{})
			arrived := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// A real backend reads the request first; only then can net/http notice the
				// client hanging up.
				_, _ = io.Copy(io.Discard, r.Body)
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, "data: {\"id\":\"c\",\"choices\":[]}\n\n")
					w.(http.Flusher).Flush()
				}
				close(arrived)
				<-r.Context().Done()
				close(gone)
			}))
			defer srv.Close()
			c := newTestClient(t, KindOpenAI, srv.URL)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { // exits when the call ends, which cancel guarantees
				s, err := c.Open(ctx, userRequest(stream))
				for err == nil {
					_, err = s.Next() // the first chunk, then blocks: the backend sends nothing more
				}
				if s != nil {
					_ = s.Close()
				}
				errc <- err
			}()
			<-arrived
			start := time.Now()
			cancel()
			select {
			case <-gone:
			case <-time.After(100 * time.Millisecond):
				t.Fatal("backend did not see the cancellation within 100ms")
			}
			t.Logf("backend saw cancel after %v", time.Since(start))
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("call error = %v, want context.Canceled", err)
			}
		})
	}
}

// TestCloseStopsStream: Close ends the HTTP call; the backend sees it and Close is repeatable.
func TestCloseStopsStream(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"c\",\"choices\":[]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer srv.Close()
	c := newTestClient(t, KindOpenAI, srv.URL)
	s, err := c.Open(context.Background(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	select {
	case <-gone:
	case <-time.After(time.Second):
		t.Fatal("backend still running after Close")
	}
}

// TestConnectionReuse: finished streams and completions give their connection back.
func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "event-stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, okStream)
			return
		}
		_, _ = io.WriteString(w, `{"id":"c","choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, _ := New(KindOpenAI, Config{BaseURL: srv.URL, HTTPClient: &http.Client{Transport: NewTransport(time.Second, time.Second)}})
	for i := 0; i < 4; i++ {
		s, err := c.Open(context.Background(), userRequest(i%2 == 0))
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := s.Next(); err != nil {
				break
			}
		}
		_ = s.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("4 sequential calls used %d connections, want 1", n)
	}
}

// TestKeyNeverInErrors: a backend echoing our key does not get it into any error.
func TestKeyNeverInErrors(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	bodies := []struct {
		status int
		body   string
	}{
		{401, `{"error":{"message":"Incorrect API key provided: ` + key + `","code":"invalid_api_key"}}`},
		{500, `oops ` + key},
		{200, `{"code":"InvalidApiKey","message":"bad key ` + key + `"}`},
		{200, `{"error_code":110,"error_msg":"Access token invalid ` + key + `"}`},
	}
	for _, b := range bodies {
		srv := replayServer(t, b.status, http.Header{"Content-Type": {"application/json"}}, []byte(b.body), 1<<10)
		c := newTestClient(t, KindErnie, srv.URL, key)
		_, err := c.Open(context.Background(), userRequest(false))
		if err == nil {
			t.Fatalf("status %d: no error", b.status)
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("error leaks the key: %v", err)
		}
		if k := llm.KindOf(err); b.status != 500 && k != llm.KindUpstreamAuth {
			t.Errorf("status %d body %s: kind %v, want upstream_auth_failed", b.status, b.body, k)
		}
	}
}

// TestTransportError: an unreachable backend is an upstream error naming the provider.
func TestTransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c := newTestClient(t, KindLMStudio, "http://"+addr+"/v1", "sk-x")
	_, err = c.Open(context.Background(), userRequest(true))
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindUpstream || e.Provider != "lmstudio-test" {
		t.Fatalf("Open against a closed port = %#v", err)
	}
}

func TestListModels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"no","code":"invalid_api_key"}}`, 401)
			return
		}
		_, _ = io.WriteString(w, `{"object":"list","data":[
			{"id":"gpt-x","object":"model","created":1,"owned_by":"openai"},
			{"id":"long","context_length":131072},
			{"id":"odd","context_length":"big"},
			{"object":"model"}]}`)
	}))
	defer srv.Close()
	c := newTestClient(t, KindOpenAI, srv.URL+"/v1", "k")
	got, err := c.ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ModelInfo{{ID: "gpt-x"}, {ID: "long", ContextWindow: 131072}, {ID: "odd"}}
	if len(got) != len(want) {
		t.Fatalf("ListModels = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("model %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	bad := newTestClient(t, KindOpenAI, srv.URL+"/v1", "wrong")
	if _, err := bad.ListModels(context.Background()); llm.KindOf(err) != llm.KindUpstreamAuth {
		t.Errorf("ListModels with a wrong key = %v, want upstream_auth_failed", err)
	}
}

// TestFreshBodyReplayable: the request body can be replayed (GetBody) for transport retries.
func TestFreshBodyReplayable(t *testing.T) {
	req := userRequest(false)
	req.Body = []byte(`{"model":"x","messages":[]}`)
	body, err := requestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	var hr *http.Request // the request the transport was given
	capture := capturingTransport(func(r *http.Request) { hr = r })
	c, err := New(KindOpenAI, Config{BaseURL: "http://127.0.0.1:1", Keys: []string{"m"}, HTTPClient: &http.Client{Transport: capture}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if hr.GetBody == nil || hr.ContentLength != int64(len(body)) {
		t.Fatalf("GetBody %v, ContentLength %d for %d bytes", hr.GetBody != nil, hr.ContentLength, len(body))
	}
	for i := 0; i < 2; i++ {
		rc, _ := hr.GetBody()
		b, _ := io.ReadAll(rc)
		if !bytes.Equal(b, body) {
			t.Fatalf("replay %d = %s", i, b)
		}
	}
	if bytes.Equal(body, req.Body) || &body[0] == &req.Body[0] {
		t.Error("the client's body was forwarded unchanged or shared")
	}
}

// TestListModelsWithOnlyModelKeys: a provider configured with per-model keys only can still
// list its models.
func TestListModelsWithOnlyModelKeys(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer a-key" {
			http.Error(w, `{"error":{"message":"no key"}}`, 401)
			return
		}
		_, _ = io.WriteString(w, `{"data":[{"id":"a"}]}`)
	}))
	defer srv.Close()
	c, err := New(KindNvidia, Config{BaseURL: srv.URL, ModelKeys: map[string][]string{"b": {"b-key"}, "a": {"a-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := c.ListModels(context.Background()); err != nil || len(ms) != 1 {
		t.Fatalf("ListModels = %v, %v", ms, err)
	}
}

// TestCloseAfterDoneWithLingeringBackend: a backend that keeps the body open after [DONE]
// does not make Close hang, and is hung up on.
func TestCloseAfterDoneWithLingeringBackend(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, okStream)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer srv.Close()
	c := newTestClient(t, KindOpenAI, srv.URL)
	s, err := c.Open(context.Background(), userRequest(true))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = s.Next()
	}
	if err != io.EOF {
		t.Fatalf("stream ended with %v, want io.EOF", err)
	}
	start := time.Now()
	_ = s.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Fatal("backend connection still open after Close")
	}
}

// TestHeaderTimeout: a backend that never answers a stream request is an upstream error once
// HeaderTimeout passes, and says so. (A non-streaming call is bounded by its context only.)
func TestHeaderTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, err := New(KindOpenAI, Config{BaseURL: srv.URL, HeaderTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Open(context.Background(), userRequest(true))
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindUpstream || !strings.Contains(e.Message, "timed out") {
		t.Fatalf("Open against a silent backend = %v", err)
	}
}

// TestHeaderTimeoutSparesWholeAnswers: a non-streaming answer whose headers come only with
// the whole body, later than HeaderTimeout, is not cut off.
func TestHeaderTimeoutSparesWholeAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select { // a backend still writing the answer, well past the header timeout
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	c, err := New(KindOpenAI, Config{BaseURL: srv.URL, HeaderTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Open(context.Background(), userRequest(false))
	if err != nil {
		t.Fatalf("non-streaming Open with a slow whole answer = %v", err)
	}
	defer s.Close()
	if ch, err := s.Next(); err != nil || !ch.Complete {
		t.Errorf("Next = %+v, %v", ch, err)
	}
}

// TestErrorIn200Keys: a 200 whose body is an error is that error when its names are as
// written, escapes decoded ("\u0063ode" is code); a body that names the error otherwise
// ("Code", "ERROR") is not an error to the gateway, which reads a backend's names exactly,
// and is relayed as the answer it claims to be; one that names a member twice is refused as
// not JSON the gateway takes.
func TestErrorIn200Keys(t *testing.T) {
	for _, tt := range []struct {
		body     string
		answered bool // relayed as it is
		kind     llm.Kind
	}{
		{`{"code":"Throttling","message":"slow"}`, false, llm.KindUpstreamRateLimited},
		{`{"\u0063ode":"Throttling","message":"slow"}`, false, llm.KindUpstreamRateLimited},
		{`{"error":{"message":"slow","code":"rate_limit_exceeded"}}`, false, llm.KindUpstreamRateLimited},
		{`{"Code":"Throttling","Message":"slow"}`, true, 0},
		{`{"ERROR":{"message":"slow","code":"rate_limit_exceeded"}}`, true, 0},
		{`{"code":"Throttling","code":"Throttling","message":"slow"}`, false, llm.KindUpstream},
	} {
		srv := replayServer(t, 200, http.Header{"Content-Type": {"application/json"}}, []byte(tt.body), 1<<10)
		c := newTestClient(t, KindOpenAI, srv.URL, "sk-x")
		s, err := c.Open(context.Background(), userRequest(false))
		if tt.answered {
			if err != nil {
				t.Errorf("%s: %v, want it relayed as an answer", tt.body, err)
				continue
			}
			ch, err := s.Next()
			_ = s.Close()
			if err != nil || string(ch.Raw) != tt.body {
				t.Errorf("%s: relayed %q, %v", tt.body, ch.Raw, err)
			}
			continue
		}
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: answered as a completion", tt.body)
			continue
		}
		if k := llm.KindOf(err); k != tt.kind {
			t.Errorf("%s: kind %v (%v), want %v", tt.body, k, err, tt.kind)
		}
	}
}

// TestRefusedKeyOrModel: a refusal says whether the key itself is invalid or disabled
// (KeyInvalid: set aside for every model) or only this model may not be used with it (a
// 403 that says nothing of the key), per kind's bodies (docs/capacity-signals.md).
func TestRefusedKeyOrModel(t *testing.T) {
	tests := []struct {
		kind, name string
		status     int
		body       string
		keyInvalid bool
	}{
		{KindOpenAI, "invalid key", 401, `{"error":{"message":"Incorrect API key provided: sk-x","type":"invalid_request_error","code":"invalid_api_key"}}`, true},
		{KindOpenAI, "region", 403, `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","code":"unsupported_country_region_territory"}}`, true},
		{KindOpenAI, "model not allowed", 403, `{"error":{"message":"You are not allowed to sample from this model","type":"invalid_request_error","code":null}}`, false},
		{KindQwen, "invalid key", 401, `{"error":{"code":"invalid_api_key","message":"Incorrect API key provided."}}`, true},
		{KindQwen, "model denied", 403, `{"code":"Model.AccessDenied","message":"Model access denied.","request_id":"r"}`, false},
		{KindQwen, "unpurchased", 403, `{"code":"AccessDenied.Unpurchased","message":"Access to model denied. Please make sure you are eligible for using the model.","request_id":"r"}`, false},
		{KindQwen, "key disabled", 403, `{"code":"AccessDenied","message":"This API key has been disabled.","request_id":"r"}`, true},
		{KindDoubao, "auth", 401, `{"error":{"code":"AuthenticationError","message":"the API key in the request is missing or invalid","type":"Unauthorized"}}`, true},
		{KindDoubao, "denied", 403, `{"error":{"code":"AccessDenied","message":"You do not have access to the model or endpoint","type":"Forbidden"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.name, func(t *testing.T) {
			srv := replayServer(t, tt.status, http.Header{"Content-Type": {"application/json"}}, []byte(tt.body), 1<<10)
			c := newTestClient(t, tt.kind, srv.URL, "sk-x")
			_, err := c.Open(context.Background(), userRequest(false))
			e, ok := errors.AsType[*llm.Error](err)
			if !ok || e.Kind != llm.KindUpstreamAuth || e.UpstreamStatus != tt.status || e.KeyInvalid != tt.keyInvalid {
				t.Fatalf("error %+v; want upstream_auth_failed, status %d, KeyInvalid %v", err, tt.status, tt.keyInvalid)
			}
		})
	}
}

// brokenBodyTransport breaks every answer's body after its data, with an error quoting the
// request's Authorization header.
// capturingTransport hands each request to see and answers it with a one-choice completion.
type capturingTransport func(*http.Request)

func (f capturingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f(r)
	const answer = `{"choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}`
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(answer)), Request: r}, nil
}

type brokenBodyTransport struct{ rt http.RoundTripper }

func (b *brokenBodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(r)
	if err == nil {
		resp.Body = &failingBody{r: resp.Body, err: errors.New("proxy: lost the backend of " + r.Header.Get("Authorization"))}
	}
	return resp, err
}

// failingBody hands out its data, then fails with err.
type failingBody struct {
	r   io.Reader
	err error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if n, _ := b.r.Read(p); n > 0 {
		return n, nil
	}
	return 0, b.err
}

func (b *failingBody) Close() error { return nil }

// TestBrokenStreamScrubsKeys: a stream whose read fails with an error that quotes the key
// (a proxy on the way echoing the request's headers) shows the key in neither the error's
// message nor its detail for the log, on the chat and the Responses paths.
func TestBrokenStreamScrubsKeys(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	for _, tc := range []struct {
		name, path, frame string
		open              func(*Client) (llm.Stream, error)
	}{
		{"chat", "/chat/completions", `data: {"id":"c","choices":[]}` + "\n\n",
			func(c *Client) (llm.Stream, error) { return c.Open(context.Background(), userRequest(true)) }},
		{"responses", "/responses", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n",
			func(c *Client) (llm.Stream, error) {
				return c.Open(context.Background(), responsesReq(true, `{"model":"m","input":"hi","stream":true}`))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.frame)
			}))
			defer srv.Close()
			rt := &brokenBodyTransport{rt: NewTransport(time.Second, 5*time.Second)}
			c, err := New(KindOpenAI, Config{Name: "p", BaseURL: srv.URL, Keys: []string{key}, HTTPClient: &http.Client{Transport: rt}})
			if err != nil {
				t.Fatal(err)
			}
			s, err := tc.open(c) // fails here when the break comes before the answer starts
			if err == nil {
				defer s.Close()
			}
			for err == nil {
				_, err = s.Next()
			}
			le, ok := errors.AsType[*llm.Error](err)
			if !ok || !strings.Contains(le.Detail, "[redacted]") {
				t.Fatalf("Next's error = %#v, want an llm.Error whose detail has the key redacted", err)
			}
			if strings.Contains(le.Message, key) || strings.Contains(le.Detail, key) {
				t.Errorf("the key shows: message %q, detail %q", le.Message, le.Detail)
			}
		})
	}
}
