package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The secrets come from the environment, as a deployment passes them; none may reach the
// log, a metric or /admin/state.
const (
	tenantAlice = "sk-alice-PROCESS-000001"
	tenantBob   = "sk-bob-PROCESS-000002"
	tenantAdmin = "sk-admin-PROCESS-000003"
)

const tenantsProcessYAML = `
listen: 127.0.0.1:0
auth:
  api_keys:
    - {name: alice, key: "${ALICE_KEY}", models: ["demo/*"], budget: {usd: 0.000001, period: month}}
    - {name: bob, key: "${BOB_KEY}", max_running: 1, max_queued: 1, max_priority: normal}
  admin_keys: ["${ADMIN_KEY}"]
store: {sqlite: %s}
providers:
  - name: demo
    kind: fake
    queue_timeout: 5s
    models: [{id: echo, price: {input: 1000, output: 1000}}]
  - name: slow
    kind: fake
    lanes: 4
    models:
      - id: long
        reply: "%s"
        tokens_per_second: 50
`

// TestTenantsProcess drives the client keys of SPEC §18 through the built binary, as an
// operator runs it: keys from the environment, a SQLite store, a restart. Alice spends her
// budget and is refused 402, and stays refused after the restart; she may not call a model
// outside her list (403). Bob's max_running and max_queued hold (429
// client_concurrency_limited) and /admin/state shows his calls; his interactive call is
// lowered to batch and the log line says so. A key made at run time is rate limited (429
// client_rate_limited with Retry-After) and revoked (401), and stays revoked after the
// restart. The log line and /metrics name clients and costs; no secret appears anywhere.
func TestTenantsProcess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tollgate.db")
	yaml := fmt.Sprintf(tenantsProcessYAML, db, strings.Repeat("word ", 400))
	env := []string{"ALICE_KEY=" + tenantAlice, "BOB_KEY=" + tenantBob, "ADMIN_KEY=" + tenantAdmin}
	p := startBinary(t, tollgateBinary(t, ""), yaml, env...)

	if a := keyPost(p.url, tenantAlice, "demo/echo", ""); a.status != http.StatusOK {
		t.Fatalf("alice's first call: %d %s", a.status, a.body)
	}
	wantRefusal(t, "alice past her budget", keyPost(p.url, tenantAlice, "demo/echo", ""), 402, "budget_exceeded")
	wantRefusal(t, "alice outside her models", keyPost(p.url, tenantAlice, "slow/long", ""), 403, "model_not_allowed")

	// Bob: one running (held by its slow stream), one queued behind it at another provider
	// (his max_running is gateway-wide), the third refused.
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	running := keyStream(t, ctx, p.url, tenantBob, "slow/long", "interactive")
	queued := make(chan answer, 1)
	go func() { queued <- keyPost(p.url, tenantBob, "demo/echo", "") }() // ends with the call
	waitClientState(t, p.url, "bob", 1, 1)
	a := keyPost(p.url, tenantBob, "demo/echo", "")
	wantRefusal(t, "bob's third call", a, 429, "client_concurrency_limited")
	hangUp() // the running call ends; the queued one starts and finishes
	<-running
	if a := <-queued; a.status != http.StatusOK {
		t.Fatalf("bob's queued call: %d %v %s", a.status, a.err, a.body)
	}
	p.waitLog(t, `"priority_asked":"interactive"`, 5*time.Second)

	// A key made at run time: rate limited, then revoked.
	var made struct {
		Secret string `json:"secret"`
	}
	adminDo(t, p.url, "POST", "/admin/keys", `{"name":"carol","rate_limit":{"rpm":1}}`, http.StatusCreated, &made)
	if a := keyPost(p.url, made.Secret, "demo/echo", ""); a.status != http.StatusOK {
		t.Fatalf("carol's first call: %d %s", a.status, a.body)
	}
	a = keyPost(p.url, made.Secret, "demo/echo", "")
	wantRefusal(t, "carol past her rpm", a, 429, "client_rate_limited")
	if ra := a.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("client_rate_limited without a Retry-After: %q", ra)
	}
	adminDo(t, p.url, "DELETE", "/admin/keys/carol", "", http.StatusOK, nil)
	wantRefusal(t, "carol revoked", keyPost(p.url, made.Secret, "demo/echo", ""), 401, "invalid_api_key")

	p.waitLog(t, `"client":"alice"`, 5*time.Second)
	if !strings.Contains(p.log.String(), `"cost_usd"`) {
		t.Error("no log line has cost_usd")
	}
	metrics := adminDo(t, p.url, "GET", "/metrics", "", http.StatusOK, nil)
	for _, s := range []string{`tollgate_client_requests_total{client="alice",code="budget_exceeded"} 1`,
		`tollgate_client_requests_total{client="bob",code="client_concurrency_limited"} 1`,
		`tollgate_client_spend_usd_total{client="alice"}`} {
		if !strings.Contains(metrics, s) {
			t.Errorf("/metrics lacks %s", s)
		}
	}
	state := adminDo(t, p.url, "GET", "/admin/state", "", http.StatusOK, nil)
	keys := adminDo(t, p.url, "GET", "/admin/keys", "", http.StatusOK, nil)
	for _, secret := range []string{tenantAlice, tenantBob, tenantAdmin, made.Secret} {
		for where, text := range map[string]string{"the log": p.log.String(), "/metrics": metrics, "/admin/state": state, "/admin/keys": keys} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows a secret", where)
			}
		}
	}

	// A restart on the same store keeps the spend and the revocation.
	p.signal(t, syscall.SIGTERM)
	<-p.exited
	p = startBinary(t, tollgateBinary(t, ""), yaml, env...)
	wantRefusal(t, "alice after the restart", keyPost(p.url, tenantAlice, "demo/echo", ""), 402, "budget_exceeded")
	wantRefusal(t, "carol after the restart", keyPost(p.url, made.Secret, "demo/echo", ""), 401, "invalid_api_key")
	if a := keyPost(p.url, tenantBob, "demo/echo", ""); a.status != http.StatusOK {
		t.Fatalf("bob after the restart: %d %s", a.status, a.body)
	}
}

// keyPost sends a chat call with client key key and prio (X-Gateway-Priority, "" none).
func keyPost(url, key, model, prio string) answer {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)))
	req.Header.Set("Authorization", "Bearer "+key)
	if prio != "" {
		req.Header.Set("X-Gateway-Priority", prio)
	}
	return do(req)
}

// keyStream opens a streamed call with key, waits for its first event and reads the rest
// until ctx ends it; the channel closes when the stream has ended.
func keyStream(t *testing.T, ctx context.Context, url, key, model, prio string) <-chan struct{} {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Gateway-Priority", prio)
	res, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(res.Body)
	if first, err := rd.ReadString('\n'); res.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("stream: %d %q %v", res.StatusCode, first, err)
	}
	done := make(chan struct{})
	go func() { // ends when ctx ends the stream
		defer close(done)
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, rd)
	}()
	return done
}

// wantRefusal checks that a was refused with status and the error code.
func wantRefusal(t *testing.T, what string, a answer, status int, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if a.err != nil || a.status != status || json.Unmarshal([]byte(a.body), &e) != nil || e.Error.Code != code {
		t.Errorf("%s: %d %v %s, want %d %s", what, a.status, a.err, a.body, status, code)
	}
}

// adminDo calls the admin API with the admin key, checks the status and decodes the
// answer into out (nil: not decoded); it returns the body.
func adminDo(t *testing.T, url, method, path, body string, want int, out any) string {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tenantAdmin)
	res, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return string(b)
}

// waitClientState polls /admin/state until the providers together run running and queue
// queued calls of client.
func waitClientState(t *testing.T, url, client string, running, queued int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var st struct {
			Providers []struct {
				Name    string         `json:"name"`
				Running map[string]int `json:"running_by_client"`
				Queued  map[string]int `json:"queued_by_client"`
			} `json:"providers"`
		}
		if err := json.Unmarshal([]byte(adminDo(t, url, "GET", "/admin/state", "", http.StatusOK, nil)), &st); err != nil {
			t.Fatal(err)
		}
		runs, queues := 0, 0
		for _, pv := range st.Providers {
			runs += pv.Running[client]
			queues += pv.Queued[client]
		}
		if runs == running && queues == queued {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: running %d queued %d, want %d and %d", client, runs, queues, running, queued)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}
