package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/cluster"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/providers/llm"
)

// TestResubscribedReadsCooldowns: when only a replica's pub/sub connection drops (Redis
// answers throughout), what was announced meanwhile is lost to it; when go-redis
// subscribes again, the replica reads the cooldowns in force.
func TestResubscribedReadsCooldowns(t *testing.T) {
	_, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}})
	s := redistest.Start(t)
	apps := replicasOn(t, s, 1, fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, keys: [k1, k2], lanes: 2, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}]\n", srv.URL), nil)
	rdb := s.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	// A cooldown another replica set while this one's subscription was down: in Redis, its
	// notice lost.
	if err := rdb.Set(ctx, "{tollgate}:cool:key/o/0/1", "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	cooling := func() bool {
		ks := apps[0].Gateway.State().Providers[0].Keys
		return len(ks) == 2 && ks[1].State == "cooling"
	}
	if cooling() {
		t.Fatal("the key cools before anything said so")
	}
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resubscribed replica reading the cooldown in force", cooling)
	if c := apps[0].Gateway.State().Cluster; c == nil || c.Redis != "ok" {
		t.Errorf("cluster %+v: Redis was never away", c)
	}
}

// TestRejoinBeforeGatewayRead: Redis leaves and returns after the gateway's start read but
// before the engine's events reach the gateway; the rejoin is not swallowed: once they do
// (setGateway), the gateway reads the cooldowns in force.
func TestRejoinBeforeGatewayRead(t *testing.T) {
	_, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}})
	s := redistest.Start(t)
	rdb := s.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	cool := func(key string) {
		t.Helper()
		if err := rdb.Set(context.Background(), "{tollgate}:cool:"+key, "1", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cool("key/o/0/0") // read at the start, in the one round trip that also reads key 1
	g, sh := gatewayOf(t, s.Addr(), fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, keys: [k1, k2], lanes: 2, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}]\n", srv.URL), nil, nil)
	keys := func() []string {
		var st []string
		for _, k := range g.State().Providers[0].Keys {
			st = append(st, k.State)
		}
		return st
	}
	waitFor(t, "the start read done", func() bool { k := keys(); return len(k) == 2 && k[0] == "cooling" })
	cool("key/o/0/1")                                             // while this replica is away, so never heard
	sh.notify(cluster.Event{Kind: cluster.Changed, Redis: false}) // the outage, as the engine tells it
	sh.notify(cluster.Event{Kind: cluster.Changed, Redis: true})  // and the return, no gateway set yet
	sh.setGateway(g)
	waitFor(t, "the gateway reading the cooldown in force", func() bool { k := keys(); return len(k) == 2 && k[1] == "cooling" })
}

// TestRejoinPublishes: a replica cut off from Redis learns that the backend takes 2 lanes
// and opens its breaker; nothing reaches the other replica then. When it reaches Redis
// again it pushes both before it reads, and the other replica takes them on. (run_timeout
// 2s: the outage rule lets a replica that held nothing start calls once every call started
// before the outage has surely ended.)
func TestRejoinPublishes(t *testing.T) {
	down := &llm.Error{Kind: llm.KindUpstream, Message: "the backend is down"}
	cutB := &scriptedBackend{errs: []error{&llm.Error{Kind: llm.KindUpstreamRateLimited, StatedLimit: 2, Message: "2 concurrent calls at most"}, down, down}}
	yaml := "providers: [{name: demo, kind: fake, lanes: 4, retries: 0, breaker: {failures: 2, open_for: 1m}, run_timeout: 2s, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n"
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	r1 := startReplica(t, s.Addr(), "r1", yaml, map[string]llm.Backend{"demo": &scriptedBackend{}})
	cut := startReplica(t, p.Addr(), "cut", yaml, map[string]llm.Backend{"demo": cutB})
	redis := func(a *App, want string) func() bool {
		return func() bool {
			c := a.Gateway.State().Cluster
			return c != nil && c.Redis == want && c.ReplicasAlive == 2
		}
	}
	waitFor(t, "both replicas seeing each other", func() bool { return redis(r1, "ok")() && redis(cut, "ok")() })
	p.SetCut(true)
	waitFor(t, "the cut replica without Redis", redis(cut, "down"))
	for range 2 { // the first is refused for capacity, requeued, then fails; the second fails
		_ = call(context.Background(), cut)
	}
	waitFor(t, "the cut replica learning 2 lanes and opening its breaker", func() bool {
		p := cut.Gateway.State().Providers[0]
		return p.EffectiveLanes == 2 && p.Breaker != nil && p.Breaker.State == "open"
	})
	if p := r1.Gateway.State().Providers[0]; p.EffectiveLanes != 4 || p.Breaker != nil && p.Breaker.State != "closed" {
		t.Fatalf("r1 heard what the cut replica could not say: %d lanes, breaker %+v", p.EffectiveLanes, p.Breaker)
	}
	p.SetCut(false)
	waitFor(t, "r1 taking on what the healed replica pushed", func() bool {
		p := r1.Gateway.State().Providers[0]
		return p.EffectiveLanes == 2 && p.EffectiveLanesReason == "shared" && p.Breaker != nil && p.Breaker.State == "open" && p.Breaker.RetryAfterMs > 30_000
	})
}
