package cluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// redisServer is a real redis-server the test started (redistest), under the names the
// engine's tests use.
type redisServer struct{ *redistest.Server }

func startRedis(t *testing.T) *redisServer { return &redisServer{redistest.Start(t)} }

func (s *redisServer) addr() string          { return s.Addr() }
func (s *redisServer) start()                { s.Start() }
func (s *redisServer) stop()                 { s.Stop() }
func (s *redisServer) pause()                { s.Pause() }
func (s *redisServer) resume()               { s.Resume() }
func (s *redisServer) client() *redis.Client { return s.Client() }

// eventually polls cond every 10 ms until it holds, failing the test after d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("after %s: still not %s", d, what)
		case <-tick.C:
		}
	}
}

// testTTL is the lease_ttl of the tests: short enough for expiry and outages to play out
// in seconds, long enough that a loaded machine's round trips (bounded at ttl/5) fit.
const testTTL = time.Second

// events records what an engine notified.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (ev *events) add(e Event) {
	ev.mu.Lock()
	ev.all = append(ev.all, e)
	ev.mu.Unlock()
}

// has reports whether an event matching f was notified.
func (ev *events) has(f func(Event) bool) bool {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, e := range ev.all {
		if f(e) {
			return true
		}
	}
	return false
}

// newEngine starts an engine on s named replica, closed when the test ends.
func newEngine(t *testing.T, s *redisServer, replica string, tune ...func(*Options)) (*Engine, *events) {
	t.Helper()
	ev := &events{}
	o := Options{Addr: s.addr(), Replica: replica, LeaseTTL: testTTL, MaxRun: 2 * testTTL,
		Notify: ev.add, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Timestamp().Logger()}
	for _, f := range tune {
		f(&o)
	}
	e, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, ev
}

// occupancy is the live leases in scope, all replicas together.
func occupancy(t *testing.T, e *Engine, scope string) int {
	t.Helper()
	occ, err := e.Occupancy(context.Background(), []string{scope})
	if err != nil {
		t.Fatalf("occupancy: %v", err)
	}
	n := 0
	for _, c := range occ[scope] {
		n += c
	}
	return n
}

// meter counts calls running per scope, as a backend that counts its own concurrency
// would, and remembers the most it ever saw.
type meter struct {
	mu      sync.Mutex
	now     map[string]int
	most    map[string]int
	started int
	limits  map[string]int
	mark    string   // what the test is doing now, for the report of an excess
	over    []string // each excess, with the mark it happened under
}

func newMeter() *meter { return &meter{now: map[string]int{}, most: map[string]int{}} }

// during names the test's current stage in the report of any excess.
func (m *meter) during(mark string) {
	m.mu.Lock()
	m.mark = mark
	m.mu.Unlock()
}

func (m *meter) enter(scopes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started++
	for _, s := range scopes {
		m.now[s]++
		m.most[s] = max(m.most[s], m.now[s])
		if limit, ok := m.limits[s]; ok && m.now[s] > limit && len(m.over) < 10 {
			m.over = append(m.over, fmt.Sprintf("%s: %d > %d %s", s, m.now[s], limit, m.mark))
		}
	}
}

func (m *meter) leave(scopes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range scopes {
		m.now[s]--
	}
}

// check fails the test for every scope whose most exceeded its limit.
func (m *meter) check(t *testing.T, limits map[string]int) {
	t.Helper()
	m.checkWithin(t, limits, 0)
}

// checkWithin fails the test for every scope whose most exceeded its limit by more than
// allow (the excess the replicas counted as possible), listing what exceeded it.
func (m *meter) checkWithin(t *testing.T, limits map[string]int, allow uint64) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	failed := false
	for s, limit := range limits {
		if m.most[s] > limit+int(allow) {
			failed = true
			t.Errorf("scope %s: %d calls ran at once, limit %d (+ %d counted as possible)", s, m.most[s], limit, allow)
		}
	}
	for _, o := range m.over {
		if failed || allow == 0 {
			t.Errorf("excess: %s", o)
		} else {
			t.Logf("excess within the %d counted: %s", allow, o)
		}
	}
}

// excessCounted is what the engines counted as calls that may exceed a cap (Health).
func excessCounted(engines []*Engine) uint64 {
	var n uint64
	for _, e := range engines {
		n += e.Status().OutageExcess
	}
	return n
}

func (m *meter) mostOf(s string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.most[s]
}

func claimOf(limits map[string]int, names ...string) replicas.Claim {
	var c replicas.Claim
	for _, n := range names {
		c.Scopes = append(c.Scopes, replicas.Scope{Name: n, Limit: limits[n]})
	}
	return c
}

func mustAcquire(t *testing.T, e *Engine, ctx context.Context, c replicas.Claim) *Lease {
	t.Helper()
	l, err := e.acquireOne(ctx, c)
	if err != nil {
		t.Fatalf("acquire %+v: %v", c, err)
	}
	return l
}

func redisZ(score float64, m string) redis.Z { return redis.Z{Score: score, Member: m} }

// acquireOne takes claim c's leases alone, as one call does.
func (e *Engine) acquireOne(ctx context.Context, c replicas.Claim) (*Lease, error) {
	ls, err := e.acquireAll(ctx, []replicas.Claim{c})
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}
