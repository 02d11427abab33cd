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
	apps, s, cooling := unheardCooldown(t)
	rdb := s.Client()
	ctx := context.Background()
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resubscribed replica reading the cooldown in force", cooling)
	if c := apps[0].Gateway.State().Cluster; c == nil || c.Redis != "ok" {
		t.Errorf("cluster %+v: Redis was never away", c)
	}
}

// unheardCooldown is one replica of a provider with two keys, and a cooldown of its second
// key that another replica left in Redis without this one hearing of it (a notice lost to an
// outage or a dropped subscription). cooling reports whether the replica rests that key; it
// does not yet.
func unheardCooldown(t *testing.T) ([]*App, *redistest.Server, func() bool) {
	t.Helper()
	_, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}})
	s := redistest.Start(t)
	apps := replicasOn(t, s, 1, fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, keys: [k1, k2], lanes: 2, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}]\n", srv.URL), nil)
	keyCools := func(k int) bool {
		ks := apps[0].Gateway.State().Providers[0].Keys
		return len(ks) == 2 && ks[k].State == "cooling"
	}
	// The reads the start asked for (at New's end, and when Redis was first seen) run off
	// the actor and may land after the second key's cooldown below is written, which is the
	// test's to be read by its event. So the test asks for a read of its own once both were
	// asked for, and waits until a first key's cooldown written before it is read: the
	// provider started the start's reads before that one.
	waitFor(t, "the replica's read at Redis's first answer asked for", apps[0].shared.redis.Load)
	if err := s.Client().Set(context.Background(), "{tollgate}:cool:key/o/0/0", "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	apps[0].Gateway.ReadShared()
	waitFor(t, "the replica's reads of the start done", func() bool { return keyCools(0) })
	if err := s.Client().Set(context.Background(), "{tollgate}:cool:key/o/0/1", "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	cooling := func() bool { return keyCools(1) }
	if cooling() {
		t.Fatal("the key cools before anything said so")
	}
	return apps, s, cooling
}

// TestRejoinBeforeGatewayRead: Redis leaves and returns after the gateway's start read but
// before the engine's events reach the gateway; the rejoin is not swallowed: once they do
// (setGateway), the gateway reads the cooldowns in force.
func TestRejoinBeforeGatewayRead(t *testing.T) {
	_, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}})
	s := redistest.Start(t)
	rdb := s.Client()
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

// TestPartitionedReplicaReadsAtRejoin: while one replica is cut off from Redis (the others
// reach it), another learns that the backend takes 2 lanes and opens its breaker; the
// notices are lost to the cut replica, which reads both when it reaches Redis again.
func TestPartitionedReplicaReadsAtRejoin(t *testing.T) {
	b := learningBackend()
	yaml := "providers: [{name: demo, kind: fake, lanes: 4, retries: 0, breaker: {failures: 2, open_for: 1m}, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n"
	r1, cut, p := cutScene(t, yaml, b, b)
	for range 2 { // the first is refused for capacity, requeued, then fails; the second fails
		_ = call(context.Background(), r1)
	}
	waitFor(t, "the first replica learning 2 lanes and opening its breaker", learnedAndOpen(r1, ""))
	heardNothing(t, cut, "the cut replica")
	p.SetCut(false)
	waitFor(t, "the healed replica reading the lanes and the breaker in force", learnedAndOpen(cut, "shared"))
}

// TestRejoinPublishes: a replica cut off from Redis learns that the backend takes 2 lanes
// and opens its breaker; nothing reaches the other replica then. When it reaches Redis
// again it pushes both before it reads, and the other replica takes them on. (run_timeout
// 2s: the outage rule lets a replica that held nothing start calls once every call started
// before the outage has surely ended.)
func TestRejoinPublishes(t *testing.T) {
	yaml := "providers: [{name: demo, kind: fake, lanes: 4, retries: 0, breaker: {failures: 2, open_for: 1m}, run_timeout: 2s, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n"
	r1, cut, p := cutScene(t, yaml, &scriptedBackend{}, learningBackend())
	for range 2 { // the first is refused for capacity, requeued, then fails; the second fails
		_ = call(context.Background(), cut)
	}
	waitFor(t, "the cut replica learning 2 lanes and opening its breaker", learnedAndOpen(cut, ""))
	heardNothing(t, r1, "r1")
	p.SetCut(false)
	pushed := learnedAndOpen(r1, "shared")
	waitFor(t, "r1 taking on what the healed replica pushed", func() bool {
		return pushed() && r1.Gateway.State().Providers[0].Breaker.RetryAfterMs > 30_000
	})
}

// learningBackend states that it takes 2 calls, then fails twice, then serves.
func learningBackend() *scriptedBackend {
	down := &llm.Error{Kind: llm.KindUpstream, Message: "the backend is down"}
	return &scriptedBackend{errs: []error{&llm.Error{Kind: llm.KindUpstreamRateLimited, StatedLimit: 2, Message: "2 concurrent calls at most"}, down, down}}
}

// cutScene starts replica r1 on a real redis-server and replica cut behind a proxy to it,
// each of config yaml with its own backend for provider demo, waits until they see each
// other, and cuts the second off Redis; p.SetCut(false) heals it.
func cutScene(t *testing.T, yaml string, r1Backend, cutBackend llm.Backend) (r1, cut *App, p *redistest.Proxy) {
	t.Helper()
	s := redistest.Start(t)
	p = redistest.NewProxy(t, s.Addr())
	r1 = startReplica(t, s.Addr(), "r1", yaml, map[string]llm.Backend{"demo": r1Backend})
	cut = startReplica(t, p.Addr(), "cut", yaml, map[string]llm.Backend{"demo": cutBackend})
	redis := func(a *App, want string) func() bool {
		return func() bool {
			c := a.Gateway.State().Cluster
			return c != nil && c.Redis == want && c.ReplicasAlive == 2
		}
	}
	waitFor(t, "both replicas seeing each other", func() bool { return redis(r1, "ok")() && redis(cut, "ok")() })
	p.SetCut(true)
	waitFor(t, "the cut replica without Redis", redis(cut, "down"))
	return r1, cut, p
}

// learnedAndOpen reports whether a's provider runs 2 effective lanes (for reason, unless "")
// with its breaker open.
func learnedAndOpen(a *App, reason string) func() bool {
	return func() bool {
		p := a.Gateway.State().Providers[0]
		return p.EffectiveLanes == 2 && (reason == "" || p.EffectiveLanesReason == reason) && p.Breaker != nil && p.Breaker.State == "open"
	}
}

// heardNothing fails t unless a's provider still has its 4 lanes and a closed breaker.
func heardNothing(t *testing.T, a *App, who string) {
	t.Helper()
	if p := a.Gateway.State().Providers[0]; p.EffectiveLanes != 4 || p.Breaker != nil && p.Breaker.State != "closed" {
		t.Fatalf("%s heard what it cannot hear: %d lanes, breaker %+v", who, p.EffectiveLanes, p.Breaker)
	}
}
