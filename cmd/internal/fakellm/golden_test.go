package fakellm

import (
	"bytes"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/fakellm")

// goldenDir is the repository's top-level testdata/fakellm.
var goldenDir = filepath.Join("..", "..", "..", "testdata", "fakellm")

// TestGolden pins whole transcripts byte for byte: status, the headers clients act on, body.
// Run with -update to rewrite them after an intended change, then review the diff.
func TestGolden(t *testing.T) {
	tests := []struct {
		name, path, body string
		header           map[string]string
		opts             Options
	}{
		{name: "openai_stream_usage", path: "/v1/chat/completions", opts: Options{Chunks: 4},
			body: `{"model":"fake-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"say hi"}]}`},
		{name: "openai_stream_length", path: "/v1/chat/completions", opts: Options{Chunks: 4},
			body: `{"model":"fake-model","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"say hi"}]}`},
		{name: "openai_whole_reasoning", path: "/v1/chat/completions", opts: Options{Chunks: 3},
			body: `{"model":"quirk-reasoning","messages":[{"role":"user","content":[{"type":"text","text":"say hi"}]}]}`},
		{name: "openai_stream_ollama_reasoning", path: "/v1/chat/completions", opts: Options{Chunks: 2, Reply: "Hi there!"},
			header: map[string]string{"X-Fakellm-Mode": "ollama-reasoning"},
			body:   `{"model":"llama","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "openai_stream_midstream", path: "/v1/chat/completions", opts: Options{Chunks: 5},
			body: `{"model":"quirk-error-midstream","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "openai_stream_keepalive_utf8", path: "/v1/chat/completions", opts: Options{Chunks: 3},
			body: `{"model":"quirk-keepalive+split-utf8","stream":true,"messages":[{"role":"user","content":"你好"}]}`},
		{name: "responses_stream", path: "/v1/responses", opts: Options{Chunks: 3},
			body: `{"model":"gpt-x","stream":true,"instructions":"be brief","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"say hi"}]}],"tools":[],"store":false}`},
		{name: "responses_stream_reasoning", path: "/v1/responses", opts: Options{Chunks: 2, Reply: "Hi there!"},
			body: `{"model":"gpt-x","stream":true,"input":"hi","reasoning":{"effort":"low","summary":"auto"}}`},
		{name: "responses_stream_failed", path: "/v1/responses", opts: Options{Chunks: 4},
			body: `{"model":"quirk-error-midstream","stream":true,"input":"hi"}`},
		{name: "anthropic_stream_thinking", path: "/v1/messages?beta=true", opts: Options{Chunks: 3},
			header: map[string]string{"Anthropic-Beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"},
			body: `{"model":"claude-x","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are Claude Code."}],` +
				`"messages":[{"role":"user","content":[{"type":"text","text":"say hi"}]},{"role":"system","content":"reminder"}],` +
				`"thinking":{"type":"enabled","budget_tokens":31999},"tools":[{"name":"Bash","description":"run","input_schema":{"type":"object"}}],` +
				`"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"output_config":{"effort":"high"},"metadata":{"user_id":"u1"}}`},
		{name: "anthropic_whole", path: "/v1/messages", opts: Options{Chunks: 3},
			body: `{"model":"claude-x","max_tokens":2,"messages":[{"role":"user","content":"say hi"}]}`},
		{name: "anthropic_stream_midstream", path: "/v1/messages", opts: Options{Chunks: 4},
			body: `{"model":"quirk-error-midstream","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "gemini_stream_sse", path: "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", opts: Options{Chunks: 3},
			body: `{"contents":[{"role":"user","parts":[{"text":"say hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`},
		{name: "gemini_stream_array", path: "/v1beta/models/gemini-x:streamGenerateContent", opts: Options{Chunks: 2},
			body: `{"contents":[{"role":"user","parts":[{"text":"say hi"}]}]}`},
		{name: "gemini_whole", path: "/v1beta/models/gemini-x:generateContent", opts: Options{Chunks: 3},
			body: `{"contents":[{"role":"user","parts":[{"text":"say hi"}]}],"generationConfig":{"maxOutputTokens":2}}`},
		{name: "dashscope_stream", path: "/v1/chat/completions",
			body: `{"model":"quirk-error-200-dashscope","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "gemini_nested_error", path: "/v1beta/models/quirk-gemini-nested-error:generateContent", body: `{}`},
		// tool-call mode: an agent's first turn is a call of its shell tool, the next (with
		// the tool's output) an answer saying it came back.
		{name: "tool_call_chat_stream", path: "/v1/chat/completions", opts: Options{Modes: ModeToolCall},
			body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"exec_command"}}],"messages":[{"role":"user","content":"list"}]}`},
		{name: "tool_call_chat_whole", path: "/v1/chat/completions", opts: Options{Modes: ModeToolCall},
			body: `{"model":"m","tools":[{"type":"function","function":{"name":"Bash"}}],"messages":[{"role":"user","content":"list"}]}`},
		{name: "tool_call_chat_result", path: "/v1/chat/completions", opts: Options{Modes: ModeToolCall, Chunks: 3},
			body: `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"Bash"}}],"messages":[{"role":"user","content":"list"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"Bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"tollgate-tool-ok\n"}]}`},
		{name: "tool_call_responses_stream", path: "/v1/responses", opts: Options{Modes: ModeToolCall},
			body: `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":"list"}`},
		{name: "tool_call_responses_result", path: "/v1/responses", opts: Options{Modes: ModeToolCall, Chunks: 3},
			body: `{"model":"m","tools":[{"type":"function","name":"exec_command"}],"input":[{"role":"user","content":"list"},` +
				`{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"Output:\ntollgate-tool-ok"}]}`},
		{name: "tool_call_anthropic_stream", path: "/v1/messages", opts: Options{Modes: ModeToolCall},
			body: `{"model":"m","max_tokens":100,"stream":true,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"list"}]}`},
		{name: "tool_call_anthropic_result", path: "/v1/messages", opts: Options{Modes: ModeToolCall, Chunks: 3},
			body: `{"model":"m","max_tokens":100,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"list"},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"nothing"}]}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tt.path, strings.NewReader(tt.body))
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			newTestServer(tt.opts).ServeHTTP(rec, r)
			got := transcript(rec)
			file := filepath.Join(goldenDir, tt.name+".golden")
			if *update {
				if err := os.MkdirAll(goldenDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("transcript differs from %s:\n--- got\n%s\n--- want\n%s", file, got, want)
			}
		})
	}
}

// transcript renders a response as the status, the headers that matter, a blank line, the body.
func transcript(rec *httptest.ResponseRecorder) []byte {
	var b bytes.Buffer
	b.WriteString("HTTP " + http.StatusText(rec.Code) + "\n")
	var keys []string
	for k := range rec.Header() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + ": " + strings.Join(rec.Header()[k], ", ") + "\n")
	}
	b.WriteString("\n")
	b.Write(rec.Body.Bytes())
	return b.Bytes()
}
