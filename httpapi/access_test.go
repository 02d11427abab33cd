package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestEveryAnswerIsLogged: every answered request leaves exactly one log line with its
// status, its route (or, unrouted, its path without the query), its request id and no key;
// model requests refused before the handler (auth) reach the observer too.
func TestEveryAnswerIsLogged(t *testing.T) {
	const apiKey, adminKey = "sk-client-LOGKEY-0001", "sk-admin-LOGKEY-0002"
	var logs bytes.Buffer
	var seen []Outcome
	s := New(Options{Gateway: stubGateway{&script{chunks: []llm.Chunk{{Content: "hi"}}}},
		APIKeys: []string{apiKey}, AdminKeys: []string{adminKey},
		State: func() any { return map[string]int{"running": 0} }, Metrics: http.NotFoundHandler(),
		Observe: func(o Outcome) { seen = append(seen, o) }, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	body := `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		method, path, key string
		status            int
		msg, route, code  string // route "" → the line has the path instead
		level             string
	}{
		{"GET", "/nope?key=" + apiKey, "", 404, "http", "", "not_found", "info"},
		{"DELETE", "/v1/models", apiKey, 405, "http", "", "method_not_allowed", "info"},
		{"POST", "/v1/chat/completions", "", 401, "http", "/v1/chat/completions", "invalid_api_key", "info"},
		{"POST", "/v1/chat/completions", "Bearer wrong-" + apiKey, 401, "http", "/v1/chat/completions", "invalid_api_key", "info"},
		{"POST", "/v1/chat/completions", apiKey, 200, "chat", "/v1/chat/completions", "", "info"},
		{"GET", "/v1/models", apiKey, 200, "http", "/v1/models", "", "info"},
		{"GET", "/v1/models/p/m", apiKey, 404, "http", "/v1/models/*id", "model_not_found", "info"},
		{"GET", "/admin/state", apiKey, 401, "http", "/admin/state", "invalid_api_key", "info"},
		{"GET", "/admin/state", adminKey, 200, "http", "/admin/state", "", "info"},
		{"GET", "/metrics", "", 401, "http", "/metrics", "invalid_api_key", "info"},
		{"GET", "/healthz", "", 200, "http", "/healthz", "", "debug"},
		{"GET", "/readyz", "", 200, "http", "/readyz", "", "debug"},
	}
	for _, tc := range cases {
		logs.Reset()
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(body))
		req.Header.Set("X-Request-Id", "req-log-1")
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+strings.TrimPrefix(tc.key, "Bearer "))
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		name := tc.method + " " + tc.path
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d", name, w.Code, tc.status)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if len(lines) != 1 {
			t.Errorf("%s: %d log lines, want 1:\n%s", name, len(lines), logs.String())
			continue
		}
		var l struct {
			Level, Message, Route, Path, Code string
			Status                            int
			RequestID                         string `json:"request_id"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
			t.Fatalf("%s: %v: %s", name, err, lines[0])
		}
		path, _, _ := strings.Cut(tc.path, "?")
		wantPath := ""
		if tc.route == "" {
			wantPath = path
		}
		if l.Message != tc.msg || l.Level != tc.level || l.Status != tc.status || l.Route != tc.route || l.Path != wantPath ||
			l.Code != tc.code || l.RequestID != "req-log-1" {
			t.Errorf("%s: log line %s", name, lines[0])
		}
		if strings.Contains(lines[0], "LOGKEY") {
			t.Errorf("%s: a key in the log: %s", name, lines[0])
		}
	}
	// The chat request's own Outcome and the two refusals before it; nothing else.
	if len(seen) != 3 || seen[0].Status != 401 || seen[0].Code != "invalid_api_key" || seen[0].Route != chatRoute ||
		seen[2].Status != 200 || seen[2].Model != "p/m" {
		t.Errorf("observed %+v", seen)
	}
}
