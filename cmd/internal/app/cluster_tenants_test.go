package app

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
)

// clusterTenantsYAML: client keys with a shared rate limit and a budget, on replicas that
// each keep their own SQLite store.
const clusterTenantsYAML = `
auth:
  api_keys:
    - {name: dave, key: sk-dave-000001, rate_limit: {rpm: 3}}
    - {name: erin, key: sk-erin-000001, budget: {usd: 0.000001, period: day}}
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
	s := redistest.Start(t)
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
