package app

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/cluster"
	"github.com/tollgate/tollgate/cmd/internal/store"
	"github.com/tollgate/tollgate/httpapi"
)

// sharedSpend is the store as the HTTP layer's Tenants when several replicas share their
// limits (SPEC §18, "Several replicas"): a key's spend in its period is also a Redis
// counter (cluster.Engine.AddSpend), so that a budget spent on one replica is refused on
// every other. Budgets stay enforced from memory and nothing waits for Redis: Record owes
// the cost to the counter and a goroutine of its own sends what is owed, coalesced per
// period; the same goroutine reads every budgeted key's counter each refresh interval.
// Spend answers the larger of the store's figure (this replica's calls, and the ledger at
// start) and the counter as last read or written. With Redis away the owed costs wait
// and the store's figure alone decides, as on one replica.
type sharedSpend struct {
	*store.Store
	e     *cluster.Engine
	log   zerolog.Logger
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[cluster.Period]int64 // the cluster's total per period (micro-USD), as last heard
	owed map[cluster.Period]int64 // what this replica has not added to the counter yet

	kick chan struct{} // buffered 1: something is owed
	stop chan struct{}
	done chan struct{}
}

// spendRefreshMax bounds the refresh interval: how stale a replica's view of what the
// others spent may be.
const spendRefreshMax = time.Second

// newSharedSpend starts sharing st's spend through e, reading the counters every
// min(leaseTTL/3, spendRefreshMax).
func newSharedSpend(st *store.Store, e *cluster.Engine, leaseTTL time.Duration, log zerolog.Logger) *sharedSpend {
	s := &sharedSpend{Store: st, e: e, log: log, every: min(max(leaseTTL/3, 10*time.Millisecond), spendRefreshMax), now: time.Now,
		seen: map[cluster.Period]int64{}, owed: map[cluster.Period]int64{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run() // exits on close
	return s
}

// micro is usd in integer micro-USD.
func micro(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// periodOf is key name's current period as the counters name it.
func (s *sharedSpend) periodOf(name string, now time.Time) (cluster.Period, bool) {
	kp, ok := s.Store.Period(name, now)
	return cluster.Period{Key: kp.Name, Start: kp.Start, End: kp.End}, ok
}

// Spend is the store's Spend, raised to what the replicas spent together when that is
// more.
func (s *sharedSpend) Spend(name string, now time.Time) (spent, budget float64, resets time.Time) {
	spent, budget, resets = s.Store.Spend(name, now)
	if budget <= 0 {
		return spent, budget, resets
	}
	if p, ok := s.periodOf(name, now); ok {
		s.mu.Lock()
		total := s.seen[p]
		s.mu.Unlock()
		spent = max(spent, float64(total)/1e6)
	}
	return spent, budget, resets
}

// ListKeys is the store's list with each budgeted key's spend raised as Spend raises it:
// the figure its budget is enforced with.
func (s *sharedSpend) ListKeys(ctx context.Context) ([]httpapi.KeyInfo, error) {
	keys, err := s.Store.ListKeys(ctx)
	for i := range keys {
		s.raise(&keys[i])
	}
	return keys, err
}

// PatchKey is the store's, its answer's spend raised as ListKeys raises it.
func (s *sharedSpend) PatchKey(ctx context.Context, name string, p httpapi.KeyPatch) (httpapi.KeyInfo, error) {
	ki, err := s.Store.PatchKey(ctx, name, p)
	s.raise(&ki)
	return ki, err
}

// raise sets a budgeted key's spend to Spend's figure.
func (s *sharedSpend) raise(ki *httpapi.KeyInfo) {
	if ki.Budget != nil {
		ki.SpendUSD, _, _ = s.Spend(ki.Name, s.now())
	}
}

// Record is the store's Record; a budgeted key's cost is owed to its period's counter.
func (s *sharedSpend) Record(e httpapi.LedgerEntry) float64 {
	cost := s.Store.Record(e)
	if e.Key == "" || micro(cost) <= 0 {
		return cost
	}
	if _, budget, _ := s.Store.Spend(e.Key, e.At); budget <= 0 {
		return cost
	}
	p, ok := s.periodOf(e.Key, e.At)
	if !ok {
		return cost
	}
	s.mu.Lock()
	s.owed[p] += micro(cost)
	s.seen[p] += micro(cost) // this replica's own share of the total, until the counter says
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return cost
}

// run sends what is owed when told and reads the counters every interval, until close.
func (s *sharedSpend) run() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.send() // the last calls' costs, once: the engine bounds the round trip
			return
		case <-s.kick:
			s.send()
		case <-t.C:
			s.send() // what an outage held back
			s.refresh()
		}
	}
}

// send adds what is owed to each period's counter; what Redis does not take stays owed.
func (s *sharedSpend) send() {
	s.mu.Lock()
	owed := make(map[cluster.Period]int64, len(s.owed))
	for p, n := range s.owed {
		owed[p] = n
	}
	s.mu.Unlock()
	now := s.now()
	for p, n := range owed {
		seed := n // a period past: only what is owed is known of it
		if cur, ok := s.periodOf(p.Key, now); ok && cur == p {
			spent, _, _ := s.Store.Spend(p.Key, now)
			seed = max(micro(spent), n)
		}
		total, err := s.e.AddSpend(context.Background(), p, n, seed)
		if err != nil {
			s.log.Debug().Err(err).Str("client", p.Key).Msg("spend not shared yet: the replicas' shared state did not take it")
			return
		}
		s.mu.Lock()
		if s.owed[p] -= n; s.owed[p] <= 0 {
			delete(s.owed, p)
		}
		s.seen[p] = max(s.seen[p], total)
		s.mu.Unlock()
	}
}

// refresh reads the counter of every budgeted key's current period, and forgets periods
// that ended.
func (s *sharedSpend) refresh() {
	now := s.now()
	var ps []cluster.Period
	for _, kp := range s.Store.Budgeted(now) {
		ps = append(ps, cluster.Period{Key: kp.Name, Start: kp.Start, End: kp.End})
	}
	totals, err := s.e.Spends(context.Background(), ps)
	if err != nil {
		s.log.Debug().Err(err).Msg("the replicas' spend not read: their shared state did not answer")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range ps {
		if totals[i] >= 0 {
			s.seen[p] = max(s.seen[p], totals[i])
		}
	}
	for p := range s.seen {
		if !p.End.After(now) && s.owed[p] == 0 {
			delete(s.seen, p)
		}
	}
}

// close stops sharing once the last costs were sent (or Redis refused them).
func (s *sharedSpend) close() {
	close(s.stop)
	<-s.done
}
