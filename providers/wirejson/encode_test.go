package wirejson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// FuzzEncode holds Encode to encoding/json, the encoder whose bytes backends have received: a
// chat request decoded from body, with text in every place a string goes (contents, parts,
// names, arguments), encodes to the same bytes as an Encoder with SetEscapeHTML(false) writes.
func FuzzEncode(f *testing.F) {
	for _, s := range []struct{ body, text string }{
		{`{"model":"m","messages":[{"role":"user","content":"Hi <there> & you"}],"stream":true,"temperature":0.2,"max_tokens":64,"stop":"END","tools":[{"type":"function","function":{"name":"get_time","parameters":{"type" : "object","d":"<a&b>"}}}],"tool_choice":"auto"}`, "x"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\u2028b\u2029"},{"type":"image_url","image_url":{"url":"https://x/?a=1&b=2","detail":"low"}}]}]}`, "é\t\"q\"\\\b\f\x01\x7f"},
		{`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":\"<b>\"}"}}],"reasoning_content":"r & s"}],"temperature":1e-7,"top_p":1e21,"presence_penalty":-0.0}`, "\xff\xfe bad"},
		{`{"model":"m","messages":[],"response_format":{"type":"json_schema","x":"\u003c\ud83d\ude00"},"n":2,"logprobs":false,"parallel_tool_calls":true}`, "\u2028"},
		{`{"model":"m","messages":[{"role":"user","content":[]}],"user":"<u>"}`, ""},
		{`{"model":"m"}`, "\xed\xa0\xbd"}, // a lone surrogate, as WTF-8
	} {
		f.Add([]byte(s.body), s.text)
	}
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		var req llm.Request
		if json.Unmarshal(body, &req) != nil {
			return
		}
		req.Messages = append(req.Messages,
			llm.Message{Role: "user", Content: llm.Content{Text: text}, Name: text},
			llm.Message{Role: "user", Content: llm.Content{Parts: []llm.Part{{Type: "text", Text: text},
				{Type: "image_url", ImageURL: &llm.ImageURL{URL: "data:" + text}}}}},
			llm.Message{Role: "assistant", ReasoningContent: text,
				ToolCalls: []llm.ToolCall{{ID: text, Type: "function", Function: llm.FunctionCall{Name: "f", Arguments: text}}}})
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		wantErr := enc.Encode(&req)
		got, err := Encode(&req, len(body))
		switch {
		case (err != nil) != (wantErr != nil):
			t.Fatalf("Encode: error %v; encoding/json: %v", err, wantErr)
		case err == nil && !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte("\n"))):
			t.Fatalf("Encode:\n%s\nencoding/json:\n%s", got, want.Bytes())
		}
	})
}
