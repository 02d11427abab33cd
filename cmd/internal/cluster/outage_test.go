package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestShare(t *testing.T) {
	for _, tc := range []struct{ limit, alive, want int }{
		{10, 1, 10}, {10, 3, 3}, {10, 4, 2}, {3, 3, 1}, {4, 3, 1},
		{2, 3, 1}, // more replicas than slots: still 1 each (SPEC §17), 3 together
		{1, 5, 1}, {10, 0, 10}, {10, -1, 10},
	} {
		if got := Share(tc.limit, tc.alive); got != tc.want {
			t.Errorf("Share(%d, %d) = %d, want %d", tc.limit, tc.alive, got, tc.want)
		}
	}
}

// TestOutagePhases: the strict rule in each phase of one outage.
func TestOutagePhases(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ttl, maxRun := 10*time.Second, time.Minute
	o := &outage{since: t0, ttl: ttl, maxRun: maxRun, alive: 3, strict: true,
		held: map[string][]time.Time{"p": {t0.Add(2 * time.Second), t0.Add(5 * time.Second), t0.Add(5 * time.Second), t0.Add(6 * time.Second)}}}
	for _, tc := range []struct {
		at    time.Duration
		scope string
		limit int
		phase Phase
		want  int
	}{
		{0, "p", 9, Holding, 4},                      // every entry still counted in Redis
		{3 * time.Second, "p", 9, Holding, 3},        // one expired
		{5 * time.Second, "p", 9, Holding, 1},        // an entry expires at its validity
		{7 * time.Second, "p", 9, Holding, 0},        // all expired, still within lease_ttl
		{0, "q", 9, Holding, 0},                      // held nothing there
		{ttl, "p", 9, Settling, 3},                   // min(share 3, held 4)
		{ttl, "p", 30, Settling, 4},                  // min(share 10, held 4)
		{ttl, "q", 9, Settling, 0},                   // held nothing: nothing until the calls before are over
		{ttl + maxRun - 1, "p", 9, Settling, 3},      // still settling
		{ttl + maxRun, "p", 30, Alone, 10},           // the share
		{ttl + maxRun, "q", 9, Alone, 3},             // the share, held or not
		{ttl + maxRun, "q", 2, Alone, 1},             // at least 1
		{ttl + maxRun + time.Hour, "q", 9, Alone, 3}, // for as long as Redis is away
	} {
		now := t0.Add(tc.at)
		if p := o.phase(now); p != tc.phase {
			t.Errorf("at %s: phase %s, want %s", tc.at, p, tc.phase)
		}
		if got := o.allowed(tc.scope, tc.limit, now); got != tc.want {
			t.Errorf("at %s, %s limit %d: allowed %d, want %d", tc.at, tc.scope, tc.limit, got, tc.want)
		}
	}
	blind := &outage{since: t0, ttl: ttl, maxRun: maxRun, alive: 1, blind: true, strict: true}
	if p, n := blind.phase(t0), blind.allowed("p", 5, t0); p != Alone || n != 5 {
		t.Errorf("a replica that never reached Redis: %s, %d allowed; want fallback, 5", p, n)
	}
	if !blind.tokensFrom().Equal(t0) || !o.tokensFrom().Equal(t0.Add(ttl)) {
		t.Errorf("tokens from %s and %s", blind.tokensFrom(), o.tokensFrom())
	}
}

// TestOutageRuleProperty drives the outage rule of several replicas, strict and by
// default, through random outages of the Redis they share and their switch back, against a
// model of that Redis (its acquire keeping a silent replica's share free, as acquire.lua
// does), and checks the cluster-wide count of one scope after every step. By the strict
// rule it never exceeds the limit (when the replicas are no more than the limit, as SPEC
// §17's "at least 1" needs). By the default rule it never exceeds the limit plus what the
// engine counts as possible excess: calls beyond a replica's share that started after a
// peer's last view (possibleExcess); with no such start, never the limit.
func TestOutageRuleProperty(t *testing.T) {
	for _, tc := range []struct{ strict, cut bool }{{true, false}, {false, false}, {false, true}} {
		excessSeen := 0
		for seed := range uint64(400) {
			msg, excess := simulateOutage(seed, tc.strict, tc.cut)
			if msg != "" {
				t.Fatalf("strict %v, cut %v, seed %d: %s", tc.strict, tc.cut, seed, msg)
			}
			excessSeen += excess
		}
		if !tc.strict && excessSeen == 0 {
			t.Errorf("cut %v: no seed started a call after a peer's last view: the excess bound was never exercised", tc.cut)
		}
	}
}

func FuzzOutageRule(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, seed%2 == 0, seed%4 == 1)
	}
	f.Fuzz(func(t *testing.T, seed uint64, strict, cut bool) {
		if msg, _ := simulateOutage(seed, strict && !cut, cut); msg != "" {
			t.Fatal(msg)
		}
	})
}

// simReplica is one replica of the simulation and what the Redis model holds of it.
type simReplica struct {
	calls     []time.Duration // its running calls: when each ends
	phase     Phase           // Shared (noticed nothing), Holding (any outage phase: see out), Rejoining
	out       *outage
	rejoined  time.Duration
	valid     time.Duration   // local validity of its entries
	detect    time.Duration   // its first heartbeat after Redis went away
	notice    time.Duration   // its first probe after Redis came back
	regCount  int             // its entries in Redis (running calls, and ended ones not released)
	regExpiry time.Duration   // when Redis reclaims them, unless renewed
	beat      time.Duration   // its last heartbeat in Redis
	forgotten bool            // Redis has no heartbeat of it (restarted empty)
	starts    []time.Duration // when each call running at the loss started (before 0)
	unseen    []time.Duration // the ends of its calls started since the cut replica's last view
}

// simulateOutage runs one random outage of a Redis shared by n replicas, with one scope
// of the given limit, by the strict rule or the default one: "" when the replicas together
// never ran more than the limit (plus, by the default rule, excess: the calls beyond their
// shares that started after a peer's last view, which the engine counts and logs). Redis
// here is stopped, not paused: a command sent while it is away never runs. With cut, Redis
// stays up and only the first replica is cut off from it (a partition) until back, and the
// bound is what the failure table says a partition leaves uncounted (uncounted).
func simulateOutage(seed uint64, strict, cut bool) (msg string, excess int) {
	r := rand.New(rand.NewPCG(seed, 11))
	const step = 10 * time.Millisecond
	ttl := time.Second
	hb, op, margin := ttl/3, ttl/5, ttl/20
	silent := hb + op + 2*margin // timings.silent
	maxRun := ttl + time.Duration(r.IntN(3000))*time.Millisecond
	n := 1 + r.IntN(4)
	limit := n + r.IntN(8)
	back := 200*time.Millisecond + time.Duration(r.IntN(6000))*time.Millisecond
	keepsData := r.IntN(2) == 0 // paused, or restarted empty
	if cut {
		// Healed within lease_ttl + MaxRun of its last heartbeat: past that horizon a cut
		// replica counts as dead, its share is no longer kept free, and what it runs is not
		// counted (the failure table).
		back = min(back, ttl+maxRun-hb-300*time.Millisecond-2*step) // noticed within 300ms of back
	}
	ms := func(d time.Duration) time.Duration {
		return time.Duration(r.Int64N(int64(d/time.Millisecond))+1) * time.Millisecond
	}
	t0 := time.Unix(0, 0)
	names := []string{"a", "b", "c", "d"}[:n]

	// At 0 Redis stops answering. Before, leases were taken through it: at most limit in
	// all, skewed so that some replicas hold more than their share.
	reps := make([]*simReplica, n)
	total := 0
	for i := range reps {
		renew := -ms(hb) // its last renewal
		rp := &simReplica{valid: renew + ttl - margin, regExpiry: renew + ttl, beat: renew,
			detect: renew + hb + ms(op), notice: back + ms(300*time.Millisecond)}
		for k := r.IntN(limit + 1); k > 0 && total < limit; k-- {
			rp.calls = append(rp.calls, ms(maxRun))
			rp.starts = append(rp.starts, -ms(hb)) // some after a peer's last heartbeat
			total++
		}
		rp.regCount = len(rp.calls)
		reps[i] = rp
	}
	lastView := reps[0].beat // the cut replica's
	if cut {
		// Nothing loses Redis but the cut replica, and its peers run on Redis, not on views.
		for _, rp := range reps[1:] {
			for k, st := range rp.starts {
				if st > lastView {
					rp.unseen = append(rp.unseen, rp.calls[k])
				}
			}
		}
	} else {
		excess = viewExcess(reps, names, limit)
	}
	before := slices.Clone(reps[0].calls) // the cut replica's calls from before the cut
	heldOf := func(rp *simReplica, valid time.Duration) map[string][]time.Time {
		h := map[string][]time.Time{}
		for range rp.calls {
			h["s"] = append(h["s"], t0.Add(valid))
		}
		return h
	}
	lose := func(i int, at time.Time, valid time.Duration) *outage {
		rp := reps[i]
		return &outage{since: at, ttl: ttl, maxRun: maxRun, alive: n, known: names, strict: strict, held: heldOf(rp, valid),
			self: names[i], servesFrom: t0.Add(rp.beat + silent + margin), others: map[string]map[string][]time.Time{"s": viewOf(reps, names, i, t0, maxRun)}}
	}
	redis := &simRedis{reps: reps, names: names, limit: limit, silent: silent, horizon: ttl + maxRun}
	silenced := false
	for now := time.Duration(0); now < back+3*ttl+maxRun; now += step {
		at := t0.Add(now)
		if now == back && !keepsData && !cut { // a restart without persistence: everything gone
			for _, rp := range reps {
				rp.regCount, rp.forgotten = 0, true
			}
		}
		for i, rp := range reps {
			up := now >= back || cut && i > 0                          // it reaches Redis
			if (up || cut) && rp.regCount > 0 && now >= rp.regExpiry { // reclaimed by any script
				rp.regCount = 0
			}
			noticed := rp.phase != Shared || now >= rp.detect
			kept := rp.calls[:0]
			for _, end := range rp.calls {
				switch {
				case end > now:
					kept = append(kept, end)
				case up && rp.phase != Holding && rp.regCount > 0:
					rp.regCount-- // released
				}
			}
			rp.calls = kept
			switch {
			case rp.phase == Shared && !up && noticed:
				rp.phase, rp.out = Holding, lose(i, at, rp.valid)
			case rp.phase == Shared && up && now >= rp.detect && now < rp.detect+step:
				// Its first heartbeat since the outage began, and Redis answers it.
				if rp.forgotten { // Redis lost it: rejoin from now
					rp.out = lose(i, at, now+ttl-margin)
					rp.phase, rp.rejoined = Rejoining, now
				}
				rp.regCount, rp.regExpiry, rp.beat, rp.valid, rp.forgotten = len(rp.calls), now+ttl, now, now+ttl-margin, false
			case rp.phase == Holding && up && now >= rp.notice:
				rp.regCount, rp.regExpiry = len(rp.calls), now+ttl                        // adopted
				rp.phase, rp.rejoined, rp.beat, rp.forgotten = Rejoining, now, now, false // then its heartbeat
			case rp.phase == Rejoining && (now-rp.rejoined >= ttl || allFresh(reps, now, ttl-margin)):
				rp.phase, rp.out = Shared, nil
			}
			if rp.phase != Holding && up && now >= rp.detect { // heartbeats renew
				rp.regExpiry, rp.beat, rp.valid = now+ttl, now, now+ttl-margin
			}
			for k := r.IntN(3); k > 0 && simStart(rp, at, limit, up, redis.admits(i, now)); k-- {
				rp.calls = append(rp.calls, now+ms(maxRun))
				if cut && i > 0 && !silenced {
					rp.unseen = append(rp.unseen, rp.calls[len(rp.calls)-1])
				}
				if rp.phase != Holding {
					rp.regCount++
				}
			}
		}
		bound := excess
		if cut {
			silenced = silenced || now-lastView >= silent
			bound = uncounted(reps, names, limit, before, now)
			excess = max(excess, bound)
		}
		running := 0
		for _, rp := range reps {
			running += len(rp.calls)
		}
		if running > limit+bound {
			st := ""
			for i, rp := range reps {
				st += fmt.Sprintf(" [%s %s calls %d reg %d beat %s detect %s]", names[i], rp.phase, len(rp.calls), rp.regCount, rp.beat, rp.detect)
				if rp.out != nil {
					st += fmt.Sprintf(" allowed %d view %v", rp.out.allowed("s", limit, at), rp.out.others)
				}
			}
			return fmt.Sprintf("at %s, %d running, limit %d, beyond it by at most %d (n %d, back %s, keeps data %v)%s",
				now, running, limit, bound, n, back, keepsData, st), excess
		}
	}
	return "", excess
}

// viewOf is replica i's view at its last heartbeat: every other replica's calls running at
// the loss that had started by then, each until its deadline (at the latest maxRun after
// its start, as the engine's first sighting plus MaxRun is).
func viewOf(reps []*simReplica, names []string, i int, t0 time.Time, maxRun time.Duration) map[string][]time.Time {
	view := map[string][]time.Time{}
	for j, rp := range reps {
		for _, st := range rp.starts {
			if j != i && st <= reps[i].beat {
				view[names[j]] = append(view[names[j]], t0.Add(reps[i].beat+maxRun))
			}
		}
	}
	return view
}

// viewExcess is what the engine counts as possible excess at the loss, summed over the
// replicas: each one's calls beyond its share that some peer's last view does not show.
func viewExcess(reps []*simReplica, names []string, limit int) int {
	since := time.Duration(1 << 62)
	for _, rp := range reps {
		since = min(since, rp.beat)
	}
	total := 0
	for i, rp := range reps {
		starts := make([]time.Time, len(rp.starts))
		for k, st := range rp.starts {
			starts[k] = time.Unix(0, 0).Add(st)
			if st <= since { // seen by every peer: not recent
				starts[k] = time.Unix(0, 0).Add(since - 1)
			}
		}
		total += possibleExcess(len(rp.calls), shareOf(limit, names, names[i]), starts, time.Unix(0, 0).Add(since))
	}
	return total
}

// uncounted is what a partition may run beyond the limit at now (the failure table's
// partition row): the cut replica's calls from before the cut beyond its share (once their
// entries expire, Redis keeps only its share free; not counted), and each peer's calls
// beyond its share that started after the cut replica's last view and before its heartbeat
// turned silent (the cut replica's fallback cannot see them, and Redis kept no share free
// then; each peer counts these when the heartbeat turns silent, silencedLocked).
func uncounted(reps []*simReplica, names []string, limit int, before []time.Duration, now time.Duration) int {
	running := func(ends []time.Duration) int {
		n := 0
		for _, end := range ends {
			if end > now {
				n++
			}
		}
		return n
	}
	total := min(running(before), max(0, len(reps[0].calls)-shareOf(limit, names, names[0])))
	for i, rp := range reps[1:] {
		total += min(running(rp.unseen), max(0, len(rp.calls)-shareOf(limit, names, names[i+1])))
	}
	return total
}

// simRedis is the model of Redis's acquire: the scope's live entries, and the share of
// every silent replica (its heartbeat older than silent, younger than horizon) less its
// own entries, kept free for it (acquire.lua's reserved).
type simRedis struct {
	reps            []*simReplica
	names           []string
	limit           int
	silent, horizon time.Duration
}

// admits reports whether Redis, answering at now, has room for one more call of replica i.
func (m *simRedis) admits(i int, now time.Duration) bool {
	if m.reps[i].forgotten {
		return false // no heartbeat of it: nothing is taken until one registers its calls
	}
	count, reserved := 0, 0
	for j, rp := range m.reps {
		count += rp.regCount
		if age := now - rp.beat; j != i && !rp.forgotten && age >= m.silent && age < m.horizon {
			reserved += max(0, shareOf(m.limit, m.names, m.names[j])-rp.regCount)
		}
	}
	return count+reserved < m.limit
}

// allFresh reports whether every replica's heartbeat is younger than fresh.
func allFresh(reps []*simReplica, now, fresh time.Duration) bool {
	for _, rp := range reps {
		if rp.forgotten || now-rp.beat >= fresh {
			return false
		}
	}
	return true
}

// simStart decides one start as the engine does: Redis alone when shared (an acquire fails
// while Redis is away; redis is what it would answer); the outage rule while away; both
// while rejoining.
func simStart(rp *simReplica, at time.Time, limit int, up, redis bool) bool {
	switch rp.phase {
	case Shared:
		return up && redis
	case Holding:
		return len(rp.calls)+1 <= rp.out.allowed("s", limit, at)
	}
	return up && len(rp.calls)+1 <= rp.out.allowed("s", limit, at) && redis
}

// TestShareOf: the limit split among the replicas alive, the remainder going one each to
// the first names in byte order; the shares add up to exactly the limit.
func TestShareOf(t *testing.T) {
	abc := []string{"c", "a", "b"}
	for _, tc := range []struct {
		limit int
		alive []string
		self  string
		want  int
	}{
		{9, abc, "a", 3}, {9, abc, "c", 3},
		{10, abc, "a", 4}, {10, abc, "b", 3}, {10, abc, "c", 3},
		{11, abc, "b", 4}, {11, abc, "c", 3},
		{2, abc, "a", 1}, {2, abc, "b", 1}, {2, abc, "c", 0}, // more replicas than slots
		{1, abc, "a", 1}, {1, abc, "b", 0},
		{5, abc, "d", 0},                // not seen alive
		{5, nil, "d", 5},                // alone
		{5, []string{"B", "a"}, "B", 3}, // byte order: upper case first
	} {
		if got := shareOf(tc.limit, tc.alive, tc.self); got != tc.want {
			t.Errorf("shareOf(%d, %v, %s) = %d, want %d", tc.limit, tc.alive, tc.self, got, tc.want)
		}
	}
	for limit := 1; limit < 12; limit++ {
		sum := 0
		for _, r := range abc {
			sum += shareOf(limit, abc, r)
		}
		if sum != limit {
			t.Errorf("limit %d: the shares add up to %d", limit, sum)
		}
	}
}

// TestViewAllowed: a replica's share less what the view showed the others holding beyond
// theirs, each entry until its deadline.
func TestViewAllowed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s ...int) []time.Time {
		var out []time.Time
		for _, x := range s {
			out = append(out, t0.Add(time.Duration(x)*time.Second))
		}
		return out
	}
	abc := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name   string
		limit  int
		alive  []string
		others map[string][]time.Time
		now    int
		want   int
	}{
		{"quiet cluster: the share", 9, abc, nil, 0, 3},
		{"alone: the whole limit", 9, []string{"a"}, nil, 0, 9},
		{"the remainder to the first", 10, abc, nil, 0, 4},
		{"more replicas than slots: the first get 1", 2, abc, nil, 0, 1},
		{"balanced: peers at their shares", 9, abc, map[string][]time.Time{"b": at(5, 5, 5), "c": at(5, 5, 5)}, 0, 3},
		{"a peer below its share frees nothing", 9, abc, map[string][]time.Time{"b": at(5)}, 0, 3},
		{"a peer 2 beyond its share", 9, abc, map[string][]time.Time{"b": at(5, 5, 5, 5, 5)}, 0, 1},
		{"two peers beyond", 9, abc, map[string][]time.Time{"b": at(5, 5, 5, 5), "c": at(5, 5, 5, 5)}, 0, 1},
		{"one peer held everything", 3, abc, map[string][]time.Time{"b": at(5, 5, 5)}, 0, 0},
		{"never below 0", 3, abc, map[string][]time.Time{"b": at(5, 5, 5), "c": at(5, 5, 5)}, 0, 0},
		{"a peer not seen alive: all it held is beyond", 3, abc, map[string][]time.Time{"d": at(5)}, 0, 0},
		{"deadlines passed one by one", 3, abc, map[string][]time.Time{"b": at(2, 5, 8)}, 3, 0},
		{"at a deadline the entry is over", 3, abc, map[string][]time.Time{"b": at(2, 5, 8)}, 5, 1},
		{"all deadlines passed", 3, abc, map[string][]time.Time{"b": at(2, 5, 8)}, 9, 1},
		{"c's share of 2 is 0: its 1 is beyond", 2, abc, map[string][]time.Time{"c": at(5)}, 0, 0},
	} {
		if got := viewAllowed(tc.limit, tc.alive, "a", tc.others, t0.Add(time.Duration(tc.now)*time.Second)); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestViewAllowedAddsUp: whatever the replicas held when Redis went (at most the limit
// together), calls started by viewAllowed on every replica, each counting its own, never
// take the scope over its limit, however many replicas there are.
func TestViewAllowedAddsUp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		n := 1 + r.IntN(6)
		limit := 1 + r.IntN(10)
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("r%d", r.IntN(1000))
		}
		if hasDupes(names) {
			continue
		}
		held := make([]int, n)
		for left := r.IntN(limit + 1); left > 0; left-- {
			held[r.IntN(n)]++
		}
		total := 0
		for i := range n {
			others := map[string][]time.Time{}
			for j := range n {
				if j != i && held[j] > 0 {
					others[names[j]] = slices.Repeat([]time.Time{t0.Add(time.Hour)}, held[j])
				}
			}
			total += max(held[i], viewAllowed(limit, names, names[i], others, t0))
		}
		if total > limit {
			t.Fatalf("limit %d, replicas %v holding %v: %d may run", limit, names, held, total)
		}
	}
}

// TestPossibleExcess: only calls beyond the share that started since the last refresh.
func TestPossibleExcess(t *testing.T) {
	t0 := time.Unix(1000, 0)
	old, recent := t0.Add(-time.Second), t0.Add(time.Millisecond)
	for _, tc := range []struct {
		running, share int
		starts         []time.Time
		want           int
	}{
		{2, 3, []time.Time{recent, recent}, 0},          // within its share
		{5, 3, []time.Time{old, old, old, old, old}, 0}, // beyond, but every peer saw them
		{5, 3, []time.Time{old, old, old, recent, recent}, 2},
		{5, 3, []time.Time{recent, recent, recent, recent, recent}, 2}, // beyond the share only
		{4, 3, []time.Time{t0, old, old, old}, 1},                      // since is inclusive
	} {
		if got := possibleExcess(tc.running, tc.share, tc.starts, t0); got != tc.want {
			t.Errorf("%d running, share %d: %d, want %d", tc.running, tc.share, got, tc.want)
		}
	}
}

// TestOutageShareRule: the default rule holds until its peers keep its shares free, then
// runs on viewAllowed; tokens are lent from then too.
func TestOutageShareRule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	from := t0.Add(700 * time.Millisecond)
	o := &outage{since: t0, ttl: time.Second, maxRun: time.Minute, alive: 3, servesFrom: from,
		known: []string{"a", "b", "c"}, self: "a",
		held: map[string][]time.Time{"p": {t0.Add(300 * time.Millisecond)},
			"r": slices.Repeat([]time.Time{t0.Add(300 * time.Millisecond)}, 4)},
		others: map[string]map[string][]time.Time{"p": {"b": slices.Repeat([]time.Time{t0.Add(time.Minute)}, 5)}}}
	for _, tc := range []struct {
		at    time.Duration
		scope string
		phase Phase
		want  int
	}{
		{0, "p", Holding, 1},                      // the slot it holds
		{400 * time.Millisecond, "p", Holding, 0}, // its lease expired in Redis
		{400 * time.Millisecond, "q", Holding, 0},
		{0, "r", Holding, 3},                    // held 4, but never beyond its share
		{700 * time.Millisecond, "q", Alone, 3}, // a scope nobody held: the share
		{700 * time.Millisecond, "p", Alone, 1}, // b held 2 beyond its share
		{time.Minute, "p", Alone, 3},            // b's calls past their deadline
		{time.Hour, "q", Alone, 3},
	} {
		now := t0.Add(tc.at)
		if p := o.phase(now); p != tc.phase {
			t.Errorf("at %s: phase %s, want %s", tc.at, p, tc.phase)
		}
		if got := o.allowed(tc.scope, 9, now); got != tc.want {
			t.Errorf("at %s, %s: allowed %d, want %d", tc.at, tc.scope, got, tc.want)
		}
	}
	if !o.tokensFrom().Equal(from) {
		t.Errorf("tokens from %s, want %s", o.tokensFrom(), from)
	}
}

// TestShareRuleOverTime: every replica loses Redis at once, each holding some calls (at
// most the limit together) that end at random times before their deadline; then each
// replica, at every step, starts what viewAllowed lets it beside its own running calls,
// its calls ending at random too. The scope never runs more than its limit.
func TestShareRuleOverTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const step, maxRun = 10 * time.Millisecond, 2 * time.Second
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		n, limit := 1+r.IntN(5), 1+r.IntN(9)
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("r%d", i)
		}
		calls := make([][]time.Time, n) // per replica: when each running call ends
		for left := r.IntN(limit + 1); left > 0; left-- {
			i := r.IntN(n)
			calls[i] = append(calls[i], t0.Add(time.Duration(r.Int64N(int64(maxRun)))))
		}
		views := make([]map[string][]time.Time, n) // what each saw the others hold, at t0
		for i := range n {
			views[i] = map[string][]time.Time{}
			for j := range n {
				if j != i && len(calls[j]) > 0 {
					views[i][names[j]] = slices.Repeat([]time.Time{t0.Add(maxRun)}, len(calls[j]))
				}
			}
		}
		for now := t0; now.Before(t0.Add(2 * maxRun)); now = now.Add(step) {
			total := 0
			for i := range n {
				calls[i] = slices.DeleteFunc(calls[i], func(end time.Time) bool { return !now.Before(end) })
				for len(calls[i]) < viewAllowed(limit, names, names[i], views[i], now) && r.IntN(2) == 0 {
					calls[i] = append(calls[i], now.Add(time.Duration(1+r.Int64N(int64(maxRun)))))
				}
				total += len(calls[i])
			}
			if total > limit {
				t.Fatalf("seed %d: %d running at %s, limit %d (%d replicas)", seed, total, now.Sub(t0), limit, n)
			}
		}
	}
}

// TestPeerSilencedCountsExcess: when a peer's heartbeat turns silent, this replica counts its
// own calls beyond its share that started after the peer's last heartbeat (the peer, if cut
// off, serves its share from a view without them), once per silence, and not on the outage
// rule.
func TestPeerSilencedCountsExcess(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tm := newTimings(time.Second, 0, 10*time.Second)
	newE := func() *Engine {
		e := &Engine{o: Options{Replica: "r1", Now: func() time.Time { return t0 }}, t: tm, log: zerolog.Nop(),
			known: []string{"r1", "r2"}, ages: map[string]time.Duration{"r1": 0, "r2": 100 * time.Millisecond},
			leases: map[string]*Lease{}, running: map[string]int{}}
		// A scope of 4 (share 2 of 2 replicas): 4 running, 1 old, 3 started after r2's last heartbeat.
		for i, started := range []time.Time{t0.Add(-5 * time.Second), t0.Add(-300 * time.Millisecond), t0.Add(-200 * time.Millisecond), t0} {
			e.leases[fmt.Sprint(i)] = &Lease{entry: entry{member: fmt.Sprint(i), scopes: []string{"s"}}, limits: []int{4}, started: started}
		}
		e.running["s"] = 4
		return e
	}
	silent := beatResult{names: []string{"r1", "r2"}, ages: map[string]time.Duration{"r1": 0, "r2": tm.silent + 100*time.Millisecond}}
	e := newE()
	e.seenLocked(silent)
	if got := e.status.OutageExcess; got != 2 {
		t.Errorf("excess counted %d, want 2 (4 running, share 2, 3 of them recent)", got)
	}
	e.seenLocked(silent)
	if got := e.status.OutageExcess; got != 2 {
		t.Errorf("excess counted %d after a second silent heartbeat, want it counted once (2)", got)
	}
	away := newE()
	away.out = &outage{}
	away.seenLocked(silent)
	if got := away.status.OutageExcess; got != 0 {
		t.Errorf("on the outage rule: excess counted %d, want 0", got)
	}
	fresh := newE()
	fresh.seenLocked(beatResult{names: []string{"r1", "r2"}, ages: map[string]time.Duration{"r1": 0, "r2": 150 * time.Millisecond}})
	if got := fresh.status.OutageExcess; got != 0 {
		t.Errorf("a peer still beating: excess counted %d, want 0", got)
	}
}
