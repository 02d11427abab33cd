//go:build tollgate_faults

package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/providers/llm"
)

// TestCrashWithLeases: with two replicas sharing a real redis-server, an actor of one
// replica crashes while calls on both hold or wait for leases, some of whose clients hang
// up. Every client is answered (served, a clean error, or its own hang-up), the shared
// lanes are never exceeded, and once the calls end the cluster-wide occupancy is back to
// 0 with both replicas idle: no lease leaks, as none may outlive its call by being renewed.
func TestCrashWithLeases(t *testing.T) {
	for _, f := range []actors.Fault{
		{Actor: "lane", On: "startCall"},
		{Actor: "lane", On: "leased"},
		{Actor: "lane", On: "released"},
		{Actor: "provider", On: "arrive"},
		{Actor: "provider", On: "grants"},
		{Actor: "provider", On: "unleased"},
		{Actor: "provider", On: "leaseFreed"},
		{Actor: "provider", On: "freed"},
		{Actor: "provider", On: "withdraw"},
		{Actor: "request", On: "clientGone"},
		{Actor: "supervisor", On: "offer"},
	} {
		t.Run(f.Actor+"/"+f.On, func(t *testing.T) {
			b := newHeldBackend(30 * time.Millisecond)
			apps := startReplicas(t, 2, 2, "30s", b)
			if err := apps[0].Gateway.InjectFault(f); err != nil {
				t.Fatal(err)
			}
			loadWithHangUps(t, apps, 16)
			if n := apps[0].Gateway.FaultsFired(); n != 1 {
				t.Fatalf("the fault fired %d times, want once: the load never made the actor handle %s", n, f.On)
			}
			if most := b.most.Load(); most > 2 {
				t.Errorf("the backend ran %d calls at once; the replicas share 2 lanes", most)
			}
			waitFor(t, "the replicas idle and the cluster-wide occupancy back to 0", func() bool {
				for _, a := range apps {
					st := a.Gateway.State()
					p := st.Providers[0]
					if st.Running != 0 || p.Queued != 0 || p.RunningCluster == nil || *p.RunningCluster != 0 ||
						st.Cluster.RunningCluster == nil || *st.Cluster.RunningCluster != 0 {
						return false
					}
				}
				return true
			})
			// Both shared lanes are there to be used again.
			b.most.Store(0)
			loadWithHangUps(t, apps[:1], 4)
			if most := b.most.Load(); most != 2 {
				t.Errorf("after the crash a burst ran %d calls at once, want the 2 shared lanes", most)
			}
		})
	}
}

// loadWithHangUps runs n calls spread over apps: of every three, one is served, one hung
// up after 15 ms (most while queued), one hung up as soon as it runs. It fails unless each
// is answered cleanly within 30 s.
func loadWithHangUps(t *testing.T, apps []*App, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var err error
			switch a := apps[i%len(apps)]; i % 3 {
			case 0:
				err = call(ctx, a)
			case 1:
				ctx, cancel = context.WithTimeout(ctx, 15*time.Millisecond)
				defer cancel()
				err = call(ctx, a)
			case 2:
				err = hangUpRunning(ctx, cancel, a)
			}
			if _, typed := errors.AsType[*llm.Error](err); err != nil && !typed && ctx.Err() == nil {
				t.Errorf("call %d: %v, want an answer, a clean error or its own hang-up", i, err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }() // exits when every call has returned
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a client was left unanswered for 30 s")
	}
}

// hangUpRunning starts a call of demo/echo on a and hangs up (cancel, ctx's) once it runs.
func hangUpRunning(ctx context.Context, cancel context.CancelFunc, a *App) error {
	sv, err := a.Gateway.Start(ctx, "demo/echo", llm.Interactive, &llm.Request{})
	if err != nil {
		return err
	}
	defer sv.Stream.Close()
	cancel()
	for {
		if _, err := sv.Stream.Next(); err != nil {
			return nil
		}
	}
}

// TestCrashOnSharedBreaker: a provider actor that crashes on the news that another replica's
// breaker opened handles it again in its rebuild, and its waiting call is answered at once
// (503 until the probe), not left to its queue_timeout.
func TestCrashOnSharedBreaker(t *testing.T) {
	s := redistest.Start(t)
	down := func() error { return &llm.Error{Kind: llm.KindUpstream, Message: "the backend is down"} }
	failing := &scriptedBackend{errs: []error{down(), down()}}
	held := newHeldBackend(time.Minute)
	conf := func(lanes int) string {
		return fmt.Sprintf("providers: [{name: demo, kind: fake, lanes: %d, retries: 0, breaker: {failures: 2, open_for: 1m}, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n", lanes)
	}
	first := startReplica(t, s.Addr(), "r1", conf(2), map[string]llm.Backend{"demo": failing})
	second := startReplica(t, s.Addr(), "r2", conf(1), map[string]llm.Backend{"demo": held})
	if err := second.Gateway.InjectFault(actors.Fault{Actor: "provider", On: "breakerShared"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The second replica's one lane runs a held call, and another call waits in its queue.
	running, err := second.Gateway.Start(ctx, "demo/echo", llm.Interactive, &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer running.Stream.Close()
	waited := make(chan error, 1)
	go func() { // exits when Start returns: answered, or ctx's end
		sv, err := second.Gateway.Start(ctx, "demo/echo", llm.Interactive, &llm.Request{})
		if err == nil {
			_ = sv.Stream.Close()
		}
		waited <- err
	}()
	waitFor(t, "a call waiting on the second replica", func() bool { return second.Gateway.State().Providers[0].Queued == 1 })
	// The first replica's backend fails twice: its breaker opens and tells the second.
	for range 2 {
		if err := call(ctx, first); err == nil {
			t.Fatal("a call to a backend that is down succeeded")
		}
	}
	select {
	case err := <-waited:
		if le, ok := errors.AsType[*llm.Error](err); !ok || le.Kind != llm.KindProviderUnavailable {
			t.Fatalf("the waiting call: %v, want 503 provider_unavailable until the shared probe", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call still waited 10 s after the other replica's breaker opened")
	}
	if n := second.Gateway.FaultsFired(); n != 1 {
		t.Fatalf("the fault fired %d times, want once", n)
	}
}
