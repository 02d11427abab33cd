package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/llm"
)

// A gateway with no keys, driven by a real browser: a page on another origin (another
// loopback port) posts text/plain to chat and /admin/reload, CORS "simple" requests that
// need no preflight, and a page reached by a rebound name asks for /admin/state. The gateway
// refuses every one before anything runs; its own console's origin is still served.

const originConfig = `
providers:
  - name: demo
    kind: fake
    models: [{id: echo}]
`

// openBrowser starts a headless Chromium with the console tests' flags plus extra, on a
// blank tab; the browser is closed when the test ends.
func openBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *page {
	t.Helper()
	exe := chromium(t)
	opts := append(browserOptions(exe, t.TempDir(), "en-US"), extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	p := &page{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, p.observe); err != nil {
		t.Fatalf("listen to the page: %v", err)
	}
	t.Cleanup(p.check)
	return p
}

// countedReload re-reads originConfig, counting the reloads.
func countedReload(n *atomic.Int32) func() (*config.Config, error) {
	return func() (*config.Config, error) {
		n.Add(1)
		return config.Parse("test.yaml", []byte(originConfig), func(string) (string, bool) { return "", false })
	}
}

// refusedLines counts the gateway's log lines of forbidden_origin refusals of path.
func refusedLines(t *testing.T, logs *syncBuffer, path string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Path, Code string
			Status     int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Path == path && l.Code == "forbidden_origin" && l.Status == 403 {
			n++
		}
	}
	return n
}

// postJS is a page's fetch of a text/plain POST to url, in no-cors mode: the browser sends
// it (a simple request) and resolves with an opaque answer, whatever the gateway says.
func postJS(url string) string {
	return fmt.Sprintf(`fetch(%q, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'},
		body: JSON.stringify({model: 'demo/echo', messages: [{role: 'user', content: 'spend my keys'}]})})
		.then((r) => 'sent ' + r.type, (e) => 'failed ' + e)`, url)
}

func TestBrowserOnAnotherOriginCannotDriveTheGateway(t *testing.T) {
	var calls, reloads atomic.Int32
	demo := fake.New(fake.Config{Name: "demo", Default: fake.Script{Reply: "ok"}})
	demo.Hold = func(context.Context, *llm.Request) error { calls.Add(1); return nil }
	logs := &syncBuffer{}
	gw := serveApp(t, originConfig, app.Options{Logger: zerolog.New(logs), Backends: map[string]llm.Backend{"demo": demo},
		Reload: countedReload(&reloads)})
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>another site</title><p>nothing to see")
	}))
	t.Cleanup(evil.Close)
	_, gwPort, _ := strings.Cut(strings.TrimPrefix(gw.URL, "http://"), ":")

	p := openBrowser(t, chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"))
	p.do("open the other origin's page", chromedp.Navigate(evil.URL+"/"))
	for _, path := range []string{"/v1/chat/completions", "/admin/reload"} {
		if got := eval[string](p, postJS(gw.URL+path)); got != "sent opaque" {
			t.Fatalf("the page's POST to %s: %s", path, got)
		}
		if n := refusedLines(t, logs, path); n != 1 {
			t.Errorf("%s: %d forbidden_origin refusals logged, want 1 (the browser's request reached the gateway and was refused)\n%s", path, n, logs)
		}
	}
	if n, r := calls.Load(), reloads.Load(); n != 0 || r != 0 {
		t.Errorf("the other origin's page made %d backend calls and %d reloads, want none", n, r)
	}

	// A page at a name that resolves to the gateway (DNS rebinding): its requests carry
	// that name as Host, and even the gateway's own pages are refused to it.
	p.do("open the rebound name", chromedp.Navigate("http://rebind.test:"+gwPort+"/admin/state"))
	if body := p.text("body"); !strings.Contains(body, `"code":"forbidden_origin"`) || !strings.Contains(body, "Host header") {
		t.Errorf("/admin/state at a rebound name answered %q, want the forbidden_origin refusal of its Host", body)
	}
	// Its same-origin POST would read the answer: the refusal is all it reads.
	read := `fetch('/v1/chat/completions', {method: 'POST', headers: {'Content-Type': 'text/plain'},
		body: JSON.stringify({model: 'demo/echo', messages: [{role: 'user', content: 'hi'}]})})
		.then(async (r) => r.status + ' ' + await r.text(), (e) => 'failed ' + e)`
	if got := eval[string](p, read); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, `"code":"forbidden_origin"`) {
		t.Fatalf("the rebound page's same-origin POST read %s, want the 403 forbidden_origin", got)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the rebound page made %d backend calls, want none", n)
	}

	// The console's own origin is served: the same text/plain POST from a gateway page.
	p.do("open the console", chromedp.Navigate(gw.URL+"/ui/"))
	if got := eval[string](p, postJS("/v1/chat/completions")); got != "sent basic" {
		t.Fatalf("the console's POST: %s", got)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the console's own POST made %d backend calls, want 1", n)
	}
}

// TestForeignHostRefusedByTheBinaryWiring: a client (not a browser) that names a rebound
// host is refused on chat and reload too, and the same request with a loopback Host is served.
func TestForeignHostRefusedByTheBinaryWiring(t *testing.T) {
	var calls, reloads atomic.Int32
	demo := fake.New(fake.Config{Name: "demo", Default: fake.Script{Reply: "ok"}})
	demo.Hold = func(context.Context, *llm.Request) error { calls.Add(1); return nil }
	gw := serveApp(t, originConfig, app.Options{Logger: zerolog.Nop(), Backends: map[string]llm.Backend{"demo": demo},
		Reload: countedReload(&reloads)})
	cases := []struct {
		path, host string
		want       int
	}{
		{"/v1/chat/completions", "rebind.test", 403},
		{"/admin/reload", "rebind.test:8080", 403},
		{"/v1/chat/completions", "localhost", 200},
		{"/admin/reload", "[::1]:1", 200},
	}
	for _, c := range cases {
		req, err := http.NewRequest("POST", gw.URL+c.path, strings.NewReader(`{"model":"demo/echo","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = c.host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error struct{ Code string } }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.want || (c.want == 403 && body.Error.Code != "forbidden_origin") {
			t.Errorf("%s with Host %s: %d %q, want %d", c.path, c.host, resp.StatusCode, body.Error.Code, c.want)
		}
	}
	if n, r := calls.Load(), reloads.Load(); n != 1 || r != 1 {
		t.Errorf("%d backend calls and %d reloads, want 1 each (the loopback Host's)", n, r)
	}
}
