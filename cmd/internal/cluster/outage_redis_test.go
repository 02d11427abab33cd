package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
)

// TestRedisStoppedAndRestarted: three replicas under load; Redis is stopped (and comes
// back empty, as one without persistence does). The replicas run on their shares (by the
// strict rule: hold, settle, then their shares), and take shared leases again when it
// returns. No scope ever runs more than its limit on the three together, before, during
// or after the switches: by the strict rule not at all, by the default one by no more
// than the calls the replicas counted (and logged) as started too late for the others'
// views.
func TestRedisStoppedAndRestarted(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(ruleName(strict), func(t *testing.T) {
			s := startRedis(t)
			outageScenario(t, s, s.stop, s.start, strict)
		})
	}
}

// TestRedisPausedAndResumed: the same with a Redis that stops answering but keeps its
// data (SIGSTOP, SIGCONT): the expired leases it still holds when it resumes are
// reclaimed, the running calls registered again.
func TestRedisPausedAndResumed(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(ruleName(strict), func(t *testing.T) {
			s := startRedis(t)
			outageScenario(t, s, s.pause, s.resume, strict)
		})
	}
}

func ruleName(strict bool) string {
	if strict {
		return "strict"
	}
	return "share"
}

// TestShortOutageOnlyHolds: Redis away for less than lease_ttl: the replicas only reuse
// the slots they hold (Holding), never reach their shares, and go back to shared leases.
func TestShortOutageOnlyHolds(t *testing.T) {
	s := startRedis(t)
	limits := map[string]int{"gateway": 4, "p/a": 2}
	shapes := [][]string{{"gateway", "p/a"}, {"gateway"}}
	m := newMeter()
	engines := startEngines(t, s, 2)
	l := startLoad(engines, m, limits, shapes, 3, 2*time.Millisecond)
	defer l.stop()
	work(300 * time.Millisecond)
	s.pause()
	eventually(t, 5*time.Second, "both replicas holding", func() bool { return allIn(engines, Holding) })
	work(testTTL / 3)
	for _, e := range engines {
		if p := e.Status().Phase; p != Holding {
			t.Errorf("%s: phase %s during a short outage, want holding", e.o.Replica, p)
		}
	}
	s.resume()
	eventually(t, 5*time.Second, "both replicas shared again", func() bool { return allIn(engines, Shared) })
	l.stop()
	m.check(t, limits)
}

func outageScenario(t *testing.T, s *redisServer, lose, restore func(), strict bool) {
	// Every limit is at least the replicas (3): below that, shares of at least 1 each add
	// up to more than the limit, as SPEC §17 has it (TestShare).
	limits := map[string]int{"gateway": 6, "p/a": 4, "p/b": 3, "m/a": 3}
	shapes := [][]string{{"gateway", "p/a", "m/a"}, {"gateway", "p/a"}, {"gateway", "p/b"}}
	m := newMeter()
	m.limits = limits
	engines := startEngines(t, s, 3, func(o *Options) { o.Strict = strict })
	// Replica 1 carries most of the load and some long calls (up to 1.5 s, within
	// MaxRun): when Redis goes, it holds more than its share, which is what the Settling
	// rule is for.
	l := startLoad(engines[:1], m, limits, shapes, 6, 1500*time.Millisecond)
	l.add(engines, m, limits, shapes, 2, 20*time.Millisecond)
	defer l.stop()
	eventually(t, 10*time.Second, "the gateway scope full under load", func() bool { return m.mostOf("gateway") == limits["gateway"] })

	m.during("after Redis was lost")
	lose()
	eventually(t, 5*time.Second, "every replica off shared leases", func() bool { return noneIn(engines, Shared, Rejoining) })
	m.during("all replicas off shared leases")
	eventually(t, 10*time.Second, "every replica on its shares", func() bool { return allIn(engines, Alone) })
	m.during("all replicas on their shares")
	// Each replica runs its share, no more: a scope the load does not use, limit 3, three
	// replicas alive: one each.
	spare := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/spare", Limit: 3}}}
	for _, e := range engines {
		if h := e.Status(); h.ReplicasAlive != 3 || h.Redis {
			t.Errorf("%s on its shares: health %+v", e.o.Replica, h)
		}
		one, err := e.acquireOne(context.Background(), spare)
		if err != nil {
			t.Fatalf("%s: its share of p/spare refused: %v", e.o.Replica, err)
		}
		var busy *replicas.Busy
		if _, err := e.acquireOne(context.Background(), spare); !errors.As(err, &busy) || busy.Phase != Alone.String() {
			t.Errorf("%s: a second p/spare call beyond its share: %v", e.o.Replica, err)
		}
		one.Release()
	}
	work(500 * time.Millisecond) // load on the shares

	m.during("after Redis returned")
	restore()
	eventually(t, 10*time.Second, "every replica on shared leases again", func() bool { return allIn(engines, Shared) })
	m.during("all replicas shared again")
	work(500 * time.Millisecond) // load across the switch back
	l.stop()
	allow := excessCounted(engines)
	if strict {
		allow = 0
	}
	t.Logf("%d calls counted as possibly beyond a cap", excessCounted(engines))
	m.checkWithin(t, limits, allow)

	// Shared again: one replica can take the whole cap, which no share would allow.
	var held []*Lease
	eventually(t, 5*time.Second, "replica 2 holding the whole gateway cap", func() bool {
		l, err := engines[1].acquireOne(context.Background(), claimOf(limits, "gateway"))
		if err == nil {
			held = append(held, l)
		}
		return len(held) == limits["gateway"]
	})
	for _, e := range engines {
		if h := e.Status(); h.Outages < 1 || !h.Redis {
			t.Errorf("%s after the outage: %+v", e.o.Replica, h)
		}
	}
}

func startEngines(t *testing.T, s *redisServer, n int, tune ...func(*Options)) []*Engine {
	var out []*Engine
	for i := range n {
		e, _ := newEngine(t, s, fmt.Sprintf("r%d", i+1), tune...)
		out = append(out, e)
	}
	eventually(t, 5*time.Second, "every replica seeing the others", func() bool {
		for _, e := range out {
			if e.Status().ReplicasAlive != n {
				return false
			}
		}
		return true
	})
	return out
}

func allIn(engines []*Engine, p Phase) bool {
	for _, e := range engines {
		if e.Status().Phase != p {
			return false
		}
	}
	return true
}

func noneIn(engines []*Engine, ps ...Phase) bool {
	for _, e := range engines {
		for _, p := range ps {
			if e.Status().Phase == p {
				return false
			}
		}
	}
	return true
}

// load is goroutines claiming and holding leases until stopped.
type load struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func startLoad(engines []*Engine, m *meter, limits map[string]int, shapes [][]string, per int, hold time.Duration) *load {
	l := &load{done: make(chan struct{})}
	l.add(engines, m, limits, shapes, per, hold)
	return l
}

// add starts per goroutines on each engine, each holding its leases up to hold; each
// exits when stop is called.
func (l *load) add(engines []*Engine, m *meter, limits map[string]int, shapes [][]string, per int, hold time.Duration) {
	for i, e := range engines {
		for g := range per {
			l.wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(i), uint64(g)))
				for {
					select {
					case <-l.done:
						return
					default:
					}
					names := shapes[r.IntN(len(shapes))]
					lease, err := e.acquireOne(context.Background(), claimOf(limits, names...))
					if err != nil {
						work(time.Duration(1+r.IntN(3)) * time.Millisecond) // paced retries
						continue
					}
					m.enter(names)
					work(time.Duration(r.Int64N(int64(hold))))
					m.leave(names)
					lease.Release()
				}
			})
		}
	}
}

func (l *load) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

// TestRejoiningWaitsForPeers: a replica back from an outage whose peer never returns
// (it died meanwhile) keeps its share, through Redis, until lease_ttl after its rejoin,
// then takes shared leases: the whole limit.
func TestRejoiningWaitsForPeers(t *testing.T) {
	s := startRedis(t)
	engines := startEngines(t, s, 2)
	a, b := engines[0], engines[1]
	s.stop()
	eventually(t, 10*time.Second, "both on their shares", func() bool { return allIn(engines, Alone) })
	if err := b.Close(); err != nil { // b dies while Redis is away
		t.Fatal(err)
	}
	s.start()
	eventually(t, 5*time.Second, "a rejoining", func() bool { return a.Status().Phase == Rejoining })
	rejoined := time.Now()
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/r", Limit: 4}}}
	var held []*Lease
	for range 2 { // its share: 4 / 2
		held = append(held, mustAcquire(t, a, context.Background(), c))
	}
	var busy *replicas.Busy
	if _, err := a.acquireOne(context.Background(), c); !errors.As(err, &busy) || busy.Phase != Rejoining.String() {
		if time.Since(rejoined) < testTTL/2 {
			t.Fatalf("a third call while rejoining, share 2: %v", err)
		}
	}
	eventually(t, 3*testTTL, "a shared again", func() bool { return a.Status().Phase == Shared })
	if waited := time.Since(rejoined); waited < testTTL/2 {
		t.Errorf("shared %s after the rejoin, without its dead peer's heartbeat", waited)
	}
	for range 2 {
		held = append(held, mustAcquire(t, a, context.Background(), c))
	}
	for _, l := range held {
		l.Release()
	}
}

// TestRedisRestartedQuickly: Redis restarts empty at once, perhaps before a replica saw it
// away; the acquire script refuses a replica whose heartbeat Redis lost, so none takes a
// slot until its running calls are registered again. No cap exceeded; all shared again.
func TestRedisRestartedQuickly(t *testing.T) {
	s := startRedis(t)
	limits := map[string]int{"gateway": 6, "p/a": 3}
	shapes := [][]string{{"gateway", "p/a"}, {"gateway"}}
	m := newMeter()
	m.limits = limits
	engines := startEngines(t, s, 3)
	l := startLoad(engines, m, limits, shapes, 3, 300*time.Millisecond)
	defer l.stop()
	eventually(t, 10*time.Second, "the gateway scope full", func() bool { return m.mostOf("gateway") == limits["gateway"] })
	m.during("the restart")
	s.stop()
	s.start()
	eventually(t, 10*time.Second, "every replica shared again", func() bool { return allIn(engines, Shared) })
	m.during("shared again")
	work(500 * time.Millisecond)
	l.stop()
	m.check(t, limits)
}

// TestRestartUnnoticedWaitsForPeers: Redis restarts empty while one replica (a) misses
// it and the other (b) sees it away and holds, running its call on the slot it held,
// which the restarted Redis no longer counts. a's next heartbeat finds its own gone: a
// must rejoin on the outage rule, with the replicas and the view it knew before the
// restart, until b is back; Redis alone (which now counts only a's calls and keeps
// nothing free for b, whose heartbeat it lost) would let a take b's slot.
func TestRestartUnnoticedWaitsForPeers(t *testing.T) {
	s := startRedis(t)
	engines := startEngines(t, s, 2, patient)
	a, b := engines[0], engines[1]
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/x", Limit: 2}}}
	la, lb := mustAcquire(t, a, context.Background(), c), mustAcquire(t, b, context.Background(), c)
	eventually(t, 5*time.Second, "each replica's view showing the other's call", func() bool {
		return viewCount(a, "p/x", "r2") == 1 && viewCount(b, "p/x", "r1") == 1
	})

	resumeA := holdBeats(t, a) // a sends no heartbeat while Redis is away
	s.stop()
	eventually(t, 5*time.Second, "b holding", func() bool { return b.Status().Phase == Holding })
	resumeB := holdBeats(t, b) // b stays away from the restarted Redis
	s.start()
	resumeA()
	eventually(t, 10*time.Second, "a finding Redis lost its heartbeat", func() bool { return a.Status().Outages == 1 })

	// b runs its call uncounted by Redis: a may take no second slot of the two.
	if p := a.Status().Phase; p != Rejoining {
		t.Errorf("a after Redis lost its data, b still away: phase %s, want rejoining", p)
	}
	var busy *replicas.Busy
	if l, err := a.acquireOne(context.Background(), c); !errors.As(err, &busy) {
		t.Errorf("a took a second p/x slot while b runs its own unregistered: %v", err)
		if l != nil {
			l.Release()
		}
	}

	resumeB()
	eventually(t, 20*time.Second, "both shared again", func() bool { return allIn(engines, Shared) })
	if n := occupancy(t, a, "p/x"); n != 2 {
		t.Errorf("p/x after the rejoin: %d entries in Redis, want both calls' 2", n)
	}
	if _, err := a.acquireOne(context.Background(), c); !errors.As(err, &busy) {
		t.Errorf("a third p/x call, limit 2, shared again: %v", err)
	}
	la.Release()
	lb.Release()
}

// patient engines take a loaded machine's round trips (up to 2 s) for slow, not absent,
// and rejoin for lease_ttl (5 s): the steps a restart test orders are not lost to timing.
func patient(o *Options) {
	o.LeaseTTL, o.MaxRun, o.Timeout = 5*time.Second, 10*time.Second, 2*time.Second
}

// holdBeats stops e's heartbeat loop (and everything else that takes its lock) at a
// moment no heartbeat is in flight, until the returned func is called (at the latest
// when the test ends).
func holdBeats(t *testing.T, e *Engine) (resume func()) {
	t.Helper()
	eventually(t, 5*time.Second, "no heartbeat of "+e.o.Replica+" in flight", func() bool {
		e.mu.Lock()
		if !e.beating {
			return true
		}
		e.mu.Unlock()
		return false
	})
	var once sync.Once
	resume = func() { once.Do(e.mu.Unlock) }
	t.Cleanup(resume)
	return resume
}

// TestRestartRefusesUntilNoticed: a heartbeat of a replica that said it was alive before
// runs in a Redis restarted empty, and before the replica reads its answer, an acquire of
// that replica runs there too. Redis must refuse it: the peer's call is not registered
// again, and only the replica's outage rule, once it knows, can count it.
func TestRestartRefusesUntilNoticed(t *testing.T) {
	s := startRedis(t)
	engines := startEngines(t, s, 2, patient)
	a, b := engines[0], engines[1]
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/x", Limit: 2}}}
	la, lb := mustAcquire(t, a, context.Background(), c), mustAcquire(t, b, context.Background(), c)
	resumeA, resumeB := holdBeats(t, a), holdBeats(t, b)
	s.stop()
	s.start()

	p := a.planBeatLocked() // a's lock is held: its loop waits
	if _, err := a.beat(context.Background(), p); err != nil {
		t.Fatalf("a's heartbeat in the restarted Redis: %v", err)
	}
	tl, err := newTally([]replicas.Claim{c})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := a.acquire(context.Background(), []string{member(a.o.Replica, a.incarnation, 1<<40)}, tl)
	if !errors.Is(err, errForgotten) {
		t.Errorf("an acquire of a after its heartbeat found Redis emptied, before a knew: busy %v, err %v; want %v",
			busy, err, errForgotten)
	}

	resumeA()
	resumeB()
	eventually(t, 20*time.Second, "both shared again", func() bool { return allIn(engines, Shared) })
	la.Release()
	lb.Release()
	eventually(t, 5*time.Second, "p/x empty", func() bool { return occupancy(t, a, "p/x") == 0 })
}
