package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const reloadBefore = `
listen: 127.0.0.1:0
providers:
  - name: demo
    kind: fake
    lanes: 1
    models:
      - id: echo
  - name: old
    kind: fake
    models:
      - id: long
        reply: "` + "%s" + `"
        tokens_per_second: 400
`

const reloadAfter = `
listen: 127.0.0.1:0
providers:
  - name: demo
    kind: fake
    lanes: 2
    models:
      - id: echo
  - name: new
    kind: fake
    models:
      - id: x
        reply: "from the new provider"
`

const reloadInvalid = `
listen: 127.0.0.1:0
providers:
  - name: demo
    kind: fake
    lanes: -1
    models:
      - id: echo
  - name: broken
    kind: no-such-kind
`

const reloadRestart = `
listen: 127.0.0.1:1
providers:
  - name: demo
    kind: fake
    lanes: 3
    models:
      - id: echo
  - name: new
    kind: fake
    models:
      - id: x
`

// TestReloadProcess drives a real tollgate through SIGHUP and POST /admin/reload: a provider
// removed while it streams finishes that stream and stops admitting at once, one added
// serves, lanes change; an invalid file changes nothing and the answer and the log list its
// errors; a setting that needs a restart is reported and not applied while the rest is.
func TestReloadProcess(t *testing.T) {
	p := startProcess(t, strings.Replace(reloadBefore, "%s", strings.Repeat("word ", 300), 1))
	stream := openStream(t, p.url, "old/long") // runs through the reload

	write(t, p.path, reloadAfter)
	p.signal(t, syscall.SIGHUP)
	p.waitLog(t, `"message":"configuration reloaded"`, 10*time.Second)
	if ids := modelIDs(t, p.url); !slices.Equal(ids, []string{"demo/echo", "new/x"}) {
		t.Fatalf("models after SIGHUP: %v", ids)
	}
	if a := post(context.Background(), p.url, "old/long", "", false); a.status != http.StatusNotFound || !strings.Contains(a.body, "model_not_found") {
		t.Fatalf("a new call for the removed provider: %d %s", a.status, a.body)
	}
	if a := post(context.Background(), p.url, "new/x", "", false); a.status != http.StatusOK || !strings.Contains(a.body, "from the new provider") {
		t.Fatalf("the added provider: %d %v %s", a.status, a.err, a.body)
	}
	select {
	case lines := <-stream:
		if last := lines[len(lines)-1]; last != "data: [DONE]" || strings.Contains(strings.Join(lines, "\n"), `"error"`) {
			t.Fatalf("the removed provider's running stream ended %q", last)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the removed provider's stream did not end")
	}
	// The client has its [DONE] before the provider actor counts the call finished, so the
	// removed provider leaves /admin/state only once it has stopped.
	p.waitLog(t, `"message":"removed provider stopped`, 10*time.Second)
	if lanes := providerLanes(t, p.url); lanes["demo"] != 2 || lanes["old"] != 0 {
		t.Fatalf("lanes after the reload: %v", lanes)
	}

	write(t, p.path, reloadInvalid)
	status, body := postReload(t, p.url)
	var bad struct {
		Error struct {
			Code   string   `json:"code"`
			Errors []string `json:"errors"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &bad); err != nil || status != http.StatusBadRequest || bad.Error.Code != "invalid_config" {
		t.Fatalf("an invalid file: %d %s", status, body)
	}
	joined := strings.Join(bad.Error.Errors, "\n")
	if len(bad.Error.Errors) < 2 || !strings.Contains(joined, "providers[0].lanes") || !strings.Contains(joined, "no-such-kind") {
		t.Fatalf("the errors listed: %q", bad.Error.Errors)
	}
	p.waitLog(t, `"message":"reload refused: the configuration is invalid; nothing changed"`, 5*time.Second)
	if lanes := providerLanes(t, p.url); lanes["demo"] != 2 {
		t.Fatalf("an invalid file changed the lanes: %v", lanes)
	}

	write(t, p.path, reloadRestart)
	status, body = postReload(t, p.url)
	var ok struct {
		Reloaded bool     `json:"reloaded"`
		Restart  []string `json:"needs_restart"`
		Changed  []struct {
			Name    string   `json:"name"`
			Changes []string `json:"changes"`
		} `json:"providers_changed"`
	}
	if err := json.Unmarshal([]byte(body), &ok); err != nil || status != http.StatusOK || !ok.Reloaded {
		t.Fatalf("reload: %d %s", status, body)
	}
	if len(ok.Restart) != 1 || !strings.HasPrefix(ok.Restart[0], "listen:") || len(ok.Changed) < 1 || ok.Changed[0].Name != "demo" ||
		!slices.Contains(ok.Changed[0].Changes, "lanes: 2 → 3") {
		t.Fatalf("the summary: %s", body)
	}
	if lanes := providerLanes(t, p.url); lanes["demo"] != 3 {
		t.Fatalf("lanes: %v", lanes)
	}
	if a := post(context.Background(), p.url, "demo/echo", "", false); a.status != http.StatusOK {
		t.Fatalf("still serving on the old listener: %d %v", a.status, a.err)
	}
}

func write(t *testing.T, path, yaml string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func postReload(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Post(url+"/admin/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func modelIDs(t *testing.T, url string) []string {
	t.Helper()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	getJSON(t, url+"/v1/models", &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

func providerLanes(t *testing.T, url string) map[string]int {
	t.Helper()
	var st struct {
		Providers []struct {
			Name  string `json:"name"`
			Lanes int    `json:"lanes"`
		} `json:"providers"`
	}
	getJSON(t, url+"/admin/state", &st)
	out := map[string]int{}
	for _, p := range st.Providers {
		out[p.Name] = p.Lanes
	}
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
