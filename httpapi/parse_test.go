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
		{`{"model":7,"messages":[]}`, "model", "expected string"},
		{`{"model":"a/b","messages":[{"content":"hi"}]}`, "messages[0].role", "role is missing"},
		{`{"model":"a/b","messages":[{"role":"user","content":5}]}`, "", "content"},
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
	f.Fuzz(func(t *testing.T, body []byte) {
		req, a := parseChat(body)
		if a != nil {
			if a.status != 400 || a.message == "" {
				t.Fatalf("bad rejection %+v", a)
			}
			return
		}
		if req.Model == "" || len(req.Messages) == 0 || !json.Valid(req.Body) {
			t.Fatalf("accepted an incomplete request: %q", body)
		}
	})
}
