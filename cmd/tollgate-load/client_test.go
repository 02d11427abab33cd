package main

import (
	"net/http"
	"strings"
	"testing"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

const busyBody = `{"error":{"message":"queue full","type":"rate_limit_error","code":"provider_queue_full","param":null,"provider":"gpu","retry_after_ms":1000}}`

func TestCheckAnswer(t *testing.T) {
	good := []string{"X-Gateway-Queue-Ms", "12", "X-Request-Id", "abc"}
	busy := append(append([]string{}, good...), "Retry-After", "1", "retry-after-ms", "1000")
	chunk := `data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"hi"}}]}` + "\n\n"
	cases := []struct {
		name    string
		status  int
		h       http.Header
		body    string
		stream  bool
		code    string
		queueMs int64
		wantErr string // substring; "" means well-formed
	}{
		{"whole success", 200, hdr(good...), `{"object":"chat.completion","choices":[{}]}`, false, "", 12, ""},
		{"stream success", 200, hdr(good...), chunk + "data: [DONE]\n\n", true, "", 12, ""},
		{"stream with comments", 200, hdr(good...), ": ping\n\n" + chunk + "data: [DONE]\n\n", true, "", 12, ""},
		{"busy", 429, hdr(busy...), busyBody, false, "provider_queue_full", 12, ""},
		{"no queue header", 200, hdr("X-Request-Id", "a"), `{"object":"chat.completion","choices":[{}]}`, false, "", -1, "X-Gateway-Queue-Ms"},
		{"negative queue header", 200, hdr("X-Gateway-Queue-Ms", "-1", "X-Request-Id", "a"), `{}`, false, "", -1, "non-negative"},
		{"no request id", 200, hdr("X-Gateway-Queue-Ms", "0"), `{}`, false, "", 0, "X-Request-Id"},
		{"stream without done", 200, hdr(good...), chunk, true, "", 12, "[DONE]"},
		{"stream error event", 200, hdr(good...), chunk + `data: {"error":{"code":"upstream_error"}}` + "\n\n", true, "", 12, "error event"},
		{"stream data after done", 200, hdr(good...), chunk + "data: [DONE]\n\n" + chunk, true, "", 12, "after [DONE]"},
		{"stream half event", 200, hdr(good...), `data: {"object":"chat.comp` + "\n\ndata: [DONE]\n\n", true, "", 12, "not JSON"},
		{"whole not completion", 200, hdr(good...), `{"object":"list"}`, false, "", 12, "chat.completion"},
		{"busy without retry-after", 429, hdr(good...), busyBody, false, "provider_queue_full", 12, "Retry-After"},
		{"busy retry-after too long", 429, hdr(append(append([]string{}, good...), "Retry-After", "61", "retry-after-ms", "61000")...), busyBody, false, "provider_queue_full", 12, "1..60"},
		{"busy without ms header", 429, hdr(append(append([]string{}, good...), "Retry-After", "1")...), busyBody, false, "provider_queue_full", 12, "retry-after-ms"},
		{"busy body disagrees", 429, hdr(append(append([]string{}, good...), "Retry-After", "2", "retry-after-ms", "2000")...), busyBody, false, "provider_queue_full", 12, "differs"},
		{"busy unknown code", 429, hdr(busy...), strings.Replace(busyBody, "provider_queue_full", "slow_down", 1), false, "slow_down", 12, "unknown code"},
		{"busy wrong type", 429, hdr(busy...), strings.Replace(busyBody, "rate_limit_error", "api_error", 1), false, "provider_queue_full", 12, "type"},
		{"busy not json", 429, hdr(busy...), `busy`, false, "", 12, "not an OpenAI error"},
		{"other status", 502, hdr(good...), `{"error":{"code":"upstream_error"}}`, false, "upstream_error", 12, "status 502"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, code, err := checkAnswer(c.status, c.h, []byte(c.body), c.stream)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
			if code != c.code || q != c.queueMs {
				t.Errorf("code %q queue %d, want %q %d", code, q, c.code, c.queueMs)
			}
		})
	}
}

func TestOutcomeLabel(t *testing.T) {
	cases := []struct {
		o    outcome
		want string
	}{
		{outcome{status: 200}, "200"},
		{outcome{status: 429, code: "gateway_overloaded"}, "429 gateway_overloaded"},
		{outcome{cancelled: true}, "cancelled-before-headers"},
		{outcome{cancelled: true, gotHeader: true, status: 200}, "cancelled-after-headers"},
		{outcome{breach: "transport: refused"}, "transport-error"},
	}
	for _, c := range cases {
		if got := c.o.label(); got != c.want {
			t.Errorf("%+v: label %q, want %q", c.o, got, c.want)
		}
	}
}

func TestPeek(t *testing.T) {
	cases := []struct{ body, model, tag string }{
		{string(call{model: "qwen", tag: "b7"}.body()), "qwen", "b7"},
		{string(call{model: "m", tag: "x", hold: true}.body()), "m", "x"},
		{`{"model":"m","messages":[{"role":"user","content":"no tag here"}]}`, "m", ""},
		{`{"model":"m","messages":[{"role":"user","content":"tag:"}]}`, "m", ""},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"tag:z"}]}]}`, "m", ""},
		{`not json`, "", ""},
	}
	for _, c := range cases {
		model, tag := peek([]byte(c.body))
		if model != c.model || tag != c.tag {
			t.Errorf("peek(%s) = %q, %q; want %q, %q", c.body, model, tag, c.model, c.tag)
		}
	}
}

func FuzzCheckStream(f *testing.F) {
	f.Add([]byte(`data: {"object":"chat.completion.chunk"}` + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte(": comment\n\ndata: {\"error\":{}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := checkStream(body)
		// Whatever it says, a stream it accepts must end with [DONE].
		if err == nil && !strings.Contains(string(body), "[DONE]") {
			t.Fatalf("accepted a stream without [DONE]: %q", body)
		}
	})
}

func FuzzCheckBusy(f *testing.F) {
	f.Add([]byte(busyBody), "1", "1000")
	f.Add([]byte(`{"error":null}`), "0", "")
	f.Fuzz(func(t *testing.T, body []byte, ra, ms string) {
		code, err := checkBusy(hdr("Retry-After", ra, "retry-after-ms", ms), body)
		if err == nil && !busyCodes[code] {
			t.Fatalf("accepted unknown code %q", code)
		}
	})
}

func FuzzPeek(f *testing.F) {
	f.Add(call{model: "m", tag: "t1", hold: true}.body())
	f.Add([]byte(`{"messages":[{"content":"tag: "}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, tag := peek(body)
		if strings.ContainsAny(tag, " \t\n") {
			t.Fatalf("tag %q holds whitespace", tag)
		}
	})
}
