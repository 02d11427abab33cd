package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/httpapi/guard"
	"github.com/tollgate/tollgate/providers/llm"
)

// countingGateway is freshGateway counting its calls.
type countingGateway struct {
	freshGateway
	calls atomic.Int32
}

func (g *countingGateway) Start(ctx context.Context, model string, p llm.Priority, r *llm.Request) (llm.Served, error) {
	g.calls.Add(1)
	return g.freshGateway.Start(ctx, model, p, r)
}

// TestForeignHostOrOrigin: with no API keys, every route refuses a request whose Host or
// Origin is foreign, 403 forbidden_origin in the route's error shape, whatever its content
// type, before the gateway or the reload is touched; a request with the gateway's own Host
// and Origin, or with none, is served; with API keys nothing is checked.
func TestForeignHostOrOrigin(t *testing.T) {
	const own = "127.0.0.1:8080"
	policy, err := guard.New(own, []string{"gw.example.com"}, []string{"https://app.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path, ctype, host, origin string
		apiKeys                                 []string
		want                                    int    // status
		refused                                 string // the header the message names, when 403
	}{
		{"chat, text/plain, foreign origin", "POST", "/v1/chat/completions", "text/plain", own, "http://127.0.0.1:9999", nil, 403, "Origin"},
		{"chat, form, foreign origin", "POST", "/v1/chat/completions", "application/x-www-form-urlencoded", own, "https://evil.example", nil, 403, "Origin"},
		{"chat, rebound host", "POST", "/v1/chat/completions", "application/json", "evil.example:8080", "http://evil.example:8080", nil, 403, "Host"},
		{"chat, rebound host, no origin", "POST", "/v1/chat/completions", "application/json", "evil.example:8080", "", nil, 403, "Host"},
		{"chat, null origin", "POST", "/v1/chat/completions", "text/plain", own, "null", nil, 403, "Origin"},
		{"chat, no origin (an SDK)", "POST", "/v1/chat/completions", "application/json", own, "", nil, 200, ""},
		{"chat, localhost, no origin", "POST", "/v1/chat/completions", "application/json", "localhost:8080", "", nil, 200, ""},
		{"chat, the console's origin", "POST", "/v1/chat/completions", "application/json", own, "http://" + own, nil, 200, ""},
		{"chat, an allowed origin", "POST", "/v1/chat/completions", "text/plain", own, "https://app.example.com", nil, 200, ""},
		{"chat, an allowed host", "POST", "/v1/chat/completions", "application/json", "gw.example.com", "https://gw.example.com", nil, 200, ""},
		{"messages, foreign origin", "POST", "/v1/messages", "text/plain", own, "https://evil.example", nil, 403, "Origin"},
		{"reload, text/plain, foreign origin", "POST", "/admin/reload", "text/plain", own, "http://localhost:3000", nil, 403, "Origin"},
		{"reload, rebound host", "POST", "/admin/reload", "", "evil.example", "", nil, 403, "Host"},
		{"reload, own", "POST", "/admin/reload", "", own, "http://" + own, nil, 200, ""},
		{"state, rebound host", "GET", "/admin/state", "", "evil.example", "", nil, 403, "Host"},
		{"state, foreign origin", "GET", "/admin/state", "", own, "https://evil.example", nil, 403, "Origin"},
		{"models, rebound host", "GET", "/v1/models", "", "evil.example", "", nil, 403, "Host"},
		{"console, rebound host", "GET", "/ui/", "", "evil.example", "", nil, 403, "Host"},
		{"healthz, rebound host", "GET", "/healthz", "", "evil.example", "", nil, 403, "Host"},
		{"unknown route, rebound host", "GET", "/nowhere", "", "evil.example", "", nil, 403, "Host"},
		{"api keys: no check, the key's 401", "POST", "/v1/chat/completions", "text/plain", "evil.example", "https://evil.example", []string{"k"}, 401, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &countingGateway{}
			var reloads atomic.Int32
			srv := New(Options{Gateway: g, Logger: zerolog.Nop(), APIKeys: c.apiKeys, Origins: policy,
				State:  func() any { return map[string]int{"running": 0} },
				Reload: func(context.Context) (any, error) { reloads.Add(1); return map[string]string{"status": "ok"}, nil }})
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(chatBody))
			req.Host = c.host
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
			if c.want != 403 {
				return
			}
			if n := g.calls.Load() + reloads.Load(); n != 0 {
				t.Errorf("refused, yet the gateway or the reload ran %d times", n)
			}
			var body struct {
				Type  string `json:"type"` // Anthropic's shape on /v1/messages
				Error struct {
					Code, Message, Type string
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if body.Error.Code != "forbidden_origin" {
				t.Errorf("code %q, want forbidden_origin", body.Error.Code)
			}
			hint := map[string]string{"Host": "auth.allowed_hosts", "Origin": "auth.allowed_origins"}[c.refused]
			if !strings.Contains(body.Error.Message, c.refused+" header") || !strings.Contains(body.Error.Message, hint) {
				t.Errorf("message %q names neither the %s header nor %s", body.Error.Message, c.refused, hint)
			}
			if strings.HasPrefix(c.path, "/v1/messages") && (body.Type != "error" || body.Error.Type != "permission_error") {
				t.Errorf("messages refusal not in Anthropic's shape: %s", rec.Body)
			}
			if strings.HasPrefix(c.path, "/v1/") && rec.Header().Get("X-Gateway-Queue-Ms") == "" {
				t.Error("an API answer without X-Gateway-Queue-Ms")
			}
		})
	}
}
