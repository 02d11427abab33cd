package app

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/store/pgtest"
	"github.com/tollgate/tollgate/providers/llm"
)

// sharedStoreYAML: two replicas on one PostgreSQL store and no config client key, so that
// a replica is open to every caller until a run-time key exists anywhere.
const sharedStoreYAML = `
auth: {admin_keys: [sk-admin-000001]}
store: {postgres: %q}
providers:
  - {name: demo, kind: fake, models: [{id: echo}]}
  - {name: held, kind: fake, lanes: 1, queue_timeout: 30s, models: [{id: echo}]}
`

// TestReplicasShareRuntimeKeys: a key made through one replica's admin API is taken by the
// other from the shared store — it closes the other's open door to strangers and serves the
// key's calls, a key made once keys are known at its first call — and the key's revocation on the first answers the second's queued call of it
// 401 and refuses its next, while its running call finishes.
func TestReplicasShareRuntimeKeys(t *testing.T) {
	dsn := pgtest.Start(t)
	b := newHeldBackend(0)
	var urls []string
	var apps []*App
	for range 2 {
		cfg, err := config.Parse("c.yaml", []byte(fmt.Sprintf(sharedStoreYAML, dsn)), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(context.Background(), cfg, Options{Logger: zerolog.Nop(), Backends: map[string]llm.Backend{"held": b}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Drain(context.Background()) })
		srv := httptest.NewServer(a.Handler)
		t.Cleanup(srv.Close)
		urls, apps = append(urls, srv.URL), append(apps, a)
	}
	chat := func(ctx context.Context, url, secret, model string) int {
		c := oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(secret), option.WithMaxRetries(0))
		_, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: model,
			Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello there")}})
		var e *oai.Error
		switch {
		case err == nil:
			return 200
		case errors.As(err, &e):
			return e.StatusCode
		}
		return -1
	}
	ctx := context.Background()
	if got := chat(ctx, urls[1], "sk-stranger", "demo/echo"); got != 200 {
		t.Fatalf("before any key exists r2 answers a stranger %d, want 200 (no client keys: open)", got)
	}

	var made struct{ Secret string }
	admin(t, urls[0], "POST", "/admin/keys", `{"name":"bob"}`, 201, &made)
	waitFor(t, "r2 refusing strangers once a key exists", func() bool { return chat(ctx, urls[1], "sk-stranger", "demo/echo") == 401 })
	if got := chat(ctx, urls[1], made.Secret, "demo/echo"); got != 200 {
		t.Fatalf("r2 answers the key made on r1 %d, want 200", got)
	}
	// With keys known, a key made on r1 works on r2 at once, before r2's next refresh: r2
	// looks a secret it does not know up in the store.
	var carol struct{ Secret string }
	admin(t, urls[0], "POST", "/admin/keys", `{"name":"carol"}`, 201, &carol)
	if got := chat(ctx, urls[1], carol.Secret, "demo/echo"); got != 200 {
		t.Fatalf("r2 answers a key made on r1 the moment before %d, want 200", got)
	}

	running := make(chan int, 1)
	go func() { running <- chat(ctx, urls[1], made.Secret, "held/echo") }()
	<-b.opened
	queued := make(chan int, 1)
	go func() { queued <- chat(ctx, urls[1], made.Secret, "held/echo") }()
	waitFor(t, "bob's second call queued on r2", func() bool { return apps[1].Gateway.State().Queued == 1 })

	admin(t, urls[0], "DELETE", "/admin/keys/bob", "", 200, nil)
	select {
	case got := <-queued:
		if got != 401 {
			t.Errorf("bob's queued call on r2 after his key was revoked on r1: %d, want 401", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("bob's queued call on r2 was not answered after his key was revoked on r1")
	}
	if got := chat(ctx, urls[1], made.Secret, "demo/echo"); got != 401 {
		t.Errorf("bob's next call on r2: %d, want 401", got)
	}
	close(b.gate)
	if got := <-running; got != 200 {
		t.Errorf("bob's running call on r2: %d, want 200 (a revocation lets it finish)", got)
	}
}
