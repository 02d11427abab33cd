package cluster

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
)

// TestAcquireUpToTheLimit: a scope gives out exactly its limit across replicas, the next
// claim is replicas.Busy naming it, and a release frees one slot (twice released, still one).
func TestAcquireUpToTheLimit(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, bev := newEngine(t, s, "b")
	ctx := context.Background()
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "provider/codex", Limit: 3}}}
	l1 := mustAcquire(t, a, ctx, c)
	mustAcquire(t, b, ctx, c)
	mustAcquire(t, a, ctx, c)
	_, err := b.acquireOne(ctx, c)
	var busy *replicas.Busy
	if !errors.As(err, &busy) || busy.Scope != "provider/codex" || busy.Phase != Shared.String() {
		t.Fatalf("4th claim of a 3-lane scope: %v, want replicas.Busy on provider/codex", err)
	}
	l1.Release()
	l1.Release() // idempotent: frees one slot, not two
	eventually(t, 5*time.Second, "b told that provider/codex freed", func() bool {
		return bev.has(func(e Event) bool { return e.Kind == Freed && e.Replica == "a" && e.Scopes[0] == "provider/codex" })
	})
	mustAcquire(t, b, ctx, c)
	if _, err := a.acquireOne(ctx, c); !errors.As(err, &busy) {
		t.Fatalf("a double release freed two slots: %v", err)
	}
	if n := occupancy(t, a, "provider/codex"); n != 3 {
		t.Errorf("occupancy %d, want 3", n)
	}
}

// TestAllOrNone: a claim that finds one scope full takes nothing from the others, and
// claims taking the same scopes in opposite orders never deadlock or leave a part.
func TestAllOrNone(t *testing.T) {
	s := startRedis(t)
	e, _ := newEngine(t, s, "a")
	ctx := context.Background()
	limits := map[string]int{"m/one": 1, "p/x": 2, "gateway": 3}
	hold := mustAcquire(t, e, ctx, claimOf(limits, "m/one"))
	var busy *replicas.Busy
	if _, err := e.acquireOne(ctx, claimOf(limits, "gateway", "p/x", "m/one")); !errors.As(err, &busy) || busy.Scope != "m/one" {
		t.Fatalf("claim over a full model lane: %v", err)
	}
	for _, sc := range []string{"gateway", "p/x"} {
		if n := occupancy(t, e, sc); n != 0 {
			t.Errorf("a refused claim left %d entries in %s", n, sc)
		}
	}
	hold.Release()

	m := newMeter()
	orders := [][]string{{"gateway", "p/x", "m/one"}, {"m/one", "p/x", "gateway"}, {"p/x", "gateway"}, {"gateway"}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 40 {
				names := orders[r.IntN(len(orders))]
				l, err := e.acquireOne(ctx, claimOf(limits, names...))
				if err != nil {
					continue
				}
				m.enter(names)
				m.leave(names)
				l.Release()
			}
		})
	}
	wg.Wait()
	m.check(t, limits)
	// A release made while a heartbeat is in flight is sent after it (Lease.Release): the
	// entries are gone once that heartbeat is done, not the moment Release returns.
	for sc := range limits {
		eventually(t, 10*time.Second, "every release applied to "+sc, func() bool { return occupancy(t, e, sc) == 0 })
	}
}

// TestConcurrentReplicasNeverExceed: three replicas, eight goroutines each, claiming
// random sets of scopes and holding them a little: no scope ever runs more than its limit,
// and each gets used up to it.
func TestConcurrentReplicasNeverExceed(t *testing.T) {
	s := startRedis(t)
	limits := map[string]int{"gateway": 5, "p/a": 3, "p/b": 3, "m/a1": 1, "m/a2": 2, "m/b1": 2}
	shapes := [][]string{{"gateway", "p/a", "m/a1"}, {"gateway", "p/a", "m/a2"}, {"gateway", "p/b", "m/b1"}}
	m := newMeter()
	var wg sync.WaitGroup
	for _, name := range []string{"r1", "r2", "r3"} {
		e, _ := newEngine(t, s, name)
		for g := range 8 {
			wg.Go(func() {
				hammer(context.Background(), e, m, limits, shapes, uint64(g), 60)
			})
		}
	}
	wg.Wait()
	m.check(t, limits)
	if got := m.mostOf("gateway"); got < limits["gateway"] {
		t.Errorf("gateway never reached its cap (%d of %d): the test did not contend", got, limits["gateway"])
	}
}

// hammer makes n attempts at random claims of shapes, holding each lease for up to 2 ms.
func hammer(ctx context.Context, e *Engine, m *meter, limits map[string]int, shapes [][]string, seed uint64, n int) (started int) {
	r := rand.New(rand.NewPCG(seed, 7))
	for range n {
		names := shapes[r.IntN(len(shapes))]
		l, err := e.acquireOne(ctx, claimOf(limits, names...))
		if err != nil {
			continue
		}
		started++
		m.enter(names)
		work(time.Duration(r.IntN(2000)) * time.Microsecond)
		m.leave(names)
		l.Release()
	}
	return started
}

// work stands for a backend call of d: it waits on a timer (it is the work, not a
// synchronization).
func work(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}

// TestRenewKeepsLeases: a lease held for three lease_ttls is renewed, so nobody else gets
// its slot and nothing counts as lost.
func TestRenewKeepsLeases(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, _ := newEngine(t, s, "b")
	ctx := context.Background()
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/one", Limit: 1}}}
	l := mustAcquire(t, a, ctx, c)
	until := time.Now().Add(3 * testTTL)
	for time.Now().Before(until) {
		var busy *replicas.Busy
		if _, err := b.acquireOne(ctx, c); !errors.As(err, &busy) {
			t.Fatalf("b got the slot a holds: %v", err)
		}
		work(100 * time.Millisecond)
	}
	if h := a.Status(); h.LostLeases != 0 || h.Phase != Shared {
		t.Errorf("health %+v: want shared, nothing lost", h)
	}
	l.Release()
	mustAcquire(t, b, ctx, c)
}

// TestExpiredLeasesReclaimed: entries of a replica that stopped renewing (written here as a
// dead replica would have left them) are reclaimed once expired, and the reclaim is
// announced as freed.
func TestExpiredLeasesReclaimed(t *testing.T) {
	s := startRedis(t)
	e, ev := newEngine(t, s, "a")
	rc := s.client()
	ctx := context.Background()
	tm, err := rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	expiry := float64(tm.Add(testTTL).UnixMilli())
	ks := newKeyspace("tollgate")
	for i := range 2 {
		rc.ZAdd(ctx, ks.scope("p/cli"), redisZ(expiry, member("dead", "0000", uint64(i))))
	}
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/cli", Limit: 2}}}
	start := time.Now()
	var busy *replicas.Busy
	if _, err := e.acquireOne(ctx, c); !errors.As(err, &busy) {
		t.Fatalf("a dead replica's unexpired leases were not counted: %v", err)
	}
	eventually(t, 3*testTTL, "the dead replica's slot reclaimed", func() bool {
		_, err := e.acquireOne(ctx, c)
		return err == nil
	})
	if waited := time.Since(start); waited < testTTL*9/10 {
		t.Errorf("reclaimed after %s, before the leases expired (%s)", waited, testTTL)
	}
	eventually(t, 5*time.Second, "the reclaim announced", func() bool {
		return ev.has(func(e Event) bool { return e.Kind == Freed && e.Replica == "a" && e.Scopes[0] == "p/cli" })
	})
}

// TestCancelledAcquirersNeverLeak: claims whose context ends at any point, before the
// call or during its round trip, leave no entry behind once the next heartbeat has
// flushed them, and the full limit is then available.
func TestCancelledAcquirersNeverLeak(t *testing.T) {
	s := startRedis(t)
	e, _ := newEngine(t, s, "a")
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/x", Limit: 4}, {Name: "gateway", Limit: 4}}}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for range 30 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(1500))*time.Microsecond)
				l, err := e.acquireOne(ctx, c)
				cancel()
				if err == nil {
					l.Release()
				}
			}
		})
	}
	wg.Wait()
	eventually(t, testTTL*9/10, "every cancelled claim's entries removed (before they expire)", func() bool {
		return occupancy(t, e, "p/x") == 0 && occupancy(t, e, "gateway") == 0
	})
	for range 4 {
		mustAcquire(t, e, context.Background(), c)
	}
}

// TestDuplicateReplicaName: two processes heartbeating with one name are reported.
func TestDuplicateReplicaName(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "same")
	b, _ := newEngine(t, s, "same")
	eventually(t, 5*testTTL, "the shared name reported", func() bool {
		return a.Status().DuplicateName || b.Status().DuplicateName
	})
}

// TestBadClaimsAndOptions: what is wrong is named, before anything is sent.
func TestBadClaimsAndOptions(t *testing.T) {
	s := startRedis(t)
	e, _ := newEngine(t, s, "a")
	ctx := context.Background()
	for _, tc := range []struct {
		claim replicas.Claim
		want  string
	}{
		{replicas.Claim{}, "needs a scope or a bucket"},
		{replicas.Claim{Scopes: []replicas.Scope{{Name: "", Limit: 1}}}, "scope name must be 1 to 200 bytes"},
		{replicas.Claim{Scopes: []replicas.Scope{{Name: "has space", Limit: 1}}}, "byte 3"},
		{replicas.Claim{Scopes: []replicas.Scope{{Name: "a|b", Limit: 1}}}, "'|'"},
		{replicas.Claim{Scopes: []replicas.Scope{{Name: "p", Limit: 0}}}, "limit must be at least 1, got 0"},
		{replicas.Claim{Scopes: []replicas.Scope{{Name: "p", Limit: 1}, {Name: "p", Limit: 1}}}, "claimed twice"},
		{replicas.Claim{Buckets: []replicas.Bucket{{Name: "rpm", PerMinute: 0, Cost: 1}}}, "per minute must be ≥ 1"},
		{replicas.Claim{Buckets: []replicas.Bucket{{Name: "tpm", PerMinute: 10, Cost: -1}}}, "cost in [0"},
	} {
		if _, err := e.acquireOne(ctx, tc.claim); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("claim %+v: %v, want %q", tc.claim, err, tc.want)
		}
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Replica: "r", LeaseTTL: time.Second, MaxRun: time.Second}, "Addr is required"},
		{Options{Addr: "x:1", LeaseTTL: time.Second, MaxRun: time.Second}, "replica name must be"},
		{Options{Addr: "x:1", Replica: "r", LeaseTTL: time.Millisecond, MaxRun: time.Second}, "LeaseTTL must be at least 50ms"},
		{Options{Addr: "x:1", Replica: "r", LeaseTTL: time.Second, MaxRun: time.Millisecond}, "MaxRun (1ms) must be at least LeaseTTL"},
		{Options{Addr: "x:1", Replica: "r", LeaseTTL: time.Second, MaxRun: time.Second, DB: -1}, "DB must be 0 or more"},
	} {
		if _, err := New(ctx, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("options %+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.acquireOne(ctx, replicas.Claim{Scopes: []replicas.Scope{{Name: "p", Limit: 1}}}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestAcquireAll: a batch's members take their slots together or not at all, two members
// of one scope need two slots, and of two batches racing for the last slots one wins whole.
func TestAcquireAll(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, _ := newEngine(t, s, "b")
	ctx := context.Background()
	limits := map[string]int{"gateway": 4, "p/x": 3, "m/x1": 2, "m/x2": 2}
	member := func(model string) replicas.Claim { return claimOf(limits, "gateway", "p/x", model) }
	hold := mustAcquire(t, a, ctx, member("m/x1"))
	var busy *replicas.Busy
	if _, err := b.acquireAll(ctx, []replicas.Claim{member("m/x1"), member("m/x1")}); !errors.As(err, &busy) || busy.Scope != "m/x1" {
		t.Fatalf("two members on a model with one lane free: %v, want replicas.Busy on m/x1", err)
	}
	for sc, want := range map[string]int{"gateway": 1, "p/x": 1, "m/x1": 1, "m/x2": 0} {
		if n := occupancy(t, a, sc); n != want {
			t.Errorf("a refused batch left %s at %d, want %d", sc, n, want)
		}
	}
	if _, err := b.acquireAll(ctx, []replicas.Claim{member("m/x1"), member("m/x2"), member("m/x2")}); !errors.As(err, &busy) || busy.Scope != "p/x" {
		t.Fatalf("three members on a provider with two lanes free: %v, want replicas.Busy on p/x", err)
	}
	if _, err := b.acquireAll(ctx, []replicas.Claim{member("m/x1"), claimOf(map[string]int{"m/x1": 3}, "m/x1")}); err == nil ||
		!strings.Contains(err.Error(), "limits 2 and 3") {
		t.Errorf("one scope with two limits: %v", err)
	}
	hold.Release()
	// Two batches of two race for three provider lanes: exactly one starts, whole.
	var wg sync.WaitGroup
	won := make(chan []*Lease, 2)
	for _, e := range []*Engine{a, b} {
		wg.Go(func() {
			if ls, err := e.acquireAll(ctx, []replicas.Claim{member("m/x1"), member("m/x2")}); err == nil {
				won <- ls
			} else if !errors.As(err, new(*replicas.Busy)) {
				t.Errorf("racing batch: %v", err)
			}
		})
	}
	wg.Wait()
	close(won)
	var winners [][]*Lease
	for ls := range won {
		winners = append(winners, ls)
	}
	if len(winners) != 1 || len(winners[0]) != 2 {
		t.Fatalf("%d batches won the race for 3 lanes, want 1 of 2 leases", len(winners))
	}
	if n := occupancy(t, a, "p/x"); n != 2 {
		t.Errorf("p/x holds %d after the race, want 2", n)
	}
	for _, l := range winners[0] {
		l.Release()
	}
	// Sent after a heartbeat in flight, if one was (Lease.Release).
	eventually(t, 10*time.Second, "p/x empty after the release", func() bool { return occupancy(t, a, "p/x") == 0 })
}
