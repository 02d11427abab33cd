//go:build tollgate_faults

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const failedConfig = `
listen: 127.0.0.1:0
drain_delay: 2s
drain_grace: 1s
providers:
  - name: demo
    kind: fake
    lanes: 4
    models:
      - id: echo
      - id: echo2
      - id: long            # far longer than the test: only the failure ends it
        reply: "%s"
        tokens_per_second: 20
`

// TestSupervisorBudgetSpentExits runs a fault-tagged tollgate whose supervisor panics on
// every batch it admits. Once its restart budget is spent the gateway has failed: /healthz
// and /readyz answer 503 "failed" at once, the open stream ends with an error event, the
// cause is logged at error level, and after drain_delay and drain_grace the process exits 1
// for its service manager to start a fresh one.
func TestSupervisorBudgetSpentExits(t *testing.T) {
	bin := buildTollgate(t, "", "tollgate_faults")
	p := startBinary(t, bin, fmt.Sprintf(failedConfig, strings.Repeat("word ", 2000)),
		`TOLLGATE_FAULTS=[{"Actor":"supervisor","On":"startBatch","Times":-1}]`)
	if code, body := probe(p.url + "/healthz"); code != http.StatusOK || body != `{"status":"ok"}` {
		t.Fatalf("/healthz before the failure: %d %s", code, body)
	}
	stream := openStream(t, p.url, "demo/long")

	batch := `{"models":["demo/echo","demo/echo2"],"messages":[{"role":"user","content":"hi"}]}`
	for i := 0; ; i++ {
		if code, _ := probe(p.url + "/healthz"); code == http.StatusServiceUnavailable {
			break
		}
		if i == 20 {
			t.Fatalf("/healthz still not 503 after %d batches:\n%s", i, p.log.String())
		}
		res, err := rawClient.Post(p.url+"/v1/batch/chat/completions", "application/json", strings.NewReader(batch))
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	failedAt := time.Now()
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := probe(p.url + path); code != http.StatusServiceUnavailable || body != `{"status":"failed"}` {
			t.Errorf("%s after the failure: %d %s", path, code, body)
		}
	}
	if a := post(context.Background(), p.url, "demo/echo", "", false); a.status != http.StatusServiceUnavailable {
		t.Errorf("a call after the failure: %d %s", a.status, a.body)
	}

	select {
	case lines := <-stream:
		last := lines[len(lines)-1]
		var ev struct{ Error struct{ Code string } }
		if err := json.Unmarshal([]byte(strings.TrimPrefix(last, "data: ")), &ev); err != nil || ev.Error.Code == "" {
			t.Errorf("the open stream ends with %q, want an error event", last)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the open stream did not end 15s after the failure")
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("tollgate still running 20s after the failure:\n%s", p.log.String())
	}
	if since := time.Since(failedAt); since < time.Second {
		t.Errorf("exited %s after the failure, before drain_delay (2s) let a balancer see /readyz", since)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1\n%s", code, p.log.String())
	}
	log := p.log.String()
	for _, want := range []string{
		`"level":"error","error":"the gateway's supervisor failed repeatedly`,
		"the gateway failed and admits nothing",
		"draining: admitting nothing new",
		"tollgate: gateway failed: the gateway's supervisor failed repeatedly",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// probe GETs url and returns its status and trimmed body.
func probe(url string) (int, string) {
	res, err := rawClient.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}
