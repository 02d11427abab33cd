package fakellm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/sse"
)

// fixedNow makes answers byte-for-byte reproducible.
func fixedNow() time.Time { return time.Unix(1767225600, 0) }

func newTestServer(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	return New(opts)
}

// endpoint describes how to call one API in tests.
type endpoint struct {
	name string
	api  api
	path func(stream bool) string
	body func(model string, stream bool) string
}

var endpoints = []endpoint{
	{"chat", apiChat,
		func(bool) string { return "/v1/chat/completions" },
		func(model string, stream bool) string {
			return `{"model":"` + model + `","stream":` + boolStr(stream) +
				`,"messages":[{"role":"user","content":"say hi please"}]}`
		}},
	{"responses", apiResponses,
		func(bool) string { return "/v1/responses" },
		func(model string, stream bool) string {
			return `{"model":"` + model + `","stream":` + boolStr(stream) +
				`,"instructions":"be brief","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"say hi"}]}]}`
		}},
	{"anthropic", apiAnthropic,
		func(bool) string { return "/v1/messages?beta=true" },
		func(model string, stream bool) string {
			return `{"model":"` + model + `","max_tokens":32000,"stream":` + boolStr(stream) +
				`,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"say hi"}]},{"role":"system","content":"late system turn"}],` +
				`"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"context_management":{"edits":[]},"output_config":{"effort":"high"},"metadata":{"user_id":"u"}}`
		}},
	{"gemini", apiGemini,
		func(stream bool) string {
			if stream {
				return "/v1beta/models/MODEL:streamGenerateContent?alt=sse"
			}
			return "/v1beta/models/MODEL:generateContent"
		},
		func(string, bool) string {
			return `{"contents":[{"role":"user","parts":[{"text":"say hi"}]}],"systemInstruction":{"parts":[{"text":"be brief"}]}}`
		}},
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// request builds a request to ep for model, with modes in X-Fakellm-Mode when not empty.
func (ep endpoint) request(model string, stream bool, modes string) *http.Request {
	path := strings.Replace(ep.path(stream), "MODEL", model, 1)
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(ep.body(model, stream)))
	r.Header.Set("Content-Type", "application/json")
	if ep.api == apiAnthropic {
		r.Header.Set("Anthropic-Version", "2023-06-01")
		r.Header.Set("Anthropic-Beta", "claude-code-20250219,interleaved-thinking-2025-05-14")
	}
	if modes != "" {
		r.Header.Set("X-Fakellm-Mode", modes)
	}
	return r
}

// decoded is what a client makes of an answer.
type decoded struct {
	text      string
	reasoning string
	failed    bool // an in-stream error event/object was seen
	finished  bool // the end-of-answer marker was seen ([DONE], response.completed, message_stop, finishReason)
}

// decode reads an answer of api the way a client would, failing the test on anything a
// client could not parse.
func decode(t *testing.T, a api, stream bool, body []byte) decoded {
	t.Helper()
	var d decoded
	if !stream {
		decodeObject(t, a, body, &d, false)
		return d
	}
	if a == apiGemini && !bytes.HasPrefix(body, []byte("data:")) { // streamed JSON array
		var objs []json.RawMessage
		if err := json.Unmarshal(body, &objs); err != nil {
			t.Fatalf("gemini array: %v\n%s", err, body)
		}
		for _, o := range objs {
			decodeObject(t, a, o, &d, true)
		}
		return d
	}
	rd := sse.NewReader(bytes.NewReader(body))
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return d
		}
		if err != nil {
			t.Fatal(err)
		}
		if a == apiChat && string(ev.Data) == "[DONE]" {
			d.finished = true
			continue
		}
		if a == apiResponses || a == apiAnthropic {
			var typed struct{ Type string }
			if err := json.Unmarshal(ev.Data, &typed); err != nil || typed.Type != ev.Type {
				t.Fatalf("event %q has data type %q (%v): %s", ev.Type, typed.Type, err, ev.Data)
			}
		}
		decodeObject(t, a, ev.Data, &d, true)
	}
}

type chatMessage struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
}

func decodeObject(t *testing.T, a api, data []byte, d *decoded, chunk bool) {
	t.Helper()
	var v struct {
		Error   json.RawMessage
		Type    string
		Delta   json.RawMessage
		Choices []struct {
			Delta        chatMessage `json:"delta"`
			Message      chatMessage `json:"message"`
			FinishReason *string     `json:"finish_reason"`
		}
		Content []struct{ Type, Text, Thinking string }
		Output  []struct {
			Type    string
			Content []struct{ Text string }
			Summary []struct{ Text string }
		}
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text    string
					Thought bool
				}
			}
			FinishReason string
		}
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, data)
	}
	if len(v.Error) > 0 || v.Type == "error" || v.Type == "response.failed" {
		d.failed = true
		return
	}
	switch a {
	case apiChat:
		for _, c := range v.Choices {
			if chunk {
				d.text += c.Delta.Content
				d.reasoning += c.Delta.ReasoningContent + c.Delta.Reasoning
			} else {
				d.text += c.Message.Content
				d.reasoning += c.Message.ReasoningContent + c.Message.Reasoning
				d.finished = c.FinishReason != nil
			}
		}
	case apiResponses:
		switch {
		case !chunk:
			for _, o := range v.Output {
				for _, c := range o.Content {
					d.text += c.Text
				}
				for _, s := range o.Summary {
					d.reasoning += s.Text
				}
			}
			d.finished = true
		case v.Type == "response.output_text.delta":
			var e struct{ Delta string }
			json.Unmarshal(data, &e)
			d.text += e.Delta
		case v.Type == "response.reasoning_summary_text.delta":
			var e struct{ Delta string }
			json.Unmarshal(data, &e)
			d.reasoning += e.Delta
		case v.Type == "response.completed" || v.Type == "response.incomplete":
			d.finished = true
		}
	case apiAnthropic:
		switch {
		case !chunk:
			for _, c := range v.Content {
				d.text += c.Text
				d.reasoning += c.Thinking
			}
			d.finished = true
		case v.Type == "content_block_delta":
			var e struct {
				Delta struct{ Text, Thinking string }
			}
			json.Unmarshal(data, &e)
			d.text += e.Delta.Text
			d.reasoning += e.Delta.Thinking
		case v.Type == "message_stop":
			d.finished = true
		}
	case apiGemini:
		for _, c := range v.Candidates {
			for _, p := range c.Content.Parts {
				if p.Thought {
					d.reasoning += p.Text
				} else {
					d.text += p.Text
				}
			}
			if c.FinishReason != "" {
				d.finished = true
			}
		}
	}
}
