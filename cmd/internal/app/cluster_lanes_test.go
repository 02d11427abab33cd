package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/llm"
)

// How a replica publishes the lanes it learns (actors/sharedlanes.go, lua/lanes.lua): a
// rise is a compare-and-set over the value it last saw stored, and one scope's values reach
// Redis in the order they were learned.

// lanesKey is where the shared state keeps the lanes learned for provider demo.
const lanesKey = "{tollgate}:lanes:provider/demo"

// TestLanesRiseRefusedAfterCut: r1 learns 2 lanes and r2 adopts them; then another
// replica's cut to 1 is stored before r2 hears of it; r2's probe up to 3 is refused and r2
// adopts the 1 the shared state holds, which stays stored: a probe never loosens a cut it
// had not heard of.
func TestLanesRiseRefusedAfterCut(t *testing.T) {
	yaml := "providers: [{name: demo, kind: fake, lanes: 4, lanes_probe: 1, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n"
	s := redistest.Start(t)
	stated := &scriptedBackend{errs: []error{&llm.Error{Kind: llm.KindUpstreamRateLimited, StatedLimit: 2, Message: "2 calls at once"}}}
	held := newHeldBackend(0)
	r1 := startReplica(t, s.Addr(), "r1", yaml, map[string]llm.Backend{"demo": stated})
	r2 := startReplica(t, s.Addr(), "r2", yaml, map[string]llm.Backend{"demo": held})
	waitFor(t, "both replicas seeing each other", func() bool {
		c1, c2 := r1.Gateway.State().Cluster, r2.Gateway.State().Cluster
		return c1 != nil && c2 != nil && c1.ReplicasAlive == 2 && c2.ReplicasAlive == 2
	})
	rdb := s.Client()
	lanes := func(a *App, n int, reason string) func() bool {
		return func() bool {
			p := a.Gateway.State().Providers[0]
			return p.EffectiveLanes == n && p.EffectiveLanesReason == reason
		}
	}
	if err := call(context.Background(), r1); err != nil {
		t.Fatalf("the call refused for capacity, then requeued: %v", err)
	}
	waitFor(t, "r2 adopting the 2 lanes r1 learned", lanes(r2, 2, "shared"))
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- call(context.Background(), r2) }() // exits when its call ends
	}
	waitFor(t, "both lanes of r2 running", func() bool { return held.inflight.Load() == 2 })
	// The cut of a replica r2 has not heard from: stored, its notice not yet delivered.
	if err := rdb.Set(context.Background(), lanesKey, "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	close(held.gate) // a success with both lanes busy: r2 probes up to 3
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a held call: %v", err)
		}
	}
	waitFor(t, "r2's rise refused: it adopts the stored 1", lanes(r2, 1, "shared"))
	if v, err := rdb.Get(context.Background(), lanesKey).Result(); err != nil || v != "1" {
		t.Errorf("stored %q, %v; want the cut, 1", v, err)
	}
	if p := r1.Gateway.State().Providers[0]; p.EffectiveLanes != 2 {
		t.Errorf("r1 runs %d lanes: it heard of a refused rise", p.EffectiveLanes)
	}
}

// gatedLearn holds each Learn until release closes, recording its lanes and was.
type gatedLearn struct {
	replicas.Shared
	calls   chan [2]int
	release chan struct{}
}

func (g *gatedLearn) Learn(ctx context.Context, scope string, lanes, was int) (int, error) {
	g.calls <- [2]int{lanes, was}
	select {
	case <-g.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.Shared.Learn(ctx, scope, lanes, was)
}

// TestLanesPublishedInOrder: a replica learns 3 lanes, then 2, while the Learn of 3 has
// not answered; the 2 is sent only after it, over the 3 it stored, and Redis ends with the
// 2 the replica runs (a Learn per change in flight at once could land 3 last).
func TestLanesPublishedInOrder(t *testing.T) {
	stated := func(n int) error {
		return &llm.Error{Kind: llm.KindUpstreamRateLimited, StatedLimit: n, Message: "fewer calls at once"}
	}
	b := &scriptedBackend{errs: []error{stated(3), stated(2)}}
	s := redistest.Start(t)
	var gl *gatedLearn
	g, sh := gatewayOf(t, s.Addr(), "providers: [{name: demo, kind: fake, lanes: 4, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n",
		map[string]llm.Backend{"demo": b}, func(sh *shared) replicas.Shared {
			gl = &gatedLearn{Shared: sh.e, calls: make(chan [2]int, 8), release: make(chan struct{})}
			return gl
		})
	released := false
	t.Cleanup(func() {
		if !released {
			close(gl.release) // before the gateway's shutdown, which the Learn would hold
		}
	})
	sh.setGateway(g)
	ctx := context.Background()
	rdb := s.Client()
	done := make(chan error, 1)
	go func() { // exits when its call ends
		sv, err := g.Start(ctx, "demo/echo", llm.Interactive, &llm.Request{})
		if err == nil {
			for _, err := sv.Stream.Next(); err == nil; _, err = sv.Stream.Next() {
			}
			_ = sv.Stream.Close()
		}
		done <- err
	}()
	if first := <-gl.calls; first != [2]int{3, 0} {
		t.Fatalf("first Learn (lanes, was) = %v, want [3 0]", first)
	}
	if err := <-done; err != nil {
		t.Fatalf("the call refused twice for capacity, then requeued: %v", err)
	}
	waitFor(t, "the replica running 2 lanes", func() bool { return g.State().Providers[0].EffectiveLanes == 2 })
	select {
	case c := <-gl.calls:
		t.Fatalf("a second Learn %v sent while the first had not answered", c)
	case <-time.After(200 * time.Millisecond): // a Learn per change would be here at once
	}
	close(gl.release)
	released = true
	if second := <-gl.calls; second != [2]int{2, 3} {
		t.Fatalf("second Learn (lanes, was) = %v, want [2 3]", second)
	}
	waitFor(t, "Redis holding the 2 the replica runs", func() bool {
		v, err := rdb.Get(ctx, lanesKey).Result()
		return err == nil && v == "2"
	})
}

// gatewayOf starts a gateway of config yaml (without its cluster: section) as replica r1 on
// the redis-server at addr, its shared state wrap(the real one) (nil: the real one), and
// stops both when the test ends. The engine's events reach the gateway once the caller
// calls setGateway.
func gatewayOf(t *testing.T, addr, yaml string, backends map[string]llm.Backend, wrap func(*shared) replicas.Shared) (*actors.Gateway, *shared) {
	t.Helper()
	yaml += fmt.Sprintf("cluster: {redis: {addr: %q}, lease_ttl: 1s, replica: r1}\n", addr)
	cfg, err := config.Parse("c.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := &App{log: zerolog.Nop(), opts: Options{Logger: zerolog.Nop(), Backends: backends}}
	built, err := a.build(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := newShared(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	built.gopts.Shared = sh.e
	if wrap != nil {
		built.gopts.Shared = wrap(sh)
	}
	g, err := actors.New(built.gopts)
	if err != nil {
		_ = sh.e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Shutdown(sctx)
		sh.gw.Store(nil)
		_ = sh.e.Close()
	})
	return g, sh
}
