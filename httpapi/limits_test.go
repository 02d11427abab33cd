package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// freshGateway answers every call with a new short stream.
type freshGateway struct{}

func (freshGateway) Start(_ context.Context, model string, _ llm.Priority, _ *llm.Request) (llm.Served, error) {
	st := &script{chunks: []llm.Chunk{{Role: "assistant"}, {Content: "ok"}, {FinishReason: llm.FinishStop}}}
	return llm.Served{Stream: st, Model: model, Attempts: 1}, nil
}
func (freshGateway) Models() []llm.ModelCard   { return nil }
func (freshGateway) Draining() bool            { return false }
func (freshGateway) RetryAfter() time.Duration { return time.Second }

const chatBody = `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`

func chatRequest(extra string, body string) string {
	return "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" + extra +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// rawServer serves the handler with the limits on a real net/http server, for raw sockets.
func rawServer(t *testing.T, opts Options) (addr string, logs *lockedWriter) {
	t.Helper()
	logs = &lockedWriter{w: &strings.Builder{}}
	opts.Gateway = freshGateway{}
	opts.Logger = zerolog.New(logs)
	srv := httptest.NewServer(New(opts))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), logs
}

// exchange writes raw to a new connection and reads every response the server sends on it
// until the server closes it (or the deadline passes, which fails the test).
func exchange(t *testing.T, addr, raw string) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return readAllResponses(t, c)
}

func readAllResponses(t *testing.T, c net.Conn) []*http.Response {
	t.Helper()
	br := bufio.NewReader(c)
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server did not close the connection after %d answers: %v", len(out), err)
			}
			return out // a reset after the last answer
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
}

func errorCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var body errorBody
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("answer %d is not SPEC §4 JSON: %q", resp.StatusCode, b)
	}
	return body.Error.Code
}

func TestLimitsRefuseAndClose(t *testing.T) {
	// A body timeout far beyond exchange's deadline: a refusal that waited for the rest of
	// its request would hang past it.
	addr, logs := rawServer(t, Options{BodyTimeout: time.Minute, MaxHeaderBytes: 2048})
	smuggled := "GET /admin/state HTTP/1.1\r\nHost: gw\r\n\r\n"
	tests := []struct {
		name   string
		raw    string
		status int
		code   string
	}{
		{"Content-Length and Transfer-Encoding, a request smuggled behind",
			"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
			400, "invalid_request"},
		{"Transfer-Encoding alone",
			"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n" +
				fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(chatBody), chatBody),
			400, "invalid_request"},
		{"headers over max_header_bytes", chatRequest("X-Filler: "+strings.Repeat("a", 2100)+"\r\n", chatBody) + smuggled,
			431, "request_header_too_large"},
		// Nothing more of a refused request is read: a body that never ends holds nothing.
		{"a chunked body that never ends", "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"mod\r\n",
			400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resps := exchange(t, addr, tt.raw)
			if len(resps) != 1 {
				t.Fatalf("%d answers on the connection, want exactly 1 and then the close", len(resps))
			}
			r := resps[0]
			if r.StatusCode != tt.status || errorCode(t, r) != tt.code || !r.Close {
				t.Fatalf("answer %d close=%v, want %d %s and Connection: close", r.StatusCode, r.Close, tt.status, tt.code)
			}
		})
	}
	for _, code := range []string{"invalid_request", "request_header_too_large"} {
		if !strings.Contains(logs.String(), `"code":"`+code+`"`) {
			t.Errorf("no log line for %s: %s", code, logs.String())
		}
	}
}

// TestRefusalsInTheRoutesShape: a refusal before routing on /v1/messages is in Anthropic's
// error shape, as that route's own answers are (SPEC §13).
func TestRefusalsInTheRoutesShape(t *testing.T) {
	addr, _ := rawServer(t, Options{BodyTimeout: time.Minute})
	resps := exchange(t, addr, "POST /v1/messages HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	if len(resps) != 1 || resps[0].StatusCode != http.StatusBadRequest {
		t.Fatalf("%d answers, want one 400", len(resps))
	}
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type, Code string
		} `json:"error"`
	}
	b, _ := io.ReadAll(resps[0].Body)
	if err := json.Unmarshal(b, &body); err != nil || body.Type != "error" || body.Error.Type != "invalid_request_error" || body.Error.Code != "invalid_request" {
		t.Fatalf("answer %s, want Anthropic's error shape with Tollgate's code", b)
	}
}

func TestBodyTimeout(t *testing.T) {
	const limit = 300 * time.Millisecond
	addr, _ := rawServer(t, Options{BodyTimeout: limit})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	full := chatRequest("", chatBody)
	if _, err := io.WriteString(c, full[:len(full)-10]); err != nil { // the body's last bytes never come
		t.Fatal(err)
	}
	resps := readAllResponses(t, c)
	took := time.Since(start)
	if len(resps) != 1 || resps[0].StatusCode != http.StatusRequestTimeout || errorCode(t, resps[0]) != "request_timeout" || !resps[0].Close {
		t.Fatalf("answers %v, want one 408 request_timeout and the close", resps)
	}
	if took < limit {
		t.Fatalf("answered after %v, before body_timeout %v", took, limit)
	}
}

// slowGateway answers every call with a stream that waits before its only chunk, as a
// backend thinking does, unless the call is cancelled first.
type slowGateway struct{ wait time.Duration }

func (g slowGateway) Start(ctx context.Context, model string, _ llm.Priority, _ *llm.Request) (llm.Served, error) {
	return llm.Served{Stream: &slowStream{ctx: ctx, wait: g.wait}, Model: model, Attempts: 1}, nil
}
func (slowGateway) Models() []llm.ModelCard   { return nil }
func (slowGateway) Draining() bool            { return false }
func (slowGateway) RetryAfter() time.Duration { return time.Second }

type slowStream struct {
	ctx  context.Context
	wait time.Duration
	sent int
}

func (s *slowStream) Next() (llm.Chunk, error) {
	if s.sent == 1 {
		return llm.Chunk{}, io.EOF
	}
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return llm.Chunk{}, s.ctx.Err()
	case <-t.C:
	}
	s.sent++
	return llm.Chunk{Content: "ok", FinishReason: llm.FinishStop}, nil
}

func (s *slowStream) Close() error { return nil }

// TestBodyDeadlineEndsWithTheBody: the body's deadline is lifted once the body is read, so an
// answer that takes longer than body_timeout is not cut (a deadline left on the connection
// would cancel the request when it passed), and the connection serves the next request.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	const limit = 100 * time.Millisecond
	srv := httptest.NewServer(New(Options{Gateway: slowGateway{wait: 3 * limit}, BodyTimeout: limit, Logger: zerolog.Nop()}))
	t.Cleanup(srv.Close)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 2 {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, chatRequest("", chatBody)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Close || !strings.Contains(string(b), `"content":"ok"`) {
			t.Fatalf("request %d: %d close=%v %s", i, resp.StatusCode, resp.Close, b)
		}
	}
}

func TestHeaderBytes(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/chat/completions?x=1", nil)
	r.Header = http.Header{"A": {"1"}, "Bb": {"22", "333"}}
	r.Host = "gw"
	// "POST /v1/chat/completions?x=1 HTTP/1.1\r\n" + "Host: gw\r\n" + "A: 1\r\n" + "Bb: 22\r\n" + "Bb: 333\r\n" + "\r\n"
	want := len("POST /v1/chat/completions?x=1 HTTP/1.1\r\n") + len("Host: gw\r\n") + len("A: 1\r\n") +
		len("Bb: 22\r\n") + len("Bb: 333\r\n") + 2
	if got := headerBytes(r); got != want {
		t.Fatalf("headerBytes = %d, want %d", got, want)
	}
}

// lockedWriter is a log sink the server's goroutines write to while the test reads it.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
