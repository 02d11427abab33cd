package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/providers/llm"
)

// heldBackend is one backend behind several replicas that counts its own concurrency: a
// call runs until its hold passes (or, with hold 0, until the gate closes) or its context
// ends.
type heldBackend struct {
	hold     time.Duration
	gate     chan struct{}
	opened   chan struct{}
	inflight atomic.Int32
	most     atomic.Int32
	mu       sync.Mutex
	opens    []time.Time // when each call opened
}

func newHeldBackend(hold time.Duration) *heldBackend {
	return &heldBackend{hold: hold, gate: make(chan struct{}), opened: make(chan struct{}, 64)}
}

func (b *heldBackend) Open(ctx context.Context, _ *llm.Request) (llm.Stream, error) {
	b.mu.Lock()
	b.opens = append(b.opens, time.Now())
	b.mu.Unlock()
	n := b.inflight.Add(1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	b.opened <- struct{}{}
	return &heldStream{b: b, ctx: ctx}, nil
}

type heldStream struct {
	b      *heldBackend
	ctx    context.Context
	closed bool
}

func (s *heldStream) Next() (llm.Chunk, error) {
	var hold <-chan time.Time
	if s.b.hold > 0 {
		t := time.NewTimer(s.b.hold)
		defer t.Stop()
		hold = t.C
	}
	select {
	case <-hold:
	case <-s.b.gate:
	case <-s.ctx.Done():
		return llm.Chunk{}, s.ctx.Err()
	}
	return llm.Chunk{}, io.EOF
}

func (s *heldStream) Close() error {
	if !s.closed {
		s.closed = true
		s.b.inflight.Add(-1)
	}
	return nil
}

// startReplicas starts n gateways sharing one real redis-server, each with provider demo
// (lanes lanes) in front of b, and waits until each sees the others.
func startReplicas(t *testing.T, n, lanes int, queueTimeout string, b *heldBackend) []*App {
	t.Helper()
	return replicasOf(t, n, fmt.Sprintf("limits: {max_running: 8}\nproviders: [{name: demo, kind: fake, lanes: %d, queue_length: 40, queue_timeout: %s, models: [{id: echo}]}]\n",
		lanes, queueTimeout), map[string]llm.Backend{"demo": b})
}

// replicasOf starts n gateways of config yaml (without its cluster: section) sharing one
// real redis-server, and waits until each sees the others.
func replicasOf(t *testing.T, n int, yaml string, backends map[string]llm.Backend) []*App {
	t.Helper()
	return replicasOn(t, redistest.Start(t), n, yaml, backends)
}

// replicasOn is replicasOf on redis-server s.
func replicasOn(t *testing.T, s *redistest.Server, n int, yaml string, backends map[string]llm.Backend) []*App {
	t.Helper()
	var apps []*App
	for i := range n {
		apps = append(apps, startReplica(t, s.Addr(), fmt.Sprintf("r%d", i+1), yaml, backends))
	}
	waitFor(t, "every replica seeing the others", func() bool {
		for _, a := range apps {
			if c := a.Gateway.State().Cluster; c == nil || c.ReplicasAlive != n || c.Redis != "ok" {
				return false
			}
		}
		return true
	})
	return apps
}

// startReplica starts replica name of config yaml (without its cluster: section) on the
// redis-server at addr, drained when the test ends.
func startReplica(t *testing.T, addr, name, yaml string, backends map[string]llm.Backend) *App {
	t.Helper()
	yaml += fmt.Sprintf("cluster: {redis: {addr: %q}, lease_ttl: 1s, replica: %s}\n", addr, name)
	cfg, err := config.Parse("c.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg, Options{StateDir: t.TempDir(), Logger: zerolog.Nop(), Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Drain(context.Background()) })
	return a
}

// call runs one chat call of demo/echo on a to its end; it returns Start's error.
func call(ctx context.Context, a *App) error { return callModel(ctx, a, "demo/echo") }

func callModel(ctx context.Context, a *App, model string) error {
	sv, err := a.Gateway.Start(ctx, model, llm.Interactive, &llm.Request{})
	if err != nil {
		return err
	}
	defer sv.Stream.Close()
	for {
		if _, err := sv.Stream.Next(); err != nil {
			return nil
		}
	}
}

// TestReplicasShareLanes: a burst spread over two replicas never runs more than the
// provider's lanes at once on the backend they share, and every call is served.
func TestReplicasShareLanes(t *testing.T) {
	b := newHeldBackend(20 * time.Millisecond)
	apps := startReplicas(t, 2, 2, "30s", b)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 24 {
		wg.Go(func() {
			if err := call(context.Background(), apps[i%2]); err != nil {
				t.Errorf("call %d: %v", i, err)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if most := b.most.Load(); most != 2 {
		t.Errorf("the backend ran %d calls at once; the replicas share 2 lanes (and a burst fills them)", most)
	}
}

// TestHangUpFreesAnotherReplicasCall: with the shared lanes full on one replica, a call on
// the other waits (its /admin/state says why and what runs where); one client's hang-up
// starts it.
func TestHangUpFreesAnotherReplicasCall(t *testing.T) {
	b := newHeldBackend(0)
	apps := startReplicas(t, 2, 2, "30s", b)
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.gate) // first: the calls end, then they are waited for
	wg.Go(func() { _ = call(ctx, apps[0]) })
	wg.Go(func() { _ = call(context.Background(), apps[0]) })
	<-b.opened
	<-b.opened
	waiting := make(chan error, 1)
	go func() { waiting <- call(context.Background(), apps[1]) }() // exits when the call ends (the gate closes)
	waitFor(t, "the call queued on the other replica", func() bool {
		st := apps[1].Gateway.State()
		p := st.Providers[0]
		return p.Queued == 1 && p.Running == 0 && p.RunningCluster != nil && *p.RunningCluster == 2 &&
			p.RunningByReplica["r1"] == 2 && st.Cluster.RunningCluster != nil && *st.Cluster.RunningCluster == 2
	})
	select {
	case <-b.opened:
		t.Fatal("a third call opened with two shared lanes busy")
	default:
	}
	hangUp()
	select {
	case <-b.opened:
	case err := <-waiting:
		t.Fatalf("the waiting call ended before it ran: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the hang-up on one replica did not start the call waiting on the other")
	}
	if most := b.most.Load(); most > 2 {
		t.Errorf("the backend ran %d calls at once, with 2 shared lanes", most)
	}
}

// TestReplicaQueueTimeout: a call that waits for the replicas' shared lane past its
// queue_timeout is told 429 provider_queue_timeout, naming the replicas as what held it,
// with a Retry-After.
func TestReplicaQueueTimeout(t *testing.T) {
	b := newHeldBackend(0)
	apps := startReplicas(t, 2, 1, "500ms", b)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.gate) // first: the call ends, then it is waited for
	wg.Go(func() { _ = call(context.Background(), apps[0]) })
	<-b.opened
	err := call(context.Background(), apps[1])
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindQueueTimeout || le.RetryAfter < time.Second ||
		!strings.Contains(le.Message, "the replicas sharing this gateway's limits run all of provider demo's 1 lanes") {
		t.Fatalf("a call waiting on a full shared lane: %v, want 429 provider_queue_timeout naming the replicas", err)
	}
	if st := apps[1].Gateway.State(); st.Providers[0].Queued != 0 || st.Providers[0].Running != 0 {
		t.Errorf("the expired call is still counted: %+v", st.Providers[0])
	}
}

// TestReplicaBatch: a batch takes all its members' shared leases at once: with one of two
// shared lanes busy on the other replica it is refused 429 batch_capacity_unavailable,
// taking nothing; with both free it starts whole.
func TestReplicaBatch(t *testing.T) {
	b := newHeldBackend(0)
	apps := startReplicas(t, 2, 2, "30s", b)
	var wg sync.WaitGroup
	defer wg.Wait()
	gate := b.gate
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	wg.Go(func() { _ = call(ctx, apps[0]) })
	<-b.opened
	_, err := apps[1].Gateway.StartBatch(context.Background(), []string{"demo/echo", "demo/echo"}, llm.Interactive, &llm.Request{})
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindBatchCapacity || !strings.Contains(le.Message, "the replicas run") {
		t.Fatalf("a batch of 2 with 1 shared lane free: %v, want 429 batch_capacity_unavailable naming the replicas", err)
	}
	if p := apps[1].Gateway.State().Providers[0]; p.RunningCluster == nil || *p.RunningCluster != 1 {
		t.Errorf("the refused batch left leases behind: %+v", p)
	}
	hangUp()
	waitFor(t, "the other replica's lane given back", func() bool {
		p := apps[1].Gateway.State().Providers[0]
		return p.RunningCluster != nil && *p.RunningCluster == 0
	})
	close(gate)
	members, err := apps[1].Gateway.StartBatch(context.Background(), []string{"demo/echo", "demo/echo"}, llm.Interactive, &llm.Request{})
	if err != nil {
		t.Fatalf("a batch of 2 with both shared lanes free: %v", err)
	}
	for i, m := range members {
		if m.Err != nil {
			t.Fatalf("member %d: %v", i, m.Err)
		}
		for {
			if _, err := m.Stream.Next(); err != nil {
				break
			}
		}
		_ = m.Stream.Close()
	}
	waitFor(t, "the batch's leases released", func() bool {
		p := apps[0].Gateway.State().Providers[0]
		return p.RunningCluster != nil && *p.RunningCluster == 0
	})
}

// TestWaitForOneProviderHoldsUpNoOther: calls waiting on a replica for another replica's
// lane of provider a leave that replica's max_running to a call of provider b, which runs
// at once: a call the replicas refuse goes back to its queue instead of holding a slot.
//
// A waiting call is not still: at every poll of the lease engine (lease_ttl/10, 100 ms
// here) the head of a's queue asks Redis for its leases again, in case a notice was lost,
// and reads as running while it asks. So the second replica's state is waited for, not
// read once, and a's backend must never see a second call.
func TestWaitForOneProviderHoldsUpNoOther(t *testing.T) {
	a, b := newHeldBackend(0), newHeldBackend(0)
	apps := replicasOf(t, 2, "limits: {max_running: 3}\nproviders:\n"+
		"  - {name: a, kind: fake, lanes: 1, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}\n"+
		"  - {name: b, kind: fake, lanes: 1, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}\n",
		map[string]llm.Backend{"a": a, "b": b})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.gate)
	defer close(a.gate) // first: the calls end, then they are waited for
	wg.Go(func() { _ = callModel(context.Background(), apps[0], "a/m") })
	<-a.opened
	for range 2 {
		wg.Go(func() { _ = callModel(context.Background(), apps[1], "a/m") })
	}
	waitFor(t, "two calls of a waiting on the second replica", func() bool {
		return apps[1].Gateway.State().Providers[0].Queued == 2
	})
	wg.Go(func() { _ = callModel(context.Background(), apps[1], "b/m") })
	select {
	case <-b.opened:
	case <-time.After(5 * time.Second):
		t.Fatalf("provider b's call did not start beside the waiting calls of a: %+v", apps[1].Gateway.State())
	}
	waitFor(t, "b's call alone running on the second replica, a's two waiting", func() bool {
		st := apps[1].Gateway.State()
		return st.Running == 1 && st.Providers[0].Running == 0 && st.Providers[0].Queued == 2
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.opens); n != 1 {
		t.Errorf("provider a's backend saw %d calls, want only the first replica's", n)
	}
}

// TestReplicasShareRPM: two replicas share their provider's rpm bucket: together they start
// a burst of 2 at once, then one call a second (rpm 60), though each replica's own limiter
// would allow 2 at once on its own.
func TestReplicasShareRPM(t *testing.T) {
	b := newHeldBackend(time.Millisecond)
	apps := replicasOf(t, 2, "providers: [{name: demo, kind: fake, lanes: 4, queue_length: 10, queue_timeout: 30s, rate_limit: {rpm: 60, burst: 2}, models: [{id: echo}]}]\n",
		map[string]llm.Backend{"demo": b})
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if err := call(context.Background(), apps[i%2]); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.opens) != 5 {
		t.Fatalf("%d calls opened, want 5", len(b.opens))
	}
	slices.SortFunc(b.opens, func(x, y time.Time) int { return x.Compare(y) })
	for k, at := range b.opens[2:] { // the third call a second after the burst, and so on
		if d, want := at.Sub(b.opens[0]), time.Duration(k+1)*time.Second-50*time.Millisecond; d < want {
			t.Errorf("call %d opened %s after the first; rpm 60 with a burst of 2 allows it after %s", k+3, d, want)
		}
	}
}

// TestReplicasShareKeyCooldowns: a key the backend rate-limits on one replica cools on the
// other too, which then sends nothing on it: the backend, a real HTTP fakellm whose first
// key is throttled, sees that key once in all.
func TestReplicasShareKeyCooldowns(t *testing.T) {
	fake := fakellm.New(fakellm.Options{Models: []string{"m"},
		Script: fakellm.Script{Keys: map[string]fakellm.KeyScript{"k1": {Mode: "rate-limited", For: fakellm.Duration(time.Minute)}}}})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	apps := replicasOf(t, 2, fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, keys: [k1, k2], lanes: 2, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}]\n", srv.URL), nil)
	if err := callModel(context.Background(), apps[0], "o/m"); err != nil {
		t.Fatalf("the first replica's call (k1 throttled, k2 retried): %v", err)
	}
	waitFor(t, "k1 cooling on the other replica", func() bool {
		ks := apps[1].Gateway.State().Providers[0].Keys
		return len(ks) == 2 && ks[0].State != "ready"
	})
	for range 2 {
		if err := callModel(context.Background(), apps[1], "o/m"); err != nil {
			t.Fatalf("the other replica's call: %v", err)
		}
	}
	if by := fake.Stats().ByKey; by["k1"].Requests != 1 || by["k2"].Served != 3 {
		t.Errorf("the backend saw k1 %d times and served k2 %d times; want k1 once (cooled on both replicas) and k2 for all 3 calls", by["k1"].Requests, by["k2"].Served)
	}
}
