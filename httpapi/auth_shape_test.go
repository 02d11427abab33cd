package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
)

// TestAuthAnswersInClientShape: a 401 on the routes both APIs' clients call (/v1/models,
// /admin) is in Anthropic's error shape, with its request-id, for an Anthropic client (one
// that sends anthropic-version, or x-api-key without a bearer token), as an unknown route's
// answer is, and in OpenAI's for the others.
func TestAuthAnswersInClientShape(t *testing.T) {
	s := New(Options{Gateway: stubGateway{&script{}}, APIKeys: []string{"client-key"}, AdminKeys: []string{"admin-key"},
		State: func() any { return map[string]int{"running": 0} }, Reload: func(context.Context) (any, error) { return nil, nil },
		Logger: zerolog.Nop()})
	for _, tc := range []struct {
		method, path string
		headers      map[string]string
		anthropic    bool
	}{
		{"GET", "/v1/models", map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "wrong"}, true},
		{"GET", "/v1/models/p/m", map[string]string{"anthropic-version": "2023-06-01"}, true},
		{"GET", "/admin/state", map[string]string{"x-api-key": "client-key"}, true},
		{"POST", "/admin/reload", map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "wrong"}, true},
		{"GET", "/v1/models", map[string]string{"Authorization": "Bearer wrong"}, false},
		{"GET", "/admin/state", map[string]string{"Authorization": "Bearer client-key", "x-api-key": "client-key"}, false},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type, Code string
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 401 || body.Error.Code != "invalid_api_key" {
			t.Errorf("%s %s %v: %d %s (%v), want 401 invalid_api_key", tc.method, tc.path, tc.headers, w.Code, w.Body, err)
			continue
		}
		gotAnthropic := body.Type == "error" && body.Error.Type == "authentication_error"
		if gotAnthropic != tc.anthropic || (w.Header().Get("request-id") != "") != tc.anthropic {
			t.Errorf("%s %s %v: body %s, request-id %q: want Anthropic's shape %v", tc.method, tc.path, tc.headers,
				w.Body, w.Header().Get("request-id"), tc.anthropic)
		}
	}
}
