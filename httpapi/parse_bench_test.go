package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// The parse benchmarks decode and check a coding agent's request in each API the gateway
// serves: 40 turns around source code, about 200 KB, where a chat's own benchmarks send a
// line. A proxy only copies these bytes; the gateway decodes every message, and translates
// the Responses and Messages forms to chat. MB/s is of request body:
//
//	go test -run '^$' -bench BenchmarkParse -benchmem ./httpapi/

// agentFile is a turn's payload: source code, whose newlines, tabs and quotes are escapes
// in JSON, as they are in an agent's file reads and edits.
var agentFile = strings.Repeat("func main() {\n\tfmt.Println(\"hello, world\")\n}\n", 100)

func BenchmarkParseChat(b *testing.B) {
	var msgs []map[string]string
	for i := range 40 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": agentFile})
	}
	benchParse(b, map[string]any{"model": "p/m", "stream": true, "messages": msgs}, func(body []byte) *apiError {
		_, a := parseChat(body)
		return a
	})
}

// BenchmarkParseResponses: Codex's shape, instructions and developer text, then turns of a
// shell call, its output and the assistant's text in parts.
func BenchmarkParseResponses(b *testing.B) {
	r := httptest.NewRequest("POST", "/v1/responses", nil)
	benchParse(b, agentResponses(), func(body []byte) *apiError {
		_, a := parseResponses(body, r)
		return a
	})
}

// BenchmarkResponsesStart reads the same request and makes its answer's first response
// object, which echoes eight of the request's fields: what a Responses call costs before the
// backend is asked.
func BenchmarkResponsesStart(b *testing.B) {
	r := httptest.NewRequest("POST", "/v1/responses", nil)
	benchParse(b, agentResponses(), func(body []byte) *apiError {
		p, a := readResponses(body, r)
		if a != nil {
			return a
		}
		_ = newResponsesAnswer("id", p.req.Model, 0, p.req, p.echo).object("in_progress", nil)
		return nil
	})
}

// agentResponses is Codex's request of BenchmarkParseResponses.
func agentResponses() map[string]any {
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": agentFile}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "fix the build"}}},
	}
	for i := range 13 {
		id := "call_" + string(rune('a'+i))
		input = append(input,
			map[string]any{"type": "function_call", "call_id": id, "name": "shell", "arguments": `{"command":["bash","-lc","cat main.go"]}`},
			map[string]any{"type": "function_call_output", "call_id": id, "output": agentFile},
			map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": agentFile[:len(agentFile)/4]}}})
	}
	return map[string]any{"model": "p/m", "stream": true, "store": false, "instructions": agentFile, "input": input,
		"tools": []any{map[string]any{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object"}}}}
}

// BenchmarkParseMessages: Claude Code's shape, a system prompt in blocks, then turns of the
// assistant's text and a tool_use, and the user's tool_result holding a file.
func BenchmarkParseMessages(b *testing.B) {
	msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "fix the build"}}}}
	for i := range 19 {
		id := "toolu_" + string(rune('a'+i))
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": agentFile[:len(agentFile)/4]},
				map[string]any{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": "/src/main.go"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": agentFile}}})
	}
	body := map[string]any{"model": "p/m", "max_tokens": 32000, "stream": true, "messages": msgs,
		"system": []any{map[string]any{"type": "text", "text": agentFile}},
		"tools":  []any{map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object"}}}}
	r := httptest.NewRequest("POST", "/v1/messages", nil)
	benchParse(b, body, func(body []byte) *apiError {
		_, a := parseMessages(body, r)
		return a
	})
}

func benchParse(b *testing.B, v any, parse func([]byte) *apiError) {
	body, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if a := parse(body); a != nil {
			b.Fatal(a.message)
		}
	}
}
