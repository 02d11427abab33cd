package ui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	notFound := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "nope", http.StatusNotFound) })
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	Handler(notFound).ServeHTTP(w, req)
	return w
}

func TestServesFilesWithTheirTypes(t *testing.T) {
	tests := []struct {
		path, ctype, contains string
	}{
		{"/ui/", "text/html; charset=utf-8", `<script type="module" src="js/main.js">`},
		{"/ui/index.html", "text/html; charset=utf-8", "<main"},
		{"/ui/js/main.js", "text/javascript; charset=utf-8", "import"},
		{"/ui/js/run.js", "text/javascript; charset=utf-8", "class Run"},
		{"/ui/console.css", "text/css; charset=utf-8", ".card"},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"},
	}
	for _, tt := range tests {
		w := serve(t, http.MethodGet, tt.path, nil)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != tt.ctype || !strings.Contains(w.Body.String(), tt.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tt.path, w.Code, w.Header().Get("Content-Type"), tt.contains,
				strings.Contains(w.Body.String(), tt.contains))
		}
	}
}

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	for _, path := range []string{"/ui/", "/ui/js/api.js", "/ui/missing.js", "/ui/../index.html"} {
		w := serve(t, http.MethodGet, path, nil)
		for k, v := range securityHeaders {
			if got := w.Header().Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
	}
	csp := ContentSecurityPolicy
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
		"frame-ancestors 'none'", "require-trusted-types-for 'script'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	if strings.Contains(csp, "unsafe-") || strings.Contains(csp, "http") || strings.Contains(csp, "*") {
		t.Errorf("CSP allows inline code or foreign origins: %s", csp)
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	if w := serve(t, http.MethodGet, "/ui/nope.js", nil); w.Code != http.StatusNotFound || w.Body.String() != "nope\n" {
		t.Errorf("missing file: %d %q, want the notFound handler's answer", w.Code, w.Body)
	}
	if w := serve(t, http.MethodGet, "/other", nil); w.Code != http.StatusNotFound {
		t.Errorf("a path outside the prefix: %d", w.Code)
	}
	w := serve(t, http.MethodHead, "/ui/console.css", nil)
	if w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %q", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
}

func TestRevalidatesWithETag(t *testing.T) {
	w := serve(t, http.MethodGet, "/ui/js/card.js", nil)
	etag := w.Header().Get("ETag")
	if etag == "" || w.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, w.Header().Get("Cache-Control"))
	}
	if w := serve(t, http.MethodGet, "/ui/js/card.js", http.Header{"If-None-Match": {etag}}); w.Code != http.StatusNotModified {
		t.Errorf("If-None-Match with the ETag: %d, want 304", w.Code)
	}
	if other := serve(t, http.MethodGet, "/ui/js/run.js", nil).Header().Get("ETag"); other == etag {
		t.Error("two files share an ETag")
	}
}

// The CSP would block inline code in the browser; this finds it before a browser does, and
// keeps model output away from every HTML sink in the scripts (Trusted Types would throw).
func TestNoInlineCodeNorHTMLSinks(t *testing.T) {
	root, err := fs.Sub(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	inlineScript := regexp.MustCompile(`<script(?:\s[^>]*)?>`)
	forbiddenHTML := []*regexp.Regexp{
		regexp.MustCompile(`\son[a-z]+\s*=`), // event handler attributes
		regexp.MustCompile(`\sstyle\s*=`),    // inline styles
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`(?i)javascript:`),
		regexp.MustCompile(`(?:src|href)="(?:https?:)?//`), // another origin
	}
	forbiddenJS := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*['"](?:style|on)|https?://`)
	checked := 0
	err = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		src := string(b)
		switch {
		case strings.HasSuffix(name, ".html"):
			checked++
			for _, tag := range inlineScript.FindAllString(src, -1) {
				if !strings.Contains(tag, ` src="`) {
					t.Errorf("%s: inline script %s", name, tag)
				}
			}
			for _, re := range forbiddenHTML {
				if m := re.FindString(src); m != "" {
					t.Errorf("%s: %q is blocked by the CSP or reaches another origin", name, m)
				}
			}
		case strings.HasSuffix(name, ".js"):
			checked++
			// The SVG namespace is a name (createElementNS), never fetched.
			src = strings.ReplaceAll(src, `'http://www.w3.org/2000/svg'`, "svgNamespace")
			if m := forbiddenJS.FindString(src); m != "" {
				t.Errorf("%s: %q: the console builds the DOM from text nodes only", name, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked only %d files", checked)
	}
}

func TestAssets(t *testing.T) {
	assets, err := load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"index.html", "console.css", "favicon.svg", "js/main.js"} {
		if _, ok := assets[name]; !ok {
			t.Errorf("no embedded %s", name)
		}
	}
}
