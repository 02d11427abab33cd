package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestBodySpace: a request body may have JSON's white space (space, tab, CR, LF) around its
// object and nothing else, as encoding/json decides; a vertical tab, a form feed, a no-break
// space, NEL, a line separator or a byte order mark around it is malformed JSON, a 400 in
// every format (SPEC §errors).
func TestBodySpace(t *testing.T) {
	formats := []struct {
		name  string
		body  string
		parse func([]byte) (*llm.Request, *apiError)
	}{
		{"chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, parseChat},
		{"responses", `{"model":"m","input":"hi"}`, func(b []byte) (*llm.Request, *apiError) {
			return parseResponses(b, httptest.NewRequest("POST", "/v1/responses", nil))
		}},
		{"messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, func(b []byte) (*llm.Request, *apiError) {
			return parseMessages(b, httptest.NewRequest("POST", "/v1/messages", nil))
		}},
		{"embeddings", `{"model":"m","input":"hi"}`, parseEmbeddings},
		{"completions", `{"model":"m","prompt":"hi"}`, parseCompletions},
	}
	for _, f := range formats {
		for _, tt := range []struct {
			before, after string
		}{
			{"", ""}, {" \t\r\n", "\r\n"}, {"\v", ""}, {"", "\f"}, {"\u00a0", ""}, {"", "\u00a0"},
			{"\u0085", ""}, {"", "\u2028"}, {"\ufeff", ""},
		} {
			body := []byte(tt.before + f.body + tt.after)
			want := json.Valid(body) // encoding/json's decision on the body as it came
			req, a := f.parse(body)
			switch {
			case want && a != nil:
				t.Errorf("%s %q: refused (%s), encoding/json takes it", f.name, body, a.message)
			case !want && a == nil:
				t.Errorf("%s %q: accepted (model %q), but it is not JSON", f.name, body, req.Model)
			case !want && (a.status != 400 || a.code != "invalid_request"):
				t.Errorf("%s %q: %d %s, want 400 invalid_request", f.name, body, a.status, a.code)
			}
		}
	}
}
