package fakellm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseModes(t *testing.T) {
	tests := []struct {
		in      string
		want    Modes
		wantErr bool
	}{
		{"", 0, false},
		{"hang", ModeHang, false},
		{"keepalive, split-utf8", ModeKeepalive | ModeSplitUTF8, false},
		{"reasoning+KEEPALIVE", ModeReasoning | ModeKeepalive, false},
		{"dashscope-200", ModeError200DashScope, false},
		{"qianfan-200,rate-limit", ModeError200Qianfan | ModeRateLimit, false},
		{"nope", 0, true},
		{"hang,", ModeHang, false},
	}
	for _, tt := range tests {
		got, err := ParseModes(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseModes(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	for _, name := range ModeNames() {
		m, err := ParseModes(name)
		if err != nil || m.String() != name {
			t.Errorf("mode %q round-trips to %q, %v", name, m.String(), err)
		}
	}
	if len(ModeNames()) != len(modeNames) {
		t.Errorf("ModeNames has %d names, modeNames %d", len(ModeNames()), len(modeNames))
	}
}

func TestModesFromModel(t *testing.T) {
	tests := []struct {
		model   string
		want    Modes
		wantErr bool
	}{
		{"gpt-x", 0, false},
		{"quirk-rate-limit", ModeRateLimit, false},
		{"quirk-dashscope-200", ModeError200DashScope, false},
		{"models/quirk-hang", ModeHang, false},
		{"quirk-keepalive+reasoning", ModeKeepalive | ModeReasoning, false},
		{"quirk-bogus", 0, true},
		{"my-quirk-rate-limit", 0, false},
	}
	for _, tt := range tests {
		got, err := modesFromModel(tt.model)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("modesFromModel(%q) = %v, %v; want %v, error %v", tt.model, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestQuirkErrors checks every mode that answers with an error before the stream, on every
// endpoint, streaming or not.
func TestQuirkErrors(t *testing.T) {
	type want struct {
		status int
		ctype  string
		body   string // a substring of the body
		header map[string]string
	}
	expect := func(mode string, a api, stream bool) want {
		switch mode {
		case "rate-limit":
			w := want{429, "application/json", `"rate_limit_exceeded"`, map[string]string{"Retry-After": "2", "Retry-After-Ms": "2000"}}
			switch a {
			case apiAnthropic:
				w.body = `"type":"rate_limit_error"`
			case apiGemini:
				w.body = `"status":"RESOURCE_EXHAUSTED"`
			}
			return w
		case "overloaded":
			switch a {
			case apiAnthropic:
				return want{529, "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}`, nil}
			case apiGemini:
				return want{503, "application/json", `"status":"UNAVAILABLE"`, nil}
			}
			return want{503, "application/json", `"type":"server_error"`, nil}
		case "quota":
			switch a {
			case apiAnthropic:
				return want{402, "application/json", `"billing_error"`, map[string]string{"X-Should-Retry": "false"}}
			case apiGemini:
				return want{429, "application/json", `PerDay`, nil}
			}
			return want{429, "application/json", `"code":"insufficient_quota"`, map[string]string{"X-Should-Retry": "false"}}
		case "quota-402":
			return want{402, "application/json", `"Insufficient Balance"`, nil}
		case "gemini-nested-error":
			return want{429, "application/json", `"retryDelay":"7s"`, nil}
		case "gemini-daily-quota":
			return want{429, "application/json", `GenerateRequestsPerDayPerProjectPerModel`, nil}
		case "error-200-dashscope":
			if stream {
				return want{200, "text/event-stream", "event:error\n:HTTP_STATUS/429\ndata:{", nil}
			}
			return want{200, "application/json", `"code":"Throttling.RateQuota"`, nil}
		case "error-200-qianfan":
			return want{200, "application/json", `{"error_code":18,"error_msg":"Open api qps request limit reached"}`, nil}
		case "garbage":
			if stream {
				return want{200, "text/event-stream", "data: <html>", nil}
			}
			return want{200, "application/json", "<html>", nil}
		}
		t.Fatalf("no expectation for %s", mode)
		return want{}
	}
	modes := []string{"rate-limit", "overloaded", "quota", "quota-402", "gemini-nested-error",
		"gemini-daily-quota", "error-200-dashscope", "error-200-qianfan", "garbage"}
	for _, ep := range endpoints {
		for _, mode := range modes {
			for _, stream := range []bool{false, true} {
				t.Run(ep.name+"/"+mode+"/"+boolStr(stream), func(t *testing.T) {
					w := expect(mode, ep.api, stream)
					// Select the mode by model name, the way a gateway config would.
					rec := httptest.NewRecorder()
					srv := newTestServer(Options{})
					srv.ServeHTTP(rec, ep.request("quirk-"+mode, stream, ""))
					if rec.Code != w.status || rec.Header().Get("Content-Type") != w.ctype {
						t.Fatalf("status %d %q, want %d %q; body %s", rec.Code, rec.Header().Get("Content-Type"), w.status, w.ctype, rec.Body)
					}
					if !strings.Contains(rec.Body.String(), w.body) {
						t.Errorf("body %s does not contain %s", rec.Body, w.body)
					}
					for k, v := range w.header {
						if got := rec.Header().Get(k); got != v {
							t.Errorf("header %s = %q, want %q", k, got, v)
						}
					}
					if mode != "garbage" && !strings.HasPrefix(w.ctype, "text/") && !json.Valid(rec.Body.Bytes()) {
						t.Errorf("error body is not JSON: %s", rec.Body)
					}
					if st := srv.Stats(); st.Completed != 1 || st.Requests != 1 {
						t.Errorf("stats %+v", st)
					}
				})
			}
		}
	}
}

// TestSuccessModes runs the modes that still deliver the answer through a client-side decode:
// the text must arrive whole, whatever the framing quirks.
func TestSuccessModes(t *testing.T) {
	tests := []struct {
		mode      string
		reasoning bool
		reply     string
	}{
		{"", false, defaultReplyWords(20)},
		{"keepalive", false, defaultReplyWords(20)},
		{"split-utf8", false, strings.Join(cycle(cjkReply, 20), "")},
		{"slow-drip", false, defaultReplyWords(20)},
		{"reasoning", true, defaultReplyWords(20)},
		{"ollama-reasoning", true, defaultReplyWords(20)},
		{"keepalive,split-utf8,reasoning", true, strings.Join(cycle(cjkReply, 20), "")},
	}
	for _, ep := range endpoints {
		for _, tt := range tests {
			for _, stream := range []bool{false, true} {
				if tt.mode == "ollama-reasoning" && ep.api != apiChat {
					continue
				}
				t.Run(ep.name+"/"+tt.mode+"/"+boolStr(stream), func(t *testing.T) {
					rec := httptest.NewRecorder()
					srv := newTestServer(Options{})
					srv.ServeHTTP(rec, ep.request("fake-model", stream, tt.mode))
					if rec.Code != http.StatusOK {
						t.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
					d := decode(t, ep.api, stream, rec.Body.Bytes())
					if d.text != tt.reply || d.failed || !d.finished {
						t.Errorf("decoded %+v, want text %q", d, tt.reply)
					}
					if tt.reasoning != (d.reasoning == defaultThoughts) {
						t.Errorf("reasoning %q, want it: %v", d.reasoning, tt.reasoning)
					}
					if stream && strings.Contains(tt.mode, "keepalive") {
						// one comment between every two chunks
						n := strings.Count(rec.Body.String(), ": keep-alive\n\n")
						want := 19
						if tt.reasoning {
							want += len(tokenize(defaultThoughts))
						}
						if n != want {
							t.Errorf("%d keep-alive comments, want %d", n, want)
						}
					}
					if !stream && strings.Contains(tt.mode, "keepalive") && !bytes.HasPrefix(rec.Body.Bytes(), []byte("\n\n\n{")) {
						t.Errorf("non-streaming keepalive body does not start with blank lines: %.20q", rec.Body)
					}
				})
			}
		}
	}
}

func defaultReplyWords(n int) string { return strings.Join(cycle(tokenize(defaultReply), n), "") }

// TestMidstreamError checks each endpoint's error event after a few chunks.
func TestMidstreamError(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			srv := newTestServer(Options{})
			srv.ServeHTTP(rec, ep.request("quirk-error-midstream", true, ""))
			d := decode(t, ep.api, true, rec.Body.Bytes())
			if rec.Code != 200 || !d.failed || d.finished || d.text != defaultReplyWords(midstreamAfter) {
				t.Fatalf("status %d decoded %+v; body:\n%s", rec.Code, d, rec.Body)
			}
			// Non-streaming: the whole request fails.
			rec = httptest.NewRecorder()
			srv.ServeHTTP(rec, ep.request("quirk-error-midstream", false, ""))
			if rec.Code != http.StatusInternalServerError || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("non-streaming: status %d body %s", rec.Code, rec.Body)
			}
		})
	}
}

// writeLog is a ResponseWriter that records every flushed write separately.
type writeLog struct {
	*httptest.ResponseRecorder
	writes  [][]byte
	pending []byte
}

func (w *writeLog) Write(b []byte) (int, error) {
	w.pending = append(w.pending, b...)
	return w.ResponseRecorder.Write(b)
}

func (w *writeLog) Flush() {
	if len(w.pending) > 0 {
		w.writes = append(w.writes, w.pending)
		w.pending = nil
	}
	w.ResponseRecorder.Flush()
}

func TestSplitUTF8Writes(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			w := &writeLog{ResponseRecorder: httptest.NewRecorder()}
			newTestServer(Options{}).ServeHTTP(w, ep.request("quirk-split-utf8", true, ""))
			cut := 0
			for _, b := range w.writes {
				if !utf8.Valid(b) {
					cut++
				}
			}
			if cut < 20 || !utf8.Valid(w.Body.Bytes()) {
				t.Fatalf("%d of %d flushed writes cut a character; want every content chunk cut", cut, len(w.writes))
			}
		})
	}
}

func TestSlowDripWrites(t *testing.T) {
	w := &writeLog{ResponseRecorder: httptest.NewRecorder()}
	newTestServer(Options{Chunks: 2}).ServeHTTP(w, endpoints[0].request("quirk-slow-drip", true, ""))
	if len(w.writes) != w.Body.Len() || len(w.writes) < 100 {
		t.Fatalf("%d flushes for %d bytes, want one per byte", len(w.writes), w.Body.Len())
	}
	if d := decode(t, apiChat, true, w.Body.Bytes()); d.text != defaultReplyWords(2) || !d.finished {
		t.Fatalf("decoded %+v", d)
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		name, path, body, mode string
		status                 int
	}{
		{"invalid json", "/v1/chat/completions", `{"model":`, "", 400},
		{"unknown mode header", "/v1/chat/completions", `{"model":"m"}`, "bogus", 400},
		{"unknown quirk model", "/v1/messages", `{"model":"quirk-bogus","max_tokens":1}`, "", 400},
		{"gemini bad method", "/v1beta/models/m:explode", `{}`, "", 404},
		{"gemini no method", "/v1beta/models/m", `{}`, "", 404},
		{"wrong method", "/v1/models", ``, "", 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := http.MethodPost
			r := httptest.NewRequest(method, tt.path, strings.NewReader(tt.body))
			if tt.mode != "" {
				r.Header.Set("X-Fakellm-Mode", tt.mode)
			}
			rec := httptest.NewRecorder()
			newTestServer(Options{}).ServeHTTP(rec, r)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
		})
	}
}
