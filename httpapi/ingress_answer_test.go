package httpapi

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// errGateway refuses every call with err, as the admission machinery would.
type errGateway struct{ err error }

func (g errGateway) Start(_ context.Context, model string, _ llm.Priority, _ *llm.Request) (llm.Served, error) {
	return llm.Served{Model: model, Provider: "p", QueueWait: 7 * time.Millisecond}, g.err
}
func (errGateway) Models() []llm.ModelCard   { return nil }
func (errGateway) Draining() bool            { return false }
func (errGateway) RetryAfter() time.Duration { return time.Second }

var (
	parallelTools = []llm.Chunk{
		{Role: "assistant"},
		{ReasoningContent: "Two lookups."},
		{Content: "Checking both."},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_1", Type: "function", Name: "exec_command", Arguments: `{"cmd":`}}},
		{ToolCalls: []llm.ToolCallDelta{{Index: 1, ID: "call_2", Type: "function", Name: "exec_command", Arguments: `{"cmd":"pwd"}`}}},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, Arguments: `"ls"}`}}},
		{FinishReason: llm.FinishToolCalls},
		{Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 9, TotalTokens: 29, CachedTokens: 4, ReasoningTokens: 2}},
	}
	cutShort = []llm.Chunk{{Role: "assistant"}, {Content: "Once upon"}, {FinishReason: llm.FinishLength},
		{Usage: &llm.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}}}
	customTool = []llm.Chunk{
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_p", Type: "function", Name: "apply_patch", Arguments: `{"input":"*** Begin`}}},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, Arguments: ` Patch"}`}}},
		{FinishReason: llm.FinishToolCalls},
	}
	rawCompletion = []llm.Chunk{{Complete: true, Raw: []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi.","reasoning_content":"Greet.","tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}}`),
		Usage: &llm.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7}}}
	rawToolStream = []llm.Chunk{
		{Raw: []byte(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_r","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`)},
		{Raw: []byte(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]},"finish_reason":null}]}`)},
		{Raw: []byte(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`), FinishReason: llm.FinishToolCalls},
		{Raw: []byte(`{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`), UsageOnly: true,
			Usage: &llm.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}},
	}
	upstreamBroke = &llm.Error{Kind: llm.KindUpstream, Provider: "p", Message: "backend broke"}
	queueFull     = &llm.Error{Kind: llm.KindQueueFull, Provider: "p", Message: "provider p's queue is full (8 waiting)", RetryAfter: 1500 * time.Millisecond}
)

func nativeChunks(f llm.Format, events ...string) []llm.Chunk {
	var out []llm.Chunk
	for i := 0; i+1 < len(events); i += 2 {
		out = append(out, llm.Chunk{Format: f, Event: events[i], Raw: []byte(events[i+1])})
	}
	return out
}

type answerCase struct {
	name, body string
	chunks     []llm.Chunk
	err        error // ends the stream after the chunks
	refuse     error // the gateway refuses the call
}

// TestIngressAnswerGolden: chat answers (structured and OpenAI-compatible chunks), native
// answers and errors, as each ingress format writes them, against testdata/httpapi/<api>/answer.
func TestIngressAnswerGolden(t *testing.T) {
	const (
		rs   = `{"model":"p/m","input":"hi","stream":true}`
		rw   = `{"model":"p/m","input":"hi"}`
		rsCT = `{"model":"p/m","input":"hi","stream":true,"tools":[{"type":"custom","name":"apply_patch"}]}`
		ms   = `{"model":"p/m","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":true}`
		mw   = `{"model":"p/m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	)
	run := func(t *testing.T, path, dir string, cases []answerCase) {
		for _, tc := range cases {
			t.Run(dir+"/"+tc.name, func(t *testing.T) {
				sc := &script{chunks: append([]llm.Chunk(nil), tc.chunks...), err: tc.err}
				var gw Gateway = stubGateway{sc}
				if tc.refuse != nil {
					gw = errGateway{tc.refuse}
				}
				s := New(Options{Gateway: gw, Logger: zerolog.Nop(), Now: func() time.Time { return time.Unix(1767225600, 0) }})
				req := httptest.NewRequest("POST", path, strings.NewReader(tc.body))
				req.Header.Set("X-Request-Id", "req-1")
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if tc.refuse == nil && !strings.HasPrefix(tc.name, "invalid") && !sc.closed {
					t.Error("stream not closed")
				}
				var got strings.Builder
				got.WriteString(w.Result().Status + "\n")
				for _, h := range []string{"Content-Type", "X-Gateway-Queue-Ms", "X-Gateway-Model", "X-Gateway-Attempts",
					"X-Request-Id", "Retry-After", "retry-after-ms", "x-should-retry"} {
					if v := w.Header().Get(h); v != "" {
						got.WriteString(h + ": " + v + "\n")
					}
				}
				got.WriteString("\n" + w.Body.String())
				checkGolden(t, filepath.Join("..", "testdata", "httpapi", dir, "answer", tc.name+".golden"), got.String())
			})
		}
	}
	run(t, "/v1/responses", "responses", []answerCase{
		{name: "text-stream", body: rs, chunks: structuredChunks},
		{name: "tools-stream", body: rs, chunks: parallelTools},
		{name: "tools-whole", body: rw, chunks: parallelTools},
		{name: "custom-tool-stream", body: rsCT, chunks: customTool},
		{name: "length-stream", body: rs, chunks: cutShort},
		{name: "raw-stream", body: rs, chunks: rawToolStream},
		{name: "raw-complete-whole", body: rw, chunks: rawCompletion},
		{name: "midstream-error", body: rs, chunks: structuredChunks[:3], err: upstreamBroke},
		{name: "error-before-stream", body: rs, err: upstreamBroke},
		// Cut inside a tool call's arguments: the call and the message before it are incomplete.
		{name: "tools-midstream-error", body: rs, chunks: parallelTools[:4], err: upstreamBroke},
		{name: "whole-error", body: rw, chunks: structuredChunks[:3], err: &llm.Error{Kind: llm.KindRunTimeout, Provider: "p", Message: "too slow"}},
		{name: "queue-full", body: rs, refuse: queueFull},
		{name: "invalid", body: `{"model":"p/m","input":"hi","previous_response_id":"resp_9"}`},
		{name: "invalid-call-id", body: `{"model":"p/m","input":[{"type":"function_call_output","call_id":"call_9","output":"done"}]}`},
		{name: "native-stream", body: rs, chunks: nativeChunks(llm.FormatResponses,
			"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_up","status":"in_progress","output":[]}}`,
			"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"Hi"}`,
			"response.completed", `{"type":"response.completed","sequence_number":2,"response":{"id":"resp_up","status":"completed","output":[]}}`)},
		{name: "native-whole", body: rw, chunks: []llm.Chunk{{Format: llm.FormatResponses, Complete: true,
			Raw: []byte(`{"id":"resp_up","object":"response","status":"completed","output":[]}`)}}},
		{name: "native-midstream-error", body: rs, err: &llm.Error{Kind: llm.KindUpstreamRateLimited, Provider: "p", Message: "slow down"},
			chunks: nativeChunks(llm.FormatResponses, "response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_up"}}`)},
		// Cut after a finished call and half a message: the backend's response fails, with both.
		{name: "native-midstream-cut", body: rs, err: &llm.Error{Kind: llm.KindUpstreamTruncated, Provider: "p", Message: "the stream ended early"},
			chunks: nativeChunks(llm.FormatResponses,
				"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_up","object":"response","created_at":1767225000,"status":"in_progress","model":"gpt-up","output":[],"tools":[]}}`,
				"response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_up","object":"response","created_at":1767225000,"status":"in_progress","model":"gpt-up","output":[],"tools":[]}}`,
				"response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_up","type":"function_call","status":"in_progress","call_id":"call_up","name":"f","arguments":""}}`,
				"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_up","output_index":0,"delta":"{}"}`,
				"response.output_item.done", `{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"fc_up","type":"function_call","status":"completed","call_id":"call_up","name":"f","arguments":"{}"}}`,
				"response.output_item.added", `{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"msg_up","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
				"response.content_part.added", `{"type":"response.content_part.added","sequence_number":6,"item_id":"msg_up","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
				"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_up","output_index":1,"content_index":0,"delta":"Hel"}`,
				"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_up","output_index":1,"content_index":0,"delta":"lo"}`)},
	})
	run(t, "/v1/messages", "messages", []answerCase{
		{name: "text-stream", body: ms, chunks: structuredChunks},
		{name: "tools-stream", body: ms, chunks: parallelTools},
		{name: "tools-whole", body: mw, chunks: parallelTools},
		{name: "length-stream", body: ms, chunks: cutShort},
		{name: "raw-stream", body: ms, chunks: rawToolStream},
		{name: "raw-complete-whole", body: mw, chunks: rawCompletion},
		{name: "midstream-error", body: ms, chunks: structuredChunks[:3], err: upstreamBroke},
		{name: "whole-error", body: mw, chunks: structuredChunks[:3], err: &llm.Error{Kind: llm.KindRunTimeout, Provider: "p", Message: "too slow"}},
		{name: "queue-full", body: ms, refuse: queueFull},
		{name: "unavailable", body: mw, refuse: &llm.Error{Kind: llm.KindProviderUnavailable, Provider: "p", Message: "circuit open", RetryAfter: 20 * time.Second}},
		{name: "quota", body: mw, refuse: &llm.Error{Kind: llm.KindUpstreamQuota, Provider: "p", Message: "balance used up"}},
		{name: "invalid", body: `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`},
		{name: "invalid-tool-use-id", body: `{"model":"p/m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"done"}]}]}`},
		{name: "native-stream", body: ms, chunks: nativeChunks(llm.FormatMessages,
			"message_start", `{"type":"message_start","message":{"id":"msg_up","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`,
			"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
			"content_block_stop", `{"type":"content_block_stop","index":0}`,
			"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
			"message_stop", `{"type":"message_stop"}`)},
		{name: "native-whole", body: mw, chunks: []llm.Chunk{{Format: llm.FormatMessages, Complete: true,
			Raw: []byte(`{"id":"msg_up","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn"}`)}}},
	})
}

// TestMessagesAuth: /v1/messages takes x-api-key or a bearer token, and refuses in Anthropic's shape.
func TestMessagesAuth(t *testing.T) {
	s := New(Options{Gateway: stubGateway{&script{}}, Logger: zerolog.Nop(), APIKeys: []string{"k1"}})
	for _, tc := range []struct {
		header, value string
		status        int
	}{
		{"x-api-key", "k1", 200},
		{"Authorization", "Bearer k1", 200},
		{"x-api-key", "nope", 401},
		{"", "", 401},
	} {
		req := httptest.NewRequest("POST", "/v1/messages?beta=true", strings.NewReader(`{"model":"p/m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("anthropic-version", "2023-06-01")
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != tc.status {
			t.Errorf("%s %q: status %d, want %d: %s", tc.header, tc.value, w.Code, tc.status, w.Body)
		}
		if tc.status == 401 && !strings.Contains(w.Body.String(), `"type":"error","error":{"type":"authentication_error"`) {
			t.Errorf("%s %q: body %s is not Anthropic's error shape", tc.header, tc.value, w.Body)
		}
	}
}
