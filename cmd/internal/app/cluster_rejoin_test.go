package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/cluster"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
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
