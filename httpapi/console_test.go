package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The console's files are public (it asks for a key and sends it with its API calls); "/" and
// "/ui" lead to it; a missing file gets the API's JSON 404.
func TestConsoleRoutes(t *testing.T) {
	s := New(Options{Gateway: stubGateway{&script{}}, APIKeys: []string{"client-key"}, Logger: zerolog.Nop()})
	cases := []struct {
		method, path string
		status       int
		location     string // for redirects
		ctype        string
	}{
		{"GET", "/", http.StatusFound, "/ui/", ""},
		{"GET", "/ui", http.StatusMovedPermanently, "/ui/", ""},
		{"GET", "/ui/", http.StatusOK, "", "text/html; charset=utf-8"},
		{"HEAD", "/ui/js/main.js", http.StatusOK, "", "text/javascript; charset=utf-8"},
		{"GET", "/ui/nope.js", http.StatusNotFound, "", "application/json"},
		{"POST", "/ui/", http.StatusMethodNotAllowed, "", "application/json"},
	}
	for _, tc := range cases {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.status || w.Header().Get("Location") != tc.location ||
			(tc.ctype != "" && w.Header().Get("Content-Type") != tc.ctype) {
			t.Errorf("%s %s: %d Location %q Content-Type %q; want %d %q %q", tc.method, tc.path, w.Code,
				w.Header().Get("Location"), w.Header().Get("Content-Type"), tc.status, tc.location, tc.ctype)
		}
		if strings.HasPrefix(tc.path, "/ui/") && tc.method != "POST" && w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: no Content-Security-Policy", tc.method, tc.path)
		}
	}
}
