package httpapi

import (
	"context"
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/httpapi")

// script is a stream that yields its chunks, then err (io.EOF when nil).
type script struct {
	chunks []llm.Chunk
	err    error
	closed bool
}

func (s *script) Next() (llm.Chunk, error) {
	if len(s.chunks) == 0 {
		if s.err != nil {
			return llm.Chunk{}, s.err
		}
		return llm.Chunk{}, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *script) Close() error { s.closed = true; return nil }

type stubGateway struct{ s *script }

// stubStreamGateway admits every call with the given stream.
type stubStreamGateway struct{ st llm.Stream }

func (g stubStreamGateway) Start(_ context.Context, model string, _ llm.Priority, _ *llm.Request) (llm.Served, error) {
	return llm.Served{Stream: g.st, Model: model, Attempts: 1}, nil
}
func (stubStreamGateway) Models() []llm.ModelCard   { return nil }
func (stubStreamGateway) Draining() bool            { return false }
func (stubStreamGateway) RetryAfter() time.Duration { return time.Second }

func (g stubGateway) Start(_ context.Context, model string, _ llm.Priority, _ *llm.Request) (llm.Served, error) {
	return llm.Served{Stream: g.s, Model: model, Attempts: 1, QueueWait: 3 * time.Millisecond}, nil
}
func (stubGateway) Models() []llm.ModelCard   { return nil }
func (stubGateway) Draining() bool            { return false }
func (stubGateway) RetryAfter() time.Duration { return time.Second }

var (
	usage            = &llm.Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8, ReasoningTokens: 1}
	structuredChunks = []llm.Chunk{
		{Role: "assistant"},
		{ReasoningContent: "think"},
		{Content: "Hel"},
		{Content: "lo 世界"},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_1", Type: "function", Name: "get", Arguments: `{"a":`}}},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, Arguments: `1}`}}},
		{FinishReason: llm.FinishToolCalls},
		{Usage: usage},
	}
	raw = []llm.Chunk{
		{Raw: []byte(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`)},
		{Raw: []byte(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`), FinishReason: llm.FinishStop},
		{Raw: []byte(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`), UsageOnly: true, Usage: &llm.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}},
	}
)

func TestRelayGolden(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		chunks []llm.Chunk
		err    error
	}{
		{"structured-stream-usage", `{"model":"p/m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, structuredChunks, nil},
		{"structured-stream", `{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, structuredChunks, nil},
		{"structured-whole", `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`, structuredChunks, nil},
		{"raw-stream-usage", `{"model":"p/m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, raw, nil},
		{"raw-stream", `{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, raw, nil},
		{"raw-whole-from-stream", `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`, raw, nil},
		{"raw-complete", `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`,
			[]llm.Chunk{{Raw: []byte(`{"id":"c","object":"chat.completion","choices":[]}`), Complete: true}}, nil},
		{"midstream-error", `{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, structuredChunks[:3],
			&llm.Error{Kind: llm.KindUpstream, Provider: "p", Message: "backend broke"}},
		{"whole-error", `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`, structuredChunks[:3],
			&llm.Error{Kind: llm.KindRunTimeout, Provider: "p", Message: "too slow"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{chunks: append([]llm.Chunk(nil), tc.chunks...), err: tc.err}
			s := New(Options{Gateway: stubGateway{sc}, Logger: zerolog.Nop(),
				Now: func() time.Time { return time.Unix(1767225600, 0) }})
			req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set("X-Request-Id", "req-1")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if !sc.closed {
				t.Error("stream not closed")
			}
			var got strings.Builder
			got.WriteString(w.Result().Status + "\n")
			for _, h := range []string{"Content-Type", "X-Gateway-Queue-Ms", "X-Request-Id", "Retry-After", "x-should-retry"} {
				if v := w.Header().Get(h); v != "" {
					got.WriteString(h + ": " + v + "\n")
				}
			}
			got.WriteString("\n" + w.Body.String())
			golden := filepath.Join("..", "testdata", "httpapi", tc.name+".golden")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				os.WriteFile(golden, []byte(got.String()), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got.String() != string(want) {
				t.Errorf("mismatch with %s:\n got:\n%s\nwant:\n%s", golden, got.String(), want)
			}
		})
	}
}
