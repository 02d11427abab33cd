package policy

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// startAll starts everything p's offers say it could start, as a dispatcher with room to
// spare grants it, and records when each start's call ends (after run).
func startAll(p *Provider, now time.Time, run time.Duration, ends map[ID]time.Time) {
	for {
		o, started := p.Offer(now), false
		for c := range llm.NumPriorities {
			for range o.Avail[c] {
				if st, _, ok := p.Grant(Grant{Epoch: p.Epoch(), Class: llm.Priority(c)}, now); ok {
					ends[st.ID], started = now.Add(run), true
				}
			}
		}
		if !started {
			return
		}
	}
}

// TestBatchUnderSteadySingles: a batch that needs all of a provider's 3 lanes, tried every
// Retry-After while single calls of its class arrive every 100 ms and run 250 ms each (so 2
// or 3 lanes are always busy), starts on its third try: its second refusal keeps the lanes
// for it, the single calls that end leave their lanes free, and the singles that arrive
// meanwhile wait. Without the hold it never starts. Once it has started, single calls take
// every lane again, and none waited past its queue_timeout.
func TestBatchUnderSteadySingles(t *testing.T) {
	const retryAfter, run = time.Second, 250 * time.Millisecond
	for _, tc := range []struct {
		name   string
		single llm.Priority
		starts bool // whether the batch starts within 10 tries
	}{
		{"singles of its class", N, true},
		{"singles of a lower class", B, true},
		{"singles of a higher class pass it", I, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProvider(ProviderSpec{Name: "p", Lanes: 3, QueueLength: 100, QueueTimeout: 10 * time.Second,
				Models: []ModelSpec{{Name: "m", Lanes: 3}}})
			ends := map[ID]time.Time{}
			next, tries, startedAt := ID(1), 0, time.Time{}
			tryAt := t0.Add(time.Second)
			for now := t0; now.Before(t0.Add(20 * time.Second)); now = now.Add(10 * time.Millisecond) {
				for id, end := range ends {
					if !now.Before(end) {
						p.Finish(id, now)
						delete(ends, id)
					}
				}
				if now.Sub(t0)%(100*time.Millisecond) == 0 {
					if o, k := p.Enter(next, Arrival{Model: 0, Class: tc.single}, now); o != Queued {
						t.Fatalf("at %s a single call: %s %s", now.Sub(t0), o, k)
					}
					next++
				}
				if startedAt.IsZero() && !now.Before(tryAt) && tries < 10 {
					tries++
					batch := []Member{{ID: 1000 * ID(tries), Class: N}, {ID: 1000*ID(tries) + 1, Class: N}, {ID: 1000*ID(tries) + 2, Class: N}}
					if _, _, ok := p.Reserve(batch, retryAfter, now); ok {
						startedAt = now
						for _, mb := range batch {
							ends[mb.ID] = now.Add(run)
						}
					} else {
						tryAt = now.Add(retryAfter)
					}
				}
				startAll(p, now, run, ends)
				if expired := p.Expire(now, nil); len(expired) > 0 {
					t.Fatalf("at %s, %d single calls waited past their queue_timeout", now.Sub(t0), len(expired))
				}
			}
			if started := !startedAt.IsZero(); started != tc.starts {
				t.Fatalf("batch started %v after %d tries, want %v", started, tries, tc.starts)
			}
			if tc.starts && tries != 3 {
				t.Errorf("the batch started on try %d, want 3 (two refusals, then the lanes kept)", tries)
			}
			if p.batchHold.holdingFor(t0.Add(20 * time.Second)) {
				t.Error("lanes still kept for a batch at the end")
			}
			if q := p.Queued(); q > 3 {
				t.Errorf("%d single calls still waiting at the end: the lanes did not go back to them", q)
			}
		})
	}
}

// TestBatchHoldRules: which refusals count, how long lanes are kept, and what the kept
// lanes are closed to.
func TestBatchHoldRules(t *testing.T) {
	spec := ProviderSpec{Name: "p", Lanes: 4, QueueLength: 10, QueueTimeout: time.Minute,
		Models: []ModelSpec{{Name: "a", Lanes: 4}, {Name: "b", Lanes: 4}}}
	batch := func(id ID, class llm.Priority, models ...int) []Member {
		var ms []Member
		for i, m := range models {
			ms = append(ms, Member{ID: id + ID(i), Model: m, Class: class})
		}
		return ms
	}
	const ra = time.Second
	type refusal struct {
		at      time.Duration
		members []Member
		b       Blocker
	}
	three := batch(100, N, 0, 0, 1)
	for _, tc := range []struct {
		name     string
		refusals []refusal
		at       time.Duration // when to look
		holding  bool
	}{
		{"one refusal keeps nothing", []refusal{{0, three, BlockedByLanes}}, ra, false},
		{"two, the second after the Retry-After", []refusal{{0, three, BlockedByLanes}, {ra, three, BlockedByQueue}}, ra, true},
		{"the second before the Retry-After does not count", []refusal{{0, three, BlockedByLanes}, {ra / 2, three, BlockedByLanes}}, ra, false},
		{"...but a third after it does", []refusal{{0, three, BlockedByLanes}, {ra / 2, three, BlockedByLanes}, {2 * ra, three, BlockedByLanes}}, 2 * ra, true},
		{"model lanes count", []refusal{{0, three, BlockedByModelLanes}, {ra, three, BlockedByModelLanes}}, ra, true},
		{"a rate limit does not", []refusal{{0, three, BlockedByRateLimit}, {ra, three, BlockedByRateLimit}}, ra, false},
		{"nor an open breaker", []refusal{{0, three, BlockedByStartCap}, {ra, three, BlockedByStartCap}}, ra, false},
		{"another shape starts the count again", []refusal{{0, three, BlockedByLanes}, {ra, batch(200, N, 0, 1), BlockedByLanes}}, ra, false},
		{"another class is another batch", []refusal{{0, three, BlockedByLanes}, {ra, batch(200, B, 0, 0, 1), BlockedByLanes}}, ra, false},
		{"back too late: the count starts again", []refusal{{0, three, BlockedByLanes}, {4 * ra, three, BlockedByLanes}}, 4 * ra, false},
		{"kept for twice the Retry-After", []refusal{{0, three, BlockedByLanes}, {ra, three, BlockedByLanes}}, 3*ra - time.Millisecond, true},
		{"then given back", []refusal{{0, three, BlockedByLanes}, {ra, three, BlockedByLanes}}, 3 * ra, false},
		{"a refusal while kept renews it", []refusal{{0, three, BlockedByLanes}, {ra, three, BlockedByLanes}, {2 * ra, three, BlockedByLanes}}, 4*ra - time.Millisecond, true},
		{"another batch does not take the hold", []refusal{{0, three, BlockedByLanes}, {ra, three, BlockedByLanes},
			{ra, batch(200, I, 1), BlockedByLanes}, {2 * ra, batch(300, I, 1), BlockedByLanes}}, 2 * ra, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProvider(spec)
			for _, r := range tc.refusals {
				p.batchHold.refused(r.members, len(p.models), r.b, ra, t0.Add(r.at))
			}
			if got := p.batchHold.holdingFor(t0.Add(tc.at)); got != tc.holding {
				t.Errorf("holding %v, want %v", got, tc.holding)
			}
		})
	}

	// While 3 lanes (2 of a, 1 of b) are kept for a batch of class N, with nothing running:
	now := t0.Add(ra)
	held := func() *Provider {
		p := NewProvider(spec)
		p.batchHold.refused(three, len(p.models), BlockedByLanes, ra, t0)
		p.batchHold.refused(three, len(p.models), BlockedByLanes, ra, now)
		return p
	}
	for _, tc := range []struct {
		name  string
		class llm.Priority
		model int
		want  int // how many singles of the class can start at once
	}{
		{"its class takes the lane beyond", N, 1, 1},
		{"a lower class too", B, 0, 1},
		{"a higher class takes every lane", I, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := held()
			for id := range ID(6) {
				p.Enter(id+1, Arrival{Model: tc.model, Class: tc.class}, now)
			}
			ends := map[ID]time.Time{}
			startAll(p, now, time.Hour, ends)
			if len(ends) != tc.want {
				t.Errorf("%d started, want %d", len(ends), tc.want)
			}
		})
	}
	t.Run("another batch of its class does not take them", func(t *testing.T) {
		p := held()
		if _, b, ok := p.Reserve(batch(200, N, 1, 1), ra, now); ok || b != BlockedByLanes {
			t.Errorf("Reserve = %v %v, want refused for lanes", b, ok)
		}
	})
	t.Run("the batch passes the waiting singles of its class, and starts", func(t *testing.T) {
		p := held()
		p.Enter(1, Arrival{Model: 1, Class: N}, now)
		if _, b, ok := p.Reserve(batch(200, N, 0, 0, 1), ra, now); !ok {
			t.Fatalf("Reserve refused: %v", b)
		}
		if p.batchHold.holdingFor(now) {
			t.Error("still holding once the batch started")
		}
	})
	t.Run("but not a waiting single of a higher class", func(t *testing.T) {
		p := held()
		p.Enter(1, Arrival{Model: 1, Class: I}, now)
		if _, b, ok := p.Reserve(batch(200, N, 0, 0, 1), ra, now); ok || b != BlockedByQueue {
			t.Errorf("Reserve = %v %v, want BlockedByQueue", b, ok)
		}
	})
	t.Run("the hold's end wakes the provider", func(t *testing.T) {
		p := held()
		p.Enter(1, Arrival{Model: 0, Class: N}, now)
		p.Enter(2, Arrival{Model: 0, Class: N}, now)
		if w, ok := p.NextWake(now); !ok || !w.Equal(now.Add(2*ra)) {
			t.Errorf("NextWake = %s %v, want the hold's end %s", w, ok, now.Add(2*ra))
		}
	})
}

// TestBatchHoldAcrossAddModel: a model added while lanes are kept for a batch is open to
// every class (the batch needs none of its model lanes), and nothing reads past the batch's
// shape.
func TestBatchHoldAcrossAddModel(t *testing.T) {
	p := NewProvider(ProviderSpec{Name: "p", Lanes: 3, QueueLength: 10, QueueTimeout: time.Minute,
		Models: []ModelSpec{{Name: "a", Lanes: 3}}})
	two := []Member{{ID: 100, Class: N}, {ID: 101, Class: N}}
	p.batchHold.refused(two, len(p.models), BlockedByLanes, time.Second, t0)
	now := t0.Add(time.Second)
	p.batchHold.refused(two, len(p.models), BlockedByLanes, time.Second, now)
	m := p.AddModel(ModelSpec{Name: "b", Lanes: 3})
	for id := range ID(3) {
		p.Enter(id+1, Arrival{Model: m, Class: N}, now)
	}
	ends := map[ID]time.Time{}
	startAll(p, now, time.Hour, ends)
	if len(ends) != 1 {
		t.Errorf("%d of model b's calls started, want 1 (the lane beyond the 2 kept)", len(ends))
	}
}
