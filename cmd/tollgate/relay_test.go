package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// upstream is a real OpenAI-compatible backend on loopback that reports when it sees its
// request's context end.
type upstream struct {
	*httptest.Server
	cancelled chan time.Time
	started   chan struct{}
}

func newUpstream(t *testing.T, handler func(w http.ResponseWriter, r *http.Request, flush func())) *upstream {
	u := &upstream{cancelled: make(chan time.Time, 16), started: make(chan struct{}, 16)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the request as a real backend does; net/http notices a client that went away
		// only once the body has been consumed.
		io.Copy(io.Discard, r.Body)
		u.started <- struct{}{}
		handler(w, r, func() { w.(http.Flusher).Flush() })
		if r.Context().Err() != nil {
			u.cancelled <- time.Now()
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func upstreamConfig(url string) string {
	return fmt.Sprintf(`
providers:
  - name: up
    kind: openai
    base_url: %s/v1
    keys: ["sk-test-secret"]
    models:
      - id: m
`, url)
}

func chunkJSON(content string) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, content)
}

// dripStream streams a chunk every 5 ms until the client goes away.
func dripStream(w http.ResponseWriter, r *http.Request, flush func()) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i := 0; ; i++ {
		if _, err := fmt.Fprintf(w, "data: %s\n\n", chunkJSON(fmt.Sprintf("tok%d ", i))); err != nil {
			return
		}
		flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Millisecond): // the backend's pacing, not synchronisation
		}
	}
}

func TestHangUpMidStreamCancelsBackend(t *testing.T) {
	up := newUpstream(t, dripStream)
	g := startGateway(t, upstreamConfig(up.URL), nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"up/m","stream":true,"messages":[{"role":"user","content":"go"}]}`))
	res, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	for i := 0; i < 3; i++ { // read a few events: the stream is flowing
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	hungUp := time.Now()
	cancel()
	res.Body.Close()
	select {
	case at := <-up.cancelled:
		if d := at.Sub(hungUp); d > 100*time.Millisecond {
			t.Fatalf("backend saw the cancellation after %v, want ≤ 100ms", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("backend never saw the cancellation")
	}
	g.waitIdle(t)
}

func TestHangUpNonStreamingCancelsBackend(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, flush func()) {
		<-r.Context().Done() // a slow backend: the answer never comes before the hang-up
	})
	g := startGateway(t, upstreamConfig(up.URL), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { // ends when the request fails after cancel
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"up/m","messages":[{"role":"user","content":"go"}]}`))
		_, err := rawClient.Do(req)
		done <- err
	}()
	select {
	case <-up.started:
	case <-time.After(2 * time.Second):
		t.Fatal("backend never called")
	}
	hungUp := time.Now()
	cancel()
	select {
	case at := <-up.cancelled:
		if d := at.Sub(hungUp); d > 100*time.Millisecond {
			t.Fatalf("backend saw the cancellation after %v, want ≤ 100ms", d)
		}
	case <-time.After(2 * time.Second):
		up.CloseClientConnections()
		t.Fatal("backend never saw the cancellation")
	}
	<-done
	g.waitIdle(t)
}

func TestMultiByteSplitAcrossWrites(t *testing.T) {
	want := "日本語のテキスト🎉 and ünïcödé ✓"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, flush func()) {
		w.Header().Set("Content-Type", "text/event-stream")
		var all strings.Builder
		for _, word := range strings.SplitAfter(want, " ") {
			fmt.Fprintf(&all, "data: %s\n\n", chunkJSON(word))
		}
		all.WriteString("data: [DONE]\n\n")
		// Raw UTF-8 in the JSON (not \u escapes), written one byte per flush so every
		// multi-byte character is split across writes.
		b := []byte(all.String())
		for i := range b {
			w.Write(b[i : i+1])
			flush()
		}
	})
	g := startGateway(t, upstreamConfig(up.URL), nil)
	c := sdkClient(g.URL)
	s := c.Chat.Completions.NewStreaming(context.Background(), userParams("up/m"))
	var got strings.Builder
	for s.Next() {
		if ch := s.Current(); len(ch.Choices) > 0 {
			got.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Fatalf("got %q, want %q", got.String(), want)
	}
	g.waitIdle(t)
}

func TestBadInputs(t *testing.T) {
	g := startGateway(t, demoConfig+"limits: {max_body_bytes: 2048}\n", nil)
	cases := []struct {
		name, body string
		status     int
		code       string
		param      string
	}{
		{"malformed JSON", `{"model": "demo/echo", `, 400, "invalid_request", ""},
		{"not an object", `["demo/echo"]`, 400, "invalid_request", ""},
		{"missing model", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request", "model"},
		{"missing messages", `{"model":"demo/echo"}`, 400, "invalid_request", "messages"},
		{"empty messages", `{"model":"demo/echo","messages":[]}`, 400, "invalid_request", "messages"},
		{"messages wrong type", `{"model":"demo/echo","messages":"hi"}`, 400, "invalid_request", "messages"},
		{"bad role", `{"model":"demo/echo","messages":[{"role":"robot","content":"hi"}]}`, 400, "invalid_request", "messages[0].role"},
		{"unknown model", `{"model":"demo/none","messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found", "model"},
		{"unknown provider", `{"model":"none/echo","messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found", "model"},
		{"too large", `{"model":"demo/echo","messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`, 413, "request_too_large", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set("X-Request-Id", "client-id-1")
			res, err := rawClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if res.Header.Get("X-Request-Id") != "client-id-1" || res.Header.Get("X-Gateway-Queue-Ms") == "" {
				t.Errorf("headers: %v", res.Header)
			}
			if res.Header.Get("Retry-After") != "" {
				t.Errorf("a request error carries Retry-After")
			}
			if !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
				t.Fatalf("body lacks code %s: %s", tc.code, body)
			}
			if tc.param != "" && !strings.Contains(string(body), `"param":"`+tc.param+`"`) {
				t.Fatalf("body lacks param %s: %s", tc.param, body)
			}
		})
	}
}
