package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/config"
)

const tenantsYAML = `
auth:
  api_keys:
    - {name: alice, key: sk-alice-000001, models: ["demo/*"], budget: {usd: 0.000001, period: day}}
  admin_keys: [sk-admin-000001]
store: {sqlite: %s}
providers:
  - name: demo
    kind: fake
    models: [{id: echo, price: {input: 1000, output: 1000}}]
  - name: other
    kind: fake
    queue_timeout: 5s
    models: [{id: echo}]
`

// TestTenantsSDK drives the client keys of SPEC §18 with the official OpenAI SDK through the
// gateway: a call within budget, 402 once the budget is spent, 403 for a model outside the
// key's list, a key made through the admin API that works and then is revoked (401), and the
// ledger's usage rows with their costs, kept across a restart.
func TestTenantsSDK(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tollgate.db")
	srv, a, stop := startTenants(t, db)
	chat := func(key, model string) error {
		c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
		_, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: model,
			Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello there")}})
		return err
	}
	status := func(err error) (int, string) {
		var e *oai.Error
		if !errors.As(err, &e) {
			return 0, fmt.Sprint(err)
		}
		return e.StatusCode, e.Code
	}
	if err := chat("sk-alice-000001", "demo/echo"); err != nil {
		t.Fatalf("alice's first call: %v", err)
	}
	if st, code := status(chat("sk-alice-000001", "demo/echo")); st != 402 || code != "budget_exceeded" {
		t.Errorf("alice past her budget: %d %s, want 402 budget_exceeded", st, code)
	}
	if st, code := status(chat("sk-alice-000001", "other/echo")); st != 403 || code != "model_not_allowed" {
		t.Errorf("alice on other/echo: %d %s, want 403 model_not_allowed", st, code)
	}

	var made struct {
		Key    map[string]any `json:"key"`
		Secret string         `json:"secret"`
	}
	admin(t, srv.URL, "POST", "/admin/keys", `{"name":"bob","weight":2,"rate_limit":{"rpm":60}}`, 201, &made)
	if !strings.HasPrefix(made.Secret, "tg-") || made.Key["source"] != "admin" {
		t.Fatalf("created %+v", made)
	}
	admin(t, srv.URL, "POST", "/admin/keys", `{"name":"alice"}`, 400, nil)
	admin(t, srv.URL, "POST", "/admin/keys", `{"name":"carol","weight":0}`, 400, nil)
	if err := chat(made.Secret, "other/echo"); err != nil {
		t.Fatalf("bob's call: %v", err)
	}
	admin(t, srv.URL, "DELETE", "/admin/keys/bob", "", 200, nil)
	if st, code := status(chat(made.Secret, "other/echo")); st != 401 || code != "invalid_api_key" {
		t.Errorf("bob after revocation: %d %s, want 401 invalid_api_key", st, code)
	}

	if err := a.store.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []struct {
			Key      string  `json:"key"`
			Requests int     `json:"requests"`
			Errors   int     `json:"errors"`
			TokensIn int     `json:"tokens_in"`
			CostUSD  float64 `json:"cost_usd"`
		} `json:"rows"`
	}
	admin(t, srv.URL, "GET", "/admin/usage?group_by=key", "", 200, &rep)
	if len(rep.Rows) != 2 || rep.Rows[0].Key != "alice" || rep.Rows[0].Requests != 3 || rep.Rows[0].Errors != 2 ||
		rep.Rows[0].CostUSD <= 0 || rep.Rows[1].Key != "bob" || rep.Rows[1].Requests != 1 || rep.Rows[1].CostUSD != 0 {
		t.Errorf("usage rows = %+v", rep.Rows)
	}
	csv := admin(t, srv.URL, "GET", "/admin/usage?group_by=key,model&format=csv", "", 200, nil)
	if !strings.HasPrefix(csv, "key,model,requests,errors,tokens_in,cached_in,tokens_out,reasoning,cost_usd\n") {
		t.Errorf("csv = %q", csv)
	}
	keys := admin(t, srv.URL, "GET", "/admin/keys", "", 200, nil)
	if strings.Contains(keys, "sk-alice") || strings.Contains(keys, made.Secret) {
		t.Errorf("GET /admin/keys shows a secret: %s", keys)
	}

	// A restart keeps alice's spend: she is still past her budget.
	stop()
	srv, _, _ = startTenants(t, db)
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("sk-alice-000001"), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "demo/echo",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("again")}})
	if st, code := status(err); st != 402 || code != "budget_exceeded" {
		t.Errorf("alice after a restart: %d %s, want 402 budget_exceeded", st, code)
	}
}

func startTenants(t *testing.T, db string) (*httptest.Server, *App, func()) {
	t.Helper()
	cfg, err := config.Parse("tenants.yaml", []byte(fmt.Sprintf(tenantsYAML, db)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	stop := sync.OnceFunc(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.Drain(ctx); err != nil {
			t.Errorf("drain: %v", err)
		}
	})
	t.Cleanup(stop)
	return srv, a, stop
}

func readAll(res *http.Response) string {
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// admin makes an admin request and checks its status; it decodes a JSON answer into out.
func admin(t *testing.T, base, method, path, body string, want int, out any) string {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-admin-000001")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b := readAll(res)
	if res.StatusCode != want {
		t.Errorf("%s %s: %d, want %d: %s", method, path, res.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(b), out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return b
}
