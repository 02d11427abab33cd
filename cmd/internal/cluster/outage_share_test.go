package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
)

// probeLimit is the scope the outage tests probe: 3 slots, one share each of 3 replicas.
var probe = replicas.Claim{Scopes: []replicas.Scope{{Name: "p/probe", Limit: 3}}}

// TestQuietOutageServes: three idle replicas lose Redis (stopped, frozen by SIGSTOP, or
// held by CLIENT PAUSE): each serves its share of every scope within lease_ttl + 1 s of
// the loss, no more than its share (so the backend never sees more than the cap), and
// when Redis is back the calls it runs are registered again, within the cap, and once
// they end no lease is left in Redis.
func TestQuietOutageServes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		lose, restore func(s *redisServer)
	}{
		{"stopped", (*redisServer).stop, (*redisServer).start},
		{"sigstop", (*redisServer).pause, (*redisServer).resume},
		{"client-pause", func(s *redisServer) { clientPause(t, s, 4*time.Second) },
			func(s *redisServer) { s.client().ClientUnpause(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRedis(t)
			engines := startEngines(t, s, 3)
			lost := time.Now()
			tc.lose(s)
			held := make([]*Lease, len(engines))
			var wg sync.WaitGroup
			for i, e := range engines {
				wg.Go(func() { held[i] = serveWithin(t, e, lost, testTTL+time.Second) })
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			for _, e := range engines {
				var busy *replicas.Busy
				if _, err := e.acquireOne(context.Background(), probe); !errors.As(err, &busy) || busy.Phase != Alone.String() {
					t.Errorf("%s: a call beyond its share of 1: %v", e.o.Replica, err)
				}
			}
			tc.restore(s)
			eventually(t, 10*time.Second, "every replica shared again", func() bool { return allIn(engines, Shared) })
			if n := occupancy(t, engines[0], "p/probe"); n != 3 {
				t.Errorf("after the return Redis counts %d of the 3 calls running", n)
			}
			var busy *replicas.Busy
			if _, err := engines[0].acquireOne(context.Background(), probe); !errors.As(err, &busy) || busy.Phase != Shared.String() {
				t.Errorf("a 4th call when Redis is back: %v", err)
			}
			for _, l := range held {
				l.Release()
			}
			noLeaseKeys(t, s)
		})
	}
}

// serveWithin waits until e takes a probe slot, failing the test unless it does within d
// of since; it answers the lease.
func serveWithin(t *testing.T, e *Engine, since time.Time, d time.Duration) *Lease {
	deadline := since.Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := e.acquireOne(context.Background(), probe)
		if err == nil {
			t.Logf("%s served %s after the loss (%s)", e.o.Replica, time.Since(since).Round(time.Millisecond), e.Status().Phase)
			return l
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: no call served within %s of the loss: %v (%s)", e.o.Replica, d, err, e.Status().Phase)
			return nil
		}
		<-tick.C
	}
}

// clientPause holds every client's commands for d (CLIENT PAUSE ALL): Redis is up, and
// answers nothing.
func clientPause(t *testing.T, s *redisServer, d time.Duration) {
	t.Helper()
	if err := s.client().Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
}

// noLeaseKeys waits until Redis holds no lease key and no scope name: every entry was
// released or has expired and been removed.
func noLeaseKeys(t *testing.T, s *redisServer) {
	t.Helper()
	c := s.client()
	var left []string
	eventually(t, 4*testTTL, "no lease key left in Redis", func() bool {
		var err error
		left, err = c.Keys(context.Background(), "{tollgate}:lease:*").Result()
		return err == nil && len(left) == 0
	})
	eventually(t, 4*testTTL, "no scope name left in Redis", func() bool {
		n, err := c.Exists(context.Background(), "{tollgate}:scopes").Result()
		return err == nil && n == 0
	})
}

// TestSkewedOutage: one replica holds every slot of a scope when Redis stops. The others
// start nothing there until those calls' deadlines (MaxRun after their view first showed
// them); the replica that held them starts again once its own fall below its share. So
// the three never run more than the cap, and the idle two serve after the deadlines.
func TestSkewedOutage(t *testing.T) {
	s := startRedis(t)
	engines := startEngines(t, s, 3)
	r1, r2, r3 := engines[0], engines[1], engines[2]
	var held []*Lease
	for range 3 {
		held = append(held, mustAcquire(t, r1, context.Background(), probe))
	}
	taken := time.Now()
	// Every replica's view shows the three (a heartbeat after the acquires).
	eventually(t, 5*time.Second, "the others' views showing r1's calls", func() bool {
		return viewCount(r2, "p/probe", "r1") == 3 && viewCount(r3, "p/probe", "r1") == 3
	})
	s.stop()
	eventually(t, 5*time.Second, "every replica on its shares", func() bool { return allIn(engines, Alone) })
	var busy *replicas.Busy
	for _, e := range engines {
		if _, err := e.acquireOne(context.Background(), probe); !errors.As(err, &busy) {
			t.Fatalf("%s: a 4th call while r1 runs the 3: %v", e.o.Replica, err)
		}
	}
	for _, l := range held {
		l.Release()
	}
	// r1 knows its own calls ended: it serves its share at once; the others cannot know.
	one := mustAcquire(t, r1, context.Background(), probe)
	if _, err := r1.acquireOne(context.Background(), probe); !errors.As(err, &busy) {
		t.Errorf("r1 beyond its share: %v", err)
	}
	if time.Since(taken) < r2.o.MaxRun {
		if _, err := r2.acquireOne(context.Background(), probe); !errors.As(err, &busy) {
			t.Errorf("r2 served before r1's calls' deadlines: %v", err)
		}
	}
	var late []*Lease
	for _, e := range []*Engine{r2, r3} {
		late = append(late, serveWithin(t, e, taken, e.o.MaxRun+testTTL+time.Second))
	}
	if d := time.Since(taken); d < r2.o.MaxRun {
		t.Errorf("the idle replicas served %s after r1 took every slot, before MaxRun (%s)", d, r2.o.MaxRun)
	}
	s.start()
	eventually(t, 10*time.Second, "every replica shared again", func() bool { return allIn(engines, Shared) })
	if n := occupancy(t, r1, "p/probe"); n != 3 {
		t.Errorf("after the return Redis counts %d of the 3 calls running", n)
	}
	one.Release()
	for _, l := range late {
		if l != nil {
			l.Release()
		}
	}
	noLeaseKeys(t, s)
}

// viewCount is how many entries of replica in scope e's last view shows.
func viewCount(e *Engine, scope, replica string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.view[scope][replica])
}

// TestStalledPartition: one replica's link to Redis stops forwarding (nothing fails but by
// timeout) while the others keep Redis, under load. The cut replica serves on its share
// within lease_ttl + 1 s; the others keep that share free for it (its heartbeat is
// silent), so the calls it starts unheard are counted, and no cap is exceeded beyond what
// the cut replica counted as possible. Healed, it rejoins.
func TestStalledPartition(t *testing.T) {
	s := startRedis(t)
	p := redistest.NewProxy(t, s.addr())
	limits := map[string]int{"gateway": 6, "p/a": 3}
	shapes := [][]string{{"gateway", "p/a"}, {"gateway"}}
	// MaxRun 10 s: a silent replica's shares are kept free for lease_ttl + MaxRun after
	// its last heartbeat, far beyond this partition (past that horizon it counts as dead).
	long := func(o *Options) { o.MaxRun = 10 * testTTL }
	cut, _ := newEngine(t, s, "cut", long, func(o *Options) { o.Addr = p.Addr() })
	r1, _ := newEngine(t, s, "r1", long)
	r2, _ := newEngine(t, s, "r2", long)
	all := []*Engine{cut, r1, r2}
	eventually(t, 5*time.Second, "every replica seeing the others", func() bool {
		for _, e := range all {
			if e.Status().ReplicasAlive != 3 {
				return false
			}
		}
		return true
	})
	m := newMeter()
	m.limits = limits
	l := startLoad(all, m, limits, shapes, 3, 20*time.Millisecond)
	defer l.stop()
	eventually(t, 5*time.Second, "the gateway scope full", func() bool { return m.mostOf("gateway") == limits["gateway"] })
	m.during("the partition")
	lost := time.Now()
	p.SetStalled(true)
	lease := serveWithin(t, cut, lost, testTTL+time.Second)
	if lease == nil {
		return
	}
	lease.Release()
	for _, e := range []*Engine{r1, r2} {
		if ph := e.Status().Phase; ph != Shared {
			t.Errorf("%s: %s while Redis answers it", e.o.Replica, ph)
		}
	}
	work(2 * testTTL) // load through the partition, well within its horizon
	m.during("healed")
	p.SetStalled(false)
	eventually(t, 5*time.Second, "the cut replica shared again", func() bool { return cut.Status().Phase == Shared })
	work(200 * time.Millisecond)
	l.stop()
	t.Logf("%d calls counted as possibly beyond a cap; %d started", excessCounted(all), m.started)
	m.checkWithin(t, limits, excessCounted(all))
}

// TestSlowLink: a replica whose every round trip to Redis takes 300 ms (lease_ttl 2 s) is
// slow, not cut off, when its timeout allows it (1 s: above two round trips, which a new
// connection takes, its HELLO first): it keeps shared leases and serves through Redis.
// With the default timeout (lease_ttl/5, 400 ms), a 600 ms link is an outage.
func TestSlowLink(t *testing.T) {
	s := startRedis(t)
	p, q := redistest.NewProxy(t, s.addr()), redistest.NewProxy(t, s.addr())
	ttl := 2 * testTTL
	slow, _ := newEngine(t, s, "slow", func(o *Options) {
		o.Addr, o.LeaseTTL, o.MaxRun, o.Timeout = p.Addr(), ttl, 2*ttl, ttl/2
	})
	dflt, _ := newEngine(t, s, "default", func(o *Options) { o.Addr, o.LeaseTTL, o.MaxRun = q.Addr(), ttl, 2*ttl })
	eventually(t, 5*time.Second, "both shared", func() bool { return allIn([]*Engine{slow, dflt}, Shared) })
	// Redis learns the acquire script first: its first run (EVALSHA refused, then EVAL)
	// takes two round trips.
	mustAcquire(t, slow, context.Background(), probe).Release()
	p.SetDelay(ttl * 3 / 40)
	q.SetDelay(ttl * 3 / 20)
	eventually(t, 10*time.Second, "the default timeout taking the slower link for an outage", func() bool {
		return dflt.Status().Outages > 0
	})
	// A scope with room beside the default replica's share (kept free while it is silent).
	roomy := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/roomy", Limit: 10}}}
	deadline := time.Now().Add(ttl)
	served := 0
	for time.Now().Before(deadline) {
		if h := slow.Status(); h.Phase != Shared || h.Outages != 0 {
			t.Fatalf("a 300 ms round trip under a 1 s timeout: %+v", h)
		}
		l, err := slow.acquireOne(context.Background(), roomy)
		if err != nil {
			t.Fatalf("acquire over the slow link: %v", err)
		}
		l.Release()
		served++
	}
	t.Logf("%d calls through Redis over the slow link", served)
}
