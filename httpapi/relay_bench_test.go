package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// BenchmarkRelayAnswer is one call's answer through the handler and the relay, from a stream
// in memory to a recorder, in each format: an OpenAI-compatible backend's 20 chunks (18 of
// content, the finish, the usage) relayed to chat as they came and translated for Responses
// and Messages, and its whole chat.completion relayed as it came. What it counts is the
// gateway's own work per answer, without a network or a backend.
func BenchmarkRelayAnswer(b *testing.B) {
	var chunks []llm.Chunk
	for range 18 {
		chunks = append(chunks, llm.Chunk{Raw: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"token token "},"finish_reason":null}],"usage":null}`)})
	}
	chunks = append(chunks,
		llm.Chunk{Raw: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`), FinishReason: llm.FinishStop},
		llm.Chunk{Raw: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":36,"total_tokens":48}}`),
			UsageOnly: true, Usage: &llm.Usage{PromptTokens: 12, CompletionTokens: 36, TotalTokens: 48}})
	whole := []llm.Chunk{{Complete: true, Usage: &llm.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15},
		Raw: []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)}}
	for _, c := range []struct {
		name, path, body string
		chunks           []llm.Chunk
	}{
		{"chat-stream", "/v1/chat/completions", `{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, chunks},
		{"chat-whole", "/v1/chat/completions", `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`, whole},
		{"responses-stream", "/v1/responses", `{"model":"p/m","input":"hi","stream":true}`, chunks},
		{"messages-stream", "/v1/messages", `{"model":"p/m","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":true}`, chunks},
	} {
		b.Run(c.name, func(b *testing.B) {
			sc := &script{}
			s := New(Options{Gateway: stubStreamGateway{sc}, Logger: zerolog.Nop()})
			b.ReportAllocs()
			for b.Loop() {
				sc.chunks = c.chunks
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest("POST", c.path, strings.NewReader(c.body)))
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
