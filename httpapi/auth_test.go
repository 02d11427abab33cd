package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestAuth(t *testing.T) {
	s := New(Options{Gateway: stubGateway{&script{}}, APIKeys: []string{"client-key"}, AdminKeys: []string{"admin-key"},
		State: func() any { return map[string]int{"running": 0} }, Logger: zerolog.Nop()})
	body := `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		method, path, header, value string
		status                      int
	}{
		{"POST", "/v1/chat/completions", "", "", 401},
		{"POST", "/v1/chat/completions", "Authorization", "Bearer wrong", 401},
		{"POST", "/v1/chat/completions", "Authorization", "Bearer client-key", 200},
		{"POST", "/v1/chat/completions", "Authorization", "bearer client-key", 200}, // RFC 9110: the scheme is case-insensitive
		{"POST", "/v1/chat/completions", "Authorization", "BEARER  client-key ", 200},
		{"POST", "/v1/chat/completions", "Authorization", "Basic client-key", 401},
		{"POST", "/v1/chat/completions", "Authorization", "Bearerclient-key", 401},
		{"POST", "/v1/chat/completions", "Authorization", "Bearer client-ke", 401},
		{"POST", "/v1/chat/completions", "Authorization", "Bearer client-key2", 401},
		{"POST", "/v1/chat/completions", "Authorization", "Bearer ", 401},
		{"POST", "/v1/chat/completions", "x-api-key", "client-key", 200},
		{"GET", "/v1/models", "", "", 401},
		{"GET", "/v1/models", "Authorization", "Bearer client-key", 200},
		{"GET", "/admin/state", "Authorization", "Bearer client-key", 401},
		{"GET", "/admin/state", "Authorization", "Bearer admin-key", 200},
		{"GET", "/healthz", "", "", 200},
		{"POST", "/v1/responses", "Authorization", "Bearer wrong", 401},
		{"POST", "/v1/messages", "x-api-key", "wrong", 401},
		{"POST", "/v1/messages/count_tokens", "x-api-key", "wrong", 401},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(body))
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != tc.status {
			t.Errorf("%s %s %s=%q: status %d, want %d", tc.method, tc.path, tc.header, tc.value, w.Code, tc.status)
		}
		if w.Code == 401 && !strings.Contains(w.Body.String(), `"code":"invalid_api_key"`) {
			t.Errorf("%s: body %s", tc.path, w.Body)
		}
		// A wrong key stays wrong: without the header Claude Code retries a 401 for minutes.
		if w.Code == 401 && w.Header().Get("x-should-retry") != "false" {
			t.Errorf("%s %s: 401 without x-should-retry: false: %v", tc.method, tc.path, w.Header())
		}
		if tc.path == "/v1/chat/completions" && (w.Header().Get("X-Gateway-Queue-Ms") == "" || w.Header().Get("X-Request-Id") == "") {
			t.Errorf("chat answer %d without gateway headers: %v", w.Code, w.Header())
		}
		if strings.Contains(w.Body.String(), "client-key") || strings.Contains(w.Body.String(), "admin-key") {
			t.Errorf("a key appears in the answer: %s", w.Body)
		}
	}
}

func TestKeySet(t *testing.T) {
	ks := newKeySet([]string{"alpha-key", "", "beta-key"})
	for got, want := range map[string]bool{"alpha-key": true, "beta-key": true, "": false, "alpha": false,
		"alpha-key ": false, "gamma-key": false} {
		if ks.match(got) != want {
			t.Errorf("match(%q) = %v, want %v", got, !want, want)
		}
	}
	if newKeySet([]string{""}).match("") {
		t.Error("an empty key admitted an empty one")
	}
}
