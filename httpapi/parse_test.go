package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseChat(t *testing.T) {
	cases := []struct {
		body, param, msg string
	}{
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}]}`, "", ""},
		{`{"model":"a/b","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stop":"x"}`, "", ""},
		{``, "", "not valid JSON"},
		{`{"model":`, "", "not valid JSON"},
		{`"a string"`, "", "must be a JSON object"},
		{`null`, "", "must be a JSON object"},
		{`{"messages":[{"role":"user","content":"hi"}]}`, "model", "model"},
		{`{"model":"a/b"}`, "messages", "messages"},
		{`{"model":"a/b","messages":{}}`, "messages", "messages"},
		{`{"model":7,"messages":[]}`, "model", "field model: expected a string, got number"},
		{`{"model":"a/b","messages":[{"content":"hi"}]}`, "messages[0].role", "role is missing"},
		{`{"model":"a/b","messages":[{"role":"user","content":5}]}`, "messages.content", "field messages.content: expected a string or an array of content parts, got number"},
		{`{"model":"a/b","messages":{}}`, "messages", "field messages: expected an array, got object"},
		{`{"model":"a/b","messages":[{"role":5}]}`, "messages.role", "expected a string, got number"},
		{`{"model":"a/b","messages":[{"role":"user","content":[5]}]}`, "messages.content", "expected an object, got number"},
		{`{"model":"a/b","messages":[{"role":"user","content":[{"type":5}]}]}`, "messages.content.type", "expected a string, got number"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"stop":5}`, "stop", "field stop: expected a string or an array of strings, got number"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"stop":[5]}`, "stop", "field stop: expected a string, got number"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, "stream", "field stream: expected true or false, got string"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"stream_options":[]}`, "stream_options", "expected an object, got array"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":1.5}`, "max_tokens", "field max_tokens: expected an integer, got number 1.5"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":99999999999999999999}`, "max_tokens", "expected an integer"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"logprobs":5}`, "logprobs", "field logprobs: expected true or false, got number"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"tools":[{"function":{"name":3}}]}`, "tools.function.name", "expected a string, got number"},
		// The ranges OpenAI enforces.
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, "max_tokens", "max_tokens must be at least 1, got 0"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`, "max_tokens", "max_tokens must be at least 1, got -1"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":0}`, "max_completion_tokens", "at least 1, got 0"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"temperature":-5}`, "temperature", "temperature must be between 0 and 2, got -5"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"temperature":2.0001}`, "temperature", "between 0 and 2, got 2.0001"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"top_p":1.5}`, "top_p", "top_p must be between 0 and 1, got 1.5"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"n":1000}`, "n", "n must be between 1 and 128, got 1000"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"n":0}`, "n", "n must be between 1 and 128, got 0"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"presence_penalty":-2.5}`, "presence_penalty", "between -2 and 2, got -2.5"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"frequency_penalty":3}`, "frequency_penalty", "between -2 and 2, got 3"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"top_logprobs":21}`, "top_logprobs", "between 0 and 20, got 21"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"top_logprobs":-1}`, "top_logprobs", "between 0 and 20, got -1"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":1000000000000000000}`, "max_tokens", "max_tokens must be at most 2147483647, got 1000000000000000000"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2147483648}`, "max_completion_tokens", "at most 2147483647, got 2147483648"},
		// A tool message answers a call an earlier assistant message made.
		{`{"model":"a/b","messages":[{"role":"user","content":"ls"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_2","content":"a.txt"}]}`,
			"messages[2].tool_call_id", `messages[2].tool_call_id "call_2" names no tool call of an earlier assistant message`},
		{`{"model":"a/b","messages":[{"role":"user","content":"ls"},{"role":"tool","content":"a.txt"}]}`, "messages[1].tool_call_id", "is required in a tool message"},
		{`{"model":"a/b","messages":[{"role":"tool","tool_call_id":"call_1","content":"a.txt"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			"messages[0].tool_call_id", "names no tool call of an earlier assistant message"},
		{`{"model":"a/b","messages":[{"role":"user","content":"ls"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_2","content":"b"},{"role":"tool","tool_call_id":"call_1","content":"a"}]}`, "", ""},
		// An image's data: URI holds valid base64; other URLs are the backend's to fetch.
		{`{"model":"a/b","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,not base64!"}}]}]}`,
			"messages[0].content[0].image_url.url", "messages[0].content[0].image_url.url is a data: URI whose data is not valid base64"},
		{`{"model":"a/b","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64"}}]}]}`,
			"messages[0].content[0].image_url.url", "no comma"},
		{`{"model":"a/b","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"DATA:image/png;BASE64,iVBORw0KGgo"}},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, "", ""},
		// The edges are allowed, and so is null (the field's default).
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":2147483647,"max_completion_tokens":2147483647}`, "", ""},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"max_completion_tokens":1,"temperature":0,"top_p":1,"n":128,"presence_penalty":-2,"frequency_penalty":2,"logprobs":true,"top_logprobs":20}`, "", ""},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"temperature":2,"top_p":0,"n":1,"top_logprobs":0,"max_tokens":null,"temperature":null}`, "", ""},
		{`{"model":"a/b","stream":false,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "stream_options", "stream_options"},
		{`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, "temperature", "temperature"},
	}
	for _, tc := range cases {
		req, a := parseChat([]byte(tc.body))
		if tc.msg == "" {
			if a != nil {
				t.Errorf("%s: unexpected error %+v", tc.body, a)
			} else if req.Body == nil || req.Model != "a/b" {
				t.Errorf("%s: parsed %+v", tc.body, req)
			}
			continue
		}
		if a == nil {
			t.Errorf("%s: no error", tc.body)
			continue
		}
		if a.status != 400 || a.code != "invalid_request" || a.param != tc.param || !strings.Contains(a.message, tc.msg) {
			t.Errorf("%s: got %d %s param %q %q", tc.body, a.status, a.code, a.param, a.message)
		}
	}
}

// FuzzParseChat: any body either parses into a request with a model and messages, or yields a
// 400 naming what is wrong; it never panics.
func FuzzParseChat(f *testing.F) {
	f.Add([]byte(`{"model":"a/b","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"a/b","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`))
	f.Add([]byte(`{"model":"a/b","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,"}}]}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"n":2,"temperature":1.5,"top_logprobs":3,"stop":["x"]}`))
	f.Add([]byte(`{"model":"a/b","messages":[{"role":"user","content":[{"type":5}]}]}`))
	f.Add([]byte(`{"model":"a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":0,"top_p":7}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, a := parseChat(body)
		if a != nil {
			if a.status != 400 || a.message == "" {
				t.Fatalf("bad rejection %+v", a)
			}
			for _, goName := range []string{"llm.", "Go ", "int64", "float64", "[]", "map["} {
				if strings.Contains(a.message, goName) {
					t.Fatalf("rejection %q shows a Go type name (%q) for %q", a.message, goName, body)
				}
			}
			return
		}
		if req.Model == "" || len(req.Messages) == 0 || !json.Valid(req.Body) {
			t.Fatalf("accepted an incomplete request: %q", body)
		}
		if checkChatRanges(req) != nil {
			t.Fatalf("accepted a value out of range: %q", body)
		}
	})
}
