package app

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/providers/llm"
)

// Client keys' limits across the replicas (SPEC §18, "Several replicas"), with a real
// redis-server.

// clientCtx is a context for calls of client key c.
func clientCtx(c llm.Client) context.Context { return llm.WithClient(context.Background(), c) }

// TestReplicasShareClientMaxRunning: a key with max_running 2 holds across two replicas.
// Four calls of it, two on each, held by the backend: two run, the two on the other
// replica wait in their queue (and another key's call starts past them there); once the
// first two end, the others run. A timed backend then sees at most 2 of the key's calls at
// once in a burst over both replicas, and every call is served.
func TestReplicasShareClientMaxRunning(t *testing.T) {
	gated, timed := newHeldBackend(0), newHeldBackend(50*time.Millisecond)
	apps := replicasOf(t, 2, "providers:\n"+
		"  - {name: demo, kind: fake, lanes: 8, model_lanes: 8, queue_length: 40, queue_timeout: 30s, models: [{id: echo}]}\n"+
		"  - {name: timed, kind: fake, lanes: 8, model_lanes: 8, queue_length: 40, queue_timeout: 30s, models: [{id: echo}]}\n",
		map[string]llm.Backend{"demo": gated, "timed": timed})
	alice := clientCtx(llm.Client{Name: "alice", MaxRunning: 2})
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 2 {
		wg.Go(func() {
			if err := call(alice, apps[0]); err != nil {
				t.Errorf("alice's call %d on r1: %v", i, err)
			}
		})
	}
	<-gated.opened
	<-gated.opened
	for i := range 2 {
		wg.Go(func() {
			if err := call(alice, apps[1]); err != nil {
				t.Errorf("alice's call %d on r2: %v", i, err)
			}
		})
	}
	waitFor(t, "alice's two calls waiting on r2", func() bool {
		return apps[1].Gateway.State().Providers[0].QueuedByClient["alice"] == 2
	})
	wg.Go(func() {
		if err := call(clientCtx(llm.Client{Name: "bob"}), apps[1]); err != nil {
			t.Errorf("bob's call on r2: %v", err)
		}
	})
	opens(t, gated.opened, 5*time.Second, "bob's call did not start past alice's held calls")
	opensNot(t, gated.opened, 200*time.Millisecond, "a third call of alice opened with her max_running 2 running on the other replica")
	if n := gated.inflight.Load(); n != 3 {
		t.Errorf("the backend runs %d calls, want alice's 2 and bob's", n)
	}
	close(gated.gate) // every call ends; alice's waiting two run then
	wg.Wait()
	if got := len(gated.opens); got != 5 {
		t.Errorf("%d calls opened in all, want 5", got)
	}

	for i := range 8 {
		wg.Go(func() {
			if err := callModel(alice, apps[i%2], "timed/echo"); err != nil {
				t.Errorf("alice's burst call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if most := timed.most.Load(); most != 2 {
		t.Errorf("alice's burst over two replicas ran %d at once, want her max_running 2", most)
	}
}

// TestReplicaClientQueueTimeout: a call of a key the replicas run at its max_running waits
// in its queue, and past its queue_timeout is told 429 provider_queue_timeout naming the
// key's cap across the replicas as what held it.
func TestReplicaClientQueueTimeout(t *testing.T) {
	b := newHeldBackend(0)
	apps := startReplicas(t, 2, 4, "500ms", b)
	alice := clientCtx(llm.Client{Name: "alice", MaxRunning: 1})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.gate) // first: the call ends, then it is waited for
	wg.Go(func() { _ = call(alice, apps[0]) })
	<-b.opened
	err := call(alice, apps[1])
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindQueueTimeout ||
		!strings.Contains(le.Message, `run client key "alice"'s max_running (1) full`) {
		t.Fatalf("a call of a key at its max_running on the other replica: %v, want 429 provider_queue_timeout naming the key", err)
	}
}

// TestReplicasClientTokensWait: a key's tpm bucket is shared: a call on one replica that
// takes nearly all of it makes the next call on the other replica wait for the tokens it
// lacks (within its queue_timeout), then run.
func TestReplicasClientTokensWait(t *testing.T) {
	b := newHeldBackend(time.Millisecond)
	apps := startReplicas(t, 2, 4, "30s", b)
	carol := clientCtx(llm.Client{Name: "carol", TPM: 600}) // 10 tokens a second, 600 at once
	ask := func(a *App, out int) error {
		sv, err := a.Gateway.Start(carol, "demo/echo", llm.Interactive, &llm.Request{MaxTokens: &out})
		if err == nil {
			_ = sv.Stream.Close()
		}
		return err
	}
	if err := ask(apps[0], 595); err != nil {
		t.Fatalf("carol's first call: %v", err)
	}
	began := time.Now()
	if err := ask(apps[1], 20); err != nil {
		t.Fatalf("carol's second call, on r2: %v", err)
	}
	if waited := time.Since(began); waited < time.Second {
		t.Errorf("carol's second call ran after %s; her shared bucket had about 5 of its 20+ tokens, 10 a second", waited)
	}
}

// TestReplicaBatchCountsAgainstClientCap: a batch of a key with max_running 1 starts whole
// on one replica, past the cap (the batch rule), and its members count against the cap on
// every replica: a call of the key on the other replica waits until the batch has ended,
// while another key's call starts there at once.
func TestReplicaBatchCountsAgainstClientCap(t *testing.T) {
	b := newHeldBackend(0)
	apps := replicasOf(t, 2, "limits: {max_running: 8}\nproviders: [{name: demo, kind: fake, lanes: 8, model_lanes: 8, queue_length: 40, queue_timeout: 30s, models: [{id: echo}]}]\n",
		map[string]llm.Backend{"demo": b})
	alice := clientCtx(llm.Client{Name: "alice", MaxRunning: 1})
	members, err := apps[0].Gateway.StartBatch(alice, []string{"demo/echo", "demo/echo"}, llm.Interactive, &llm.Request{})
	if err != nil {
		t.Fatalf("a batch of 2 of a key with max_running 1: %v, want it admitted whole", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, m := range members {
		if m.Err != nil {
			t.Fatalf("member %d: %v", i, m.Err)
		}
		wg.Go(func() {
			defer m.Stream.Close()
			for {
				if _, err := m.Stream.Next(); err != nil {
					return
				}
			}
		})
	}
	opens(t, b.opened, 5*time.Second, "the batch's first member did not open")
	opens(t, b.opened, 5*time.Second, "the batch's second member did not open")
	wg.Go(func() {
		if err := call(alice, apps[1]); err != nil {
			t.Errorf("alice's call on r2: %v", err)
		}
	})
	waitFor(t, "alice's call waiting on r2", func() bool {
		return apps[1].Gateway.State().Providers[0].QueuedByClient["alice"] == 1
	})
	wg.Go(func() {
		if err := call(clientCtx(llm.Client{Name: "bob"}), apps[1]); err != nil {
			t.Errorf("bob's call on r2: %v", err)
		}
	})
	opens(t, b.opened, 5*time.Second, "bob's call did not start past alice's held call")
	opensNot(t, b.opened, 200*time.Millisecond, "alice's call started on r2 while her batch ran on r1 past her max_running 1")
	close(b.gate) // the batch and bob's call end; alice's call runs then
	wg.Wait()
	if got := len(b.opens); got != 4 {
		t.Errorf("%d calls opened in all, want the batch's 2, bob's and alice's", got)
	}
}

// TestReplicaClientShareWithoutRedis: with Redis away a key's max_running is a limit like
// any other: each of two replicas runs the key on its share (2 / 2 = 1), at once, while
// another key's calls still start there.
func TestReplicaClientShareWithoutRedis(t *testing.T) {
	s := redistest.Start(t)
	b := newHeldBackend(0)
	apps := replicasOn(t, s, 2, "limits: {max_running: 8}\nproviders: [{name: demo, kind: fake, lanes: 8, model_lanes: 8, queue_length: 40, queue_timeout: 30s, models: [{id: echo}]}]\n",
		map[string]llm.Backend{"demo": b})
	s.Stop()
	waitFor(t, "both replicas without Redis", func() bool {
		return apps[0].Gateway.State().Cluster.Redis == "down" && apps[1].Gateway.State().Cluster.Redis == "down"
	})
	alice := clientCtx(llm.Client{Name: "alice", MaxRunning: 2})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.gate) // first: the calls end, then they are waited for
	for range 2 {
		wg.Go(func() { _ = call(alice, apps[0]) })
	}
	opens(t, b.opened, 10*time.Second, "no call of alice started on r1 without Redis: its share is 1")
	wg.Go(func() { _ = call(clientCtx(llm.Client{Name: "bob"}), apps[0]) })
	opens(t, b.opened, 5*time.Second, "bob's call did not start past alice's")
	opensNot(t, b.opened, 300*time.Millisecond, "a second call of alice started on r1 without Redis, past its share (1) of her max_running 2")
	// Each notice (a poll) offers it again, so it may be between its queue and a refused
	// acquire when looked at: it is seen waiting in its queue between them.
	waitFor(t, "alice's second call waiting in r1's queue", func() bool {
		return apps[0].Gateway.State().Providers[0].QueuedByClient["alice"] == 1
	})
}

// opens waits within for a call to open at the backend (opened), failing with why if none does.
func opens(t *testing.T, opened <-chan struct{}, within time.Duration, why string) {
	t.Helper()
	select {
	case <-opened:
	case <-time.After(within):
		t.Fatal(why)
	}
}

// opensNot fails with why if a call opens at the backend within the window: a call that
// would start starts within it.
func opensNot(t *testing.T, opened <-chan struct{}, window time.Duration, why string) {
	t.Helper()
	select {
	case <-opened:
		t.Fatal(why)
	case <-time.After(window):
	}
}
