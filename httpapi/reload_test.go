package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

type invalidFile []string

func (e invalidFile) Error() string      { return "the configuration is invalid: " + strings.Join(e, "; ") }
func (e invalidFile) Problems() []string { return e }

// TestReloadRoute: POST /admin/reload takes the admin key, answers the summary, an invalid
// file as 400 invalid_config listing every problem, and another failure as a 500 the SDKs
// do not retry.
func TestReloadRoute(t *testing.T) {
	cases := []struct {
		name   string
		key    string
		result error
		status int
		want   []string
	}{
		{"no key", "", nil, 401, []string{`"code":"invalid_api_key"`}},
		{"an api key", "client-key", nil, 401, []string{`"code":"invalid_api_key"`}},
		{"applied", "admin-key", nil, 200, []string{`"reloaded":true`}},
		{"invalid", "admin-key", invalidFile{"f.yaml:3: providers[0].lanes: must be at least 1", "f.yaml:7: providers[1].kind: unknown"}, 400,
			[]string{`"code":"invalid_config"`, `"type":"invalid_request_error"`, `providers[0].lanes`, `providers[1].kind`}},
		{"failed", "admin-key", errors.New("the provider did not answer"), 500, []string{`"code":"reload_failed"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Gateway: stubGateway{&script{}}, APIKeys: []string{"client-key"}, AdminKeys: []string{"admin-key"},
				Logger: zerolog.Nop(), Reload: func(context.Context) (any, error) {
					if tc.result != nil {
						return nil, tc.result
					}
					return map[string]bool{"reloaded": true}, nil
				}})
			req := httptest.NewRequest("POST", "/admin/reload", nil)
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			body := w.Body.String()
			if w.Code != tc.status || !json.Valid([]byte(body)) {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, body)
			}
			for _, s := range tc.want {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %s: %s", s, body)
				}
			}
			if tc.status == 400 {
				var doc struct {
					Error struct{ Errors []string } `json:"error"`
				}
				_ = json.Unmarshal([]byte(body), &doc)
				if len(doc.Error.Errors) != 2 {
					t.Errorf("errors listed: %v", doc.Error.Errors)
				}
			}
			if tc.status == 500 && w.Header().Get("x-should-retry") != "false" {
				t.Error("a failed reload invites a retry")
			}
		})
	}
}
