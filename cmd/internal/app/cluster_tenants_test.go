package app

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/httpapi"
)

// clusterTenantsYAML: client keys with a shared rate limit and a budget, on replicas that
// each keep their own SQLite store.
const clusterTenantsYAML = `
auth:
  api_keys:
    - {name: dave, key: sk-dave-000001, rate_limit: {rpm: 3}}
    - {name: erin, key: sk-erin-000001, budget: {usd: 0.000001, period: day}}
    - {name: fay, key: sk-fay-000001, budget: {usd: 100, period: month}}
  admin_keys: [sk-admin-000001]
providers:
  - name: demo
    kind: fake
    queue_timeout: 2s
    models: [{id: echo, price: {input: 1000, output: 1000}}]
`

// tenantReplicas starts two replicas of clusterTenantsYAML on one real redis-server, each
// behind its own HTTP server, and returns their base URLs and apps.
func tenantReplicas(t *testing.T) ([]string, []*App) {
	t.Helper()
	return tenantReplicasOn(t, redistest.Start(t))
}

// tenantReplicasOn is tenantReplicas on redis-server s.
func tenantReplicasOn(t *testing.T, s *redistest.Server) ([]string, []*App) {
	t.Helper()
	var urls []string
	var apps []*App
	for _, name := range []string{"r1", "r2"} {
		a := startReplica(t, s.Addr(), name, clusterTenantsYAML, nil)
		srv := httptest.NewServer(a.Handler)
		t.Cleanup(srv.Close)
		urls, apps = append(urls, srv.URL), append(apps, a)
	}
	waitFor(t, "both replicas seeing each other", func() bool {
		for _, a := range apps {
			if c := a.Gateway.State().Cluster; c == nil || c.ReplicasAlive != 2 || c.Redis != "ok" {
				return false
			}
		}
		return true
	})
	return urls, apps
}

// chatAs makes one chat call on the gateway at url with the OpenAI SDK as secret.
func chatAs(url, secret string) error {
	c := oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "demo/echo",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello there")}})
	return err
}

// TestReplicasShareClientRateLimit: a key's rpm 3 (its bucket holding one minute's worth)
// is shared by two replicas: three calls spread over both are served, the fourth, on the
// replica that made only one, is 429 client_rate_limited with a Retry-After of about the
// 20 s its next token takes (past the provider's queue_timeout of 2 s).
func TestReplicasShareClientRateLimit(t *testing.T) {
	urls, _ := tenantReplicas(t)
	for i, u := range []string{urls[0], urls[1], urls[0]} {
		if err := chatAs(u, "sk-dave-000001"); err != nil {
			t.Fatalf("dave's call %d: %v", i+1, err)
		}
	}
	var e *oai.Error
	if err := chatAs(urls[1], "sk-dave-000001"); !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "client_rate_limited" {
		t.Fatalf("dave's fourth call within the minute, on r2: %v, want 429 client_rate_limited", err)
	}
	if ra, err := strconv.Atoi(e.Response.Header.Get("Retry-After")); err != nil || ra < 15 || ra > 21 {
		t.Errorf("Retry-After %q, want about 20 s", e.Response.Header.Get("Retry-After"))
	}
}

// TestReplicasShareBudget: a budget spent on one replica is spent on the other: erin's call
// on r1 spends past her budget; once r2 has read the replicas' spend counter (within its
// refresh interval), her call there is 402 budget_exceeded, naming the spend r1 made.
func TestReplicasShareBudget(t *testing.T) {
	urls, apps := tenantReplicas(t)
	if err := chatAs(urls[0], "sk-erin-000001"); err != nil {
		t.Fatalf("erin's first call, on r1: %v", err)
	}
	spentOn := func(a *App) float64 { spent, _, _ := a.tenants().Spend("erin", time.Now()); return spent }
	r1 := spentOn(apps[0])
	if r1 <= 0.000001 {
		t.Fatalf("erin's call on r1 spent $%g, not past her budget of $0.000001: the test needs a priced call", r1)
	}
	waitFor(t, "r2 seeing erin's spend on r1", func() bool { return spentOn(apps[1]) >= r1 })
	var listed struct{ Keys []httpapi.KeyInfo }
	admin(t, urls[1], "GET", "/admin/keys", "", 200, &listed)
	if i := slices.IndexFunc(listed.Keys, func(k httpapi.KeyInfo) bool { return k.Name == "erin" }); i < 0 || listed.Keys[i].SpendUSD < r1 {
		t.Errorf("r2's GET /admin/keys: %+v, want erin's spend_usd at least the $%g spent on r1", listed.Keys, r1)
	}
	var e *oai.Error
	if err := chatAs(urls[1], "sk-erin-000001"); !errors.As(err, &e) || e.StatusCode != 402 || e.Code != "budget_exceeded" {
		t.Fatalf("erin's call on r2 after her budget was spent on r1: %v, want 402 budget_exceeded", err)
	}
	if want := fmt.Sprintf("has spent $%.4f", r1); !strings.Contains(e.Message, want) {
		t.Errorf("402 message %q, want it to name the spend (%s)", e.Message, want)
	}
}

// TestReplicaSpendWithoutRedis: with Redis away a budgeted key's call is served at once on
// the replica's own figure (nothing waits for Redis), and its cost reaches the replicas'
// counter once Redis is back: the other replica then counts it.
func TestReplicaSpendWithoutRedis(t *testing.T) {
	s := redistest.Start(t)
	urls, apps := tenantReplicasOn(t, s)
	s.Stop()
	waitFor(t, "r1 without Redis", func() bool { return apps[0].Gateway.State().Cluster.Redis == "down" })
	began := time.Now()
	if err := chatAs(urls[0], "sk-fay-000001"); err != nil {
		t.Fatalf("fay's call on r1 without Redis: %v", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("fay's call without Redis took %s", d)
	}
	spent, _, _ := apps[0].tenants().Spend("fay", time.Now())
	if spent <= 0 {
		t.Fatalf("r1's own figure for fay: $%g, want her call's cost", spent)
	}
	s.Start()
	waitFor(t, "r2 seeing fay's spend made on r1 while Redis was away", func() bool {
		got, _, _ := apps[1].tenants().Spend("fay", time.Now())
		return got >= spent
	})
}
