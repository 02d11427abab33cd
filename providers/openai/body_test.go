package openai

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestRequestBodyEdges(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		stream  bool
		usage   bool
		want    string
		wantErr bool
	}{
		{"empty object", `{}`, false, false, `{"model":"m"}`, false},
		{"empty object stream", `{ }`, true, false, `{ "model":"m","stream_options":{"include_usage":true}}`, false},
		{"duplicate model keys", `{"model":"a","model":"b"}`, false, false, `{"model":"m","model":"m"}`, false},
		{"nested model untouched", `{"x":{"model":"keep"},"model":"a"}`, false, false, `{"x":{"model":"keep"},"model":"m"}`, false},
		{"stream_options null", `{"model":"a","stream_options":null}`, true, false, `{"model":"m","stream_options":{"include_usage":true}}`, false},
		{"stream_options empty", `{"model":"a","stream_options":{}}`, true, false, `{"model":"m","stream_options":{"include_usage":true}}`, false},
		{"client asked usage", `{"model":"a","stream_options":{"include_usage":true}}`, true, true, `{"model":"m","stream_options":{"include_usage":true}}`, false},
		{"array body", `[1]`, false, false, "", true},
		{"trailing garbage", `{"model":"a"} x`, false, false, "", true},
		{"truncated", `{"model":"a"`, false, false, "", true},
		{"trailing vertical tab", "{}\v", false, false, "", true}, // found by FuzzSetMember
		{"trailing JSON whitespace", "{} \r\n", false, false, "{\"model\":\"m\"} \r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &llm.Request{Model: "m", Stream: tt.stream, Body: []byte(tt.body)}
			if tt.usage {
				req.StreamOptions = &llm.StreamOptions{IncludeUsage: true}
			}
			got, err := requestBody(req)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("body = %s, want %s", got, tt.want)
			}
			if string(req.Body) != tt.body {
				t.Errorf("client body modified: %s", req.Body)
			}
		})
	}
}

func TestParseErrorShapes(t *testing.T) {
	tests := []struct {
		body     string
		isErr    bool
		wantKind llm.Kind
		code     string
	}{
		{`{"error":{"message":"m","code":"rate_limit_exceeded"}}`, true, llm.KindUpstreamRateLimited, "rate_limit_exceeded"},
		{`{"error":{"message":"m","code":429}}`, true, llm.KindUpstream, "429"},
		{`{"error":"plain text"}`, true, llm.KindUpstream, ""},
		{`{"error":null,"choices":[]}`, false, 0, ""},
		{`{"code":"Throttling","message":"slow"}`, true, llm.KindUpstreamRateLimited, "Throttling"},
		{`{"code":"Throttling.AllocationQuota","message":"q"}`, true, llm.KindUpstreamQuota, "Throttling.AllocationQuota"},
		{`{"code":"PrepaidBillOverdue","message":"q"}`, true, llm.KindUpstreamQuota, "PrepaidBillOverdue"},
		{`{"code":"ModelUnavailable","message":"down"}`, true, llm.KindProviderUnavailable, "ModelUnavailable"},
		{`{"code":200,"choices":[{"index":0}]}`, false, 0, ""},
		{`{"code":"","message":"x"}`, false, 0, ""},
		{`{"error_code":0,"result":"ok"}`, false, 0, ""},
		{`{"error_code":2,"error_msg":"unavailable"}`, true, llm.KindProviderUnavailable, "2"},
		{`{"error_code":4,"error_msg":"cluster"}`, true, llm.KindUpstreamRateLimited, "4"},
		{`{"error_code":19,"error_msg":"total"}`, true, llm.KindUpstreamQuota, "19"},
		{`{"error_code":336003,"error_msg":"param"}`, true, llm.KindUpstreamInvalid, "336003"},
		{`{"error_code":110,"error_msg":"token"}`, true, llm.KindUpstreamAuth, "110"},
		{`{"id":"c","choices":[{"delta":{"content":"say \"error\": and \"code\""}}]}`, false, 0, ""},
	}
	c := &Client{name: "p"}
	for _, tt := range tests {
		be, ok := parseError([]byte(tt.body))
		if ok != tt.isErr {
			t.Errorf("parseError(%s) ok = %v, want %v", tt.body, ok, tt.isErr)
			continue
		}
		if !ok {
			continue
		}
		e := c.bodyError(nil, be)
		if e.Kind != tt.wantKind || e.UpstreamCode != tt.code {
			t.Errorf("parseError(%s) → kind %v code %q, want %v %q", tt.body, e.Kind, e.UpstreamCode, tt.wantKind, tt.code)
		}
	}
}

func TestInspect(t *testing.T) {
	tests := []struct {
		raw       string
		finish    llm.FinishReason
		usageOnly bool
		prompt    int
	}{
		{`{"choices":[{"delta":{"content":"x"},"finish_reason":null}],"usage":null}`, "", false, 0},
		{`{"choices":[{"delta":{},"finish_reason" : "length"}]}`, llm.FinishLength, false, 0},
		{`{"choices":[],"usage" : {"prompt_tokens":5}}`, "", true, 5},
		{`{"choices":null,"usage":{"prompt_tokens":6}}`, "", true, 6},
		{`{"usage":{"prompt_tokens":7}}`, "", true, 7},
		{`{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8}}`, llm.FinishStop, false, 8},
		{`{"choices":[{"delta":{"content":"\"usage\":{ \"finish_reason\":\"stop\""}}]}`, "", false, 0},
		{`{"choices":[],"usage":{"prompt_tokens":"many"}}`, "", false, 0},
	}
	for _, tt := range tests {
		ch := llm.Chunk{Raw: []byte(tt.raw)}
		f, ok := scanFrame(ch.Raw)
		if !ok {
			t.Fatalf("scanFrame(%s): not a JSON object", tt.raw)
		}
		inspect(&ch, &f)
		prompt := 0
		if ch.Usage != nil {
			prompt = ch.Usage.PromptTokens
		}
		if ch.FinishReason != tt.finish || ch.UsageOnly != tt.usageOnly || prompt != tt.prompt {
			t.Errorf("inspect(%s) = finish %q usageOnly %v prompt %d", tt.raw, ch.FinishReason, ch.UsageOnly, prompt)
		}
	}
}

func TestRenameReasoning(t *testing.T) {
	tests := []struct{ in, field, want string }{
		{`{"choices":[{"delta":{"reasoning":"r <x>"}}]}`, "delta", `{"choices":[{"delta":{"reasoning_content":"r <x>"}}]}`},
		{`{"choices":[{"delta":{"reasoning":"a","reasoning_content":"b"}}]}`, "delta", `{"choices":[{"delta":{"reasoning_content":"b"}}]}`},
		{`{"choices":[{"delta":{"content":"\"reasoning\""}}]}`, "delta", `{"choices":[{"delta":{"content":"\"reasoning\""}}]}`},
		{`{"choices":[{"message":{"reasoning":"r"}}]}`, "message", `{"choices":[{"message":{"reasoning_content":"r"}}]}`},
		{`{"choices":"odd"}`, "delta", `{"choices":"odd"}`},
	}
	for _, tt := range tests {
		if got := string(renameReasoning([]byte(tt.in), tt.field)); got != tt.want {
			t.Errorf("renameReasoning(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// BenchmarkRequestBody is the body of a large request for the backend: translated (a
// Messages or Responses request, encoded from the chat form) and as chat (the client's body
// with "model" replaced), each one user message of 7.7 MB of source-like text with escapes,
// as `tollgate-bench burst` sends.
func BenchmarkRequestBody(b *testing.B) {
	line := "\tif err := json.Unmarshal(b, &v); err != nil { return fmt.Errorf(\"decode %q: %w\", name, err) }\n"
	text := strings.Repeat(line, 7_700_000/len(line))
	translated := &llm.Request{Model: "m", MaxTokens: new(64), Messages: []llm.Message{
		{Role: "system", Content: llm.Content{Text: "You are a coding agent."}},
		{Role: "user", Content: llm.Content{Text: text}},
	}}
	chat, err := requestBody(translated)
	if err != nil {
		b.Fatal(err)
	}
	translated.Native = &llm.Native{Format: llm.FormatMessages, Body: chat} // about as long
	for _, c := range []struct {
		name string
		req  *llm.Request
	}{{"translated", translated}, {"chat", &llm.Request{Model: "m", Body: chat}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := requestBody(c.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
