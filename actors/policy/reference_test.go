package policy

import (
	"slices"
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/providers/llm"
)

// refGate is a slow, obviously-correct model of the SPEC §2 rules and the limiters for the
// property tests: one global dispatcher over a flat list of requests, every count recomputed
// by scanning it, every choice the minimum of an explicit sort key over all candidates. It
// dispatches after every event, as the actors do.
//
// Its limiters are the pure buckets and rings of packages tokens and keys (tested there),
// kept apart from the gate's and told the same things. What it models is how admission
// consults them: each provider's next request in SPEC order is its candidate; a candidate
// whose key pool has no ready key with room for it holds back its pool (the pool's requests
// behind it wait, other pools' go on), and one the provider's rate limiter has no room for
// holds back the whole provider.
type refGate struct {
	limits Limits
	specs  []ProviderSpec
	eff    []int
	meff   map[[2]int]int // effective model lanes set below the configured ones
	caps   []int          // start cap per provider; negative: none
	lim    []tokens.Limiter
	rings  [][]*keys.Ring
	klim   [][][]tokens.Limiter // per provider, pool, key; nil without key limits
	reqs   []*refReq            // live requests in the order they entered
	last   [llm.NumPriorities]int
	seq    int
	// Fair shares between clients (SPEC §18), per provider: each client's service per
	// class, the starts it was given at fairScale/weight each, and per class the highest
	// service a start was charged at, which a client whose class queue was empty takes up.
	tags  map[refTag]int64
	vtime [][llm.NumPriorities]int64
	// The same at the gateway's max_running: each client's service per class over every
	// provider, and per class the highest service a start was charged at, which a client
	// with nothing of the class queued at a provider takes up when a call enters there.
	gtags  map[string][llm.NumPriorities]int64
	gvtime [llm.NumPriorities]int64
	stats  map[string]int // when set, counts the picks the shares decided against the turn
}

type refTag struct {
	p      int
	client string
	c      int
}

type refState int

const (
	refQueued refState = iota
	refRunning
)

type refReq struct {
	id       ID
	p, m, c  int
	client   string
	share    int // its client's weight, at least 1
	maxRun   int // its client's max_running, gateway-wide; 0: none
	seq      int
	state    refState
	cost     int
	key      int
	requeued bool // entered admitted (a capacity requeue): no verdict, not held to queue_length
	arrived  time.Time
	started  time.Time
	deadline time.Time
}

// testKeys is the cooldown rule of every ring the property tests make.
var testKeys = keys.Config{Cooldown: 2 * time.Second, MaxCooldown: 20 * time.Second}

func newRef(l Limits, specs []ProviderSpec) *refGate {
	r := &refGate{limits: l, specs: specs, meff: map[[2]int]int{}, tags: map[refTag]int64{}, gtags: map[string][llm.NumPriorities]int64{},
		vtime: make([][llm.NumPriorities]int64, len(specs))}
	for _, ps := range specs {
		r.eff = append(r.eff, ps.Lanes)
		r.caps = append(r.caps, -1)
		r.lim = append(r.lim, tokens.NewLimiter(tokens.Limit{RPM: ps.RPM, TPM: ps.TPM, Burst: ps.Burst}))
		pools := ps.Keys
		if len(pools) == 0 {
			pools = []KeyPool{{}}
		}
		var rings []*keys.Ring
		var klim [][]tokens.Limiter
		for _, kp := range pools {
			n := 1
			if kp.Ring != nil {
				n = kp.Ring.Len()
			}
			rings = append(rings, keys.New(n, testKeys))
			var ls []tokens.Limiter
			if l := tokens.NewLimiter(kp.Limit); l.Limited() {
				ls = slices.Repeat([]tokens.Limiter{l}, n)
			}
			klim = append(klim, ls)
		}
		r.rings, r.klim = append(r.rings, rings), append(r.klim, klim)
	}
	for c := range r.last {
		r.last[c] = len(specs) - 1
	}
	return r
}

func (r *refGate) pool(p, m int) int {
	if pl := r.specs[p].Models[m].Keys; pl > 0 && pl < len(r.rings[p]) {
		return pl
	}
	return 0
}

func (r *refGate) modelLanes(p, m int) int {
	if n, ok := r.meff[[2]int{p, m}]; ok {
		return n
	}
	return r.specs[p].Models[m].Lanes
}

func (r *refGate) count(match func(q *refReq) bool) int {
	n := 0
	for _, q := range r.reqs {
		if match(q) {
			n++
		}
	}
	return n
}

func (r *refGate) running(p, m int) int {
	return r.count(func(q *refReq) bool {
		return q.state != refQueued && (p < 0 || q.p == p) && (m < 0 || q.m == m)
	})
}

func (r *refGate) queued(p, m int) int {
	return r.count(func(q *refReq) bool {
		return q.state == refQueued && (p < 0 || q.p == p) && (m < 0 || q.m == m)
	})
}

func (r *refGate) find(id ID) (int, *refReq) {
	for i, q := range r.reqs {
		if q.id == id {
			return i, q
		}
	}
	return -1, nil
}

func (r *refGate) remove(id ID) {
	if i, _ := r.find(id); i >= 0 {
		r.reqs = append(r.reqs[:i], r.reqs[i+1:]...)
	}
}

// earlier orders requests by arrival, then by the order they entered.
func earlier(a, b *refReq) bool {
	if !a.arrived.Equal(b.arrived) {
		return a.arrived.Before(b.arrived)
	}
	return a.seq < b.seq
}

// head is the first queued request of client cl for (p, m, c) by arrival.
func (r *refGate) head(p, m, c int, cl string) *refReq {
	var h *refReq
	for _, q := range r.reqs {
		if q.state == refQueued && q.p == p && q.m == m && q.c == c && q.client == cl && (h == nil || earlier(q, h)) {
			h = q
		}
	}
	return h
}

// clients are the clients with a queued request of class c at provider p.
func (r *refGate) clients(p, c int) []string {
	var out []string
	for _, q := range r.reqs {
		if q.state == refQueued && q.p == p && q.c == c && !slices.Contains(out, q.client) {
			out = append(out, q.client)
		}
	}
	return out
}

// capped reports whether client cl runs its max_running, counted across every provider.
func (r *refGate) capped(cl string) bool {
	maxRun := 0
	for _, q := range r.reqs {
		if q.client == cl {
			maxRun = q.maxRun
		}
	}
	return maxRun > 0 && r.count(func(q *refReq) bool { return q.state == refRunning && q.client == cl }) >= maxRun
}

// enqueue makes q queued: a client with nothing queued in q's class at q's provider takes
// up the class's service if its own is less.
func (r *refGate) enqueue(q *refReq) {
	if r.count(func(o *refReq) bool { return o.state == refQueued && o.p == q.p && o.c == q.c && o.client == q.client }) == 0 {
		t := refTag{q.p, q.client, q.c}
		r.tags[t] = max(r.tags[t], r.vtime[q.p][q.c])
		g := r.gtags[q.client]
		g[q.c] = max(g[q.c], r.gvtime[q.c])
		r.gtags[q.client] = g
	}
	q.state = refQueued
}

// serves reports whether pool pl of provider p has a key ready for model m (negative: for
// any model, keys set aside for one model alone not counted) with room for cost.
func (r *refGate) serves(p, pl, m, cost int, now time.Time) bool {
	ring := r.rings[p][pl]
	for i := range ring.Len() {
		if ring.State(i, m, now) == keys.Ready && (r.klim[p][pl] == nil || r.klim[p][pl][i].Allow(cost, now)) {
			return true
		}
	}
	return false
}

// poolFree is when pool pl could serve cost for model m: the earliest key ready for it then
// with room.
func (r *refGate) poolFree(p, pl, m, cost int, now time.Time) (time.Time, bool) {
	var t time.Time
	found := false
	ring := r.rings[p][pl]
	for i := range ring.Len() {
		at, ok := ring.ReadyAt(i, m)
		if !ok {
			continue
		}
		if at.Before(now) {
			at = now
		}
		if r.klim[p][pl] != nil {
			if w, _ := r.klim[p][pl][i].Wait(cost, now); now.Add(w).After(at) {
				at = now.Add(w)
			}
		}
		if !found || at.Before(t) {
			t, found = at, true
		}
	}
	return t, found
}

// candidate is provider p's request that the SPEC order starts next, or nil when its
// limiters hold everything back; wake, when set, is told when each limiter that held a
// request back would have room for it.
func (r *refGate) candidate(p int, now time.Time, wake func(time.Time)) *refReq {
	if r.running(p, -1) >= r.eff[p] || r.running(-1, -1) >= r.limits.MaxRunning || r.caps[p] == 0 {
		return nil
	}
	blocked := map[int]bool{} // pools
	held := map[int]bool{}    // models whose keys are set aside for them, not for the pool's others
	for c := range llm.NumPriorities {
		for {
			// The client with the least service whose model choice finds a request (tie: the
			// earlier request), and that request.
			var best *refReq
			for _, cl := range r.clients(p, c) {
				if r.capped(cl) {
					continue // at its max_running across every provider: its requests wait
				}
				var h *refReq
				for m := range r.specs[p].Models {
					x := r.head(p, m, c, cl)
					if x == nil || r.running(p, m) >= r.modelLanes(p, m) || blocked[r.pool(p, m)] || held[m] {
						continue
					}
					if h == nil || r.running(p, m) < r.running(p, h.m) ||
						r.running(p, m) == r.running(p, h.m) && earlier(x, h) {
						h = x
					}
				}
				if h == nil {
					continue
				}
				if best == nil || r.tags[refTag{p, cl, c}] < r.tags[refTag{p, best.client, c}] ||
					r.tags[refTag{p, cl, c}] == r.tags[refTag{p, best.client, c}] && earlier(h, best) {
					best = h
				}
			}
			if best == nil {
				break
			}
			if pl := r.pool(p, best.m); !r.serves(p, pl, best.m, best.cost, now) {
				// Blocked, the pool frees when a key is ready for any model; held, the
				// model when one is ready for it.
				m := -1
				if r.serves(p, pl, -1, best.cost, now) {
					held[best.m], m = true, best.m
				} else {
					blocked[pl] = true
				}
				if at, ok := r.poolFree(p, pl, m, best.cost, now); ok && wake != nil {
					wake(at)
				}
				continue
			}
			if w, _ := r.lim[p].Wait(best.cost, now); w > 0 {
				if wake != nil {
					wake(now.Add(w))
				}
				return nil
			}
			return best
		}
	}
	return nil
}

// pick is the request the global dispatcher starts next: among the providers' candidates,
// the highest class, then the one whose client has the least service at the gateway, then
// the provider first after the one that class was served last.
func (r *refGate) pick(now time.Time) *refReq {
	np := len(r.specs)
	var best *refReq
	bestKey := [3]int64{}
	turn := int64(np) // the least turn distance among the candidates of the best class
	for p := range r.specs {
		q := r.candidate(p, now, nil)
		if q == nil {
			continue
		}
		key := [3]int64{int64(q.c), r.gtag(q.client, q.c), int64((q.p - r.last[q.c] - 1 + np) % np)}
		if best == nil || key[0] < bestKey[0] {
			turn = key[2]
		} else if key[0] == bestKey[0] {
			turn = min(turn, key[2])
		}
		if best == nil || slices.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey = q, key
		}
	}
	if best != nil && bestKey[2] != turn && r.stats != nil {
		r.stats["chosen by shares"]++
	}
	return best
}

// gtag is client cl's service in class c at the gateway.
func (r *refGate) gtag(cl string, c int) int64 { return r.gtags[cl][c] }

// start runs q: its lanes, a start of the cap, its tokens, and the key the ring's turn gives.
func (r *refGate) start(q *refReq, now time.Time) {
	q.state = refRunning
	q.started = now
	t := refTag{q.p, q.client, q.c}
	r.vtime[q.p][q.c] = max(r.vtime[q.p][q.c], r.tags[t])
	r.tags[t] += fairScale / int64(q.share)
	g := r.gtags[q.client]
	r.gvtime[q.c] = max(r.gvtime[q.c], g[q.c])
	g[q.c] += fairScale / int64(q.share)
	r.gtags[q.client] = g
	r.last[q.c] = q.p
	if r.caps[q.p] > 0 {
		r.caps[q.p]--
	}
	key, _ := r.pickKey(q, now, nil)
	r.charge(q, key, now)
}

func (r *refGate) pickKey(q *refReq, now time.Time, tried func(int) bool) (int, bool) {
	pl := r.pool(q.p, q.m)
	return r.rings[q.p][pl].Pick(q.m, now, func(i int) bool {
		return tried != nil && tried(i) || r.klim[q.p][pl] != nil && !r.klim[q.p][pl][i].Allow(q.cost, now)
	})
}

func (r *refGate) charge(q *refReq, key int, now time.Time) {
	q.key = key
	r.lim[q.p].Take(q.cost, now)
	if ls := r.klim[q.p][r.pool(q.p, q.m)]; ls != nil {
		ls[key].Take(q.cost, now)
	}
}

// arrive enqueues, runs the dispatcher, and rejects (undoing the enqueue) if the newcomer
// did not start, exactly as the package comment states the rules. arrived zero is now.
// others are the requests that started other than the newcomer, in order.
func (r *refGate) arrive(id ID, p, m, c, cost int, cl llm.Client, arrived, now time.Time) (o Outcome, k llm.Kind, others []ID) {
	if arrived.IsZero() {
		arrived = now
	}
	r.seq++
	ps := r.specs[p]
	q := &refReq{id: id, p: p, m: m, c: c, client: cl.Name, share: cl.Share(), maxRun: cl.MaxRunning, seq: r.seq, cost: cost,
		arrived: arrived, deadline: now.Add(ps.QueueTimeout)}
	r.enqueue(q)
	r.reqs = append(r.reqs, q)
	started := false
	for x := r.pick(now); x != nil; x = r.pick(now) {
		r.start(x, now)
		if x == q {
			started = true
			continue
		}
		others = append(others, x.id)
	}
	if started {
		return Started, 0, others
	}
	switch {
	case r.running(-1, -1)+r.queued(-1, -1)-1 >= r.limits.MaxAdmitted:
		r.remove(id)
		return Rejected, llm.KindOverloaded, others
	case r.queued(p, -1)-1 >= ps.QueueLength:
		r.remove(id)
		return Rejected, llm.KindQueueFull, others
	}
	return Queued, 0, others
}

// requeue puts running id back in its queue as next, keeping its place and deadline, then
// dispatches; it returns the starts, or false for an id that does not run.
func (r *refGate) requeue(id, next ID, now time.Time) ([]ID, bool) {
	_, q := r.find(id)
	if q == nil || q.state != refRunning {
		return nil, false
	}
	r.seq++
	q.id, q.seq, q.requeued, q.started = next, r.seq, true, time.Time{}
	r.enqueue(q)
	return r.dispatch(now), true
}

func (r *refGate) dispatch(now time.Time) []ID {
	var out []ID
	for x := r.pick(now); x != nil; x = r.pick(now) {
		r.start(x, now)
		out = append(out, x.id)
	}
	return out
}

func (r *refGate) finish(id ID) bool {
	_, q := r.find(id)
	if q == nil || q.state != refRunning {
		return false
	}
	r.remove(id)
	return true
}

func (r *refGate) cancel(id ID) bool {
	_, q := r.find(id)
	if q == nil || q.state == refRunning {
		return false
	}
	r.remove(id)
	return true
}

// expire returns the expired requests grouped by provider, each group by deadline (then
// the order they entered).
func (r *refGate) expire(now time.Time) []ID {
	var out []ID
	for p := range r.specs {
		var due []*refReq
		for _, q := range r.reqs {
			if q.p == p && q.state == refQueued && !q.deadline.After(now) {
				due = append(due, q)
			}
		}
		slices.SortFunc(due, func(a, b *refReq) int {
			if c := a.deadline.Compare(b.deadline); c != 0 {
				return c
			}
			return a.seq - b.seq
		})
		for _, q := range due {
			out = append(out, q.id)
			r.remove(q.id)
		}
	}
	return out
}

// wake is NextWake, computed right after a dispatch at now (nothing eligible): the earliest
// deadline, or the earliest time a limiter that holds a provider's candidate back has room.
func (r *refGate) wake(now time.Time) (time.Time, bool) {
	var t time.Time
	ok := false
	earlier := func(c time.Time) {
		if !ok || c.Before(t) {
			t, ok = c, true
		}
	}
	for _, q := range r.reqs {
		if q.state == refQueued {
			earlier(q.deadline)
		}
	}
	for p := range r.specs {
		if r.queued(p, -1) > 0 {
			r.candidate(p, now, earlier)
		}
	}
	return t, ok
}

// retryAfter is the wait until the provider's rate limiter has room for cost.
func (r *refGate) retryAfter(p, cost int, now time.Time) time.Duration {
	w, _ := r.lim[p].Wait(cost, now)
	return w
}

// retryKey and retry are a running request's next attempt, as Provider.RetryKey and Retry.
func (r *refGate) retryKey(id ID, now time.Time, tried func(int) bool) (int, bool) {
	_, q := r.find(id)
	if q == nil || q.state != refRunning {
		return 0, false
	}
	ring := r.rings[q.p][r.pool(q.p, q.m)]
	turn := ring.Turn()
	defer ring.SetTurn(turn) // a key looked at, not taken: the attempt may not be made
	return r.pickKey(q, now, tried)
}

func (r *refGate) retry(id ID, key int, now time.Time) {
	if _, q := r.find(id); q != nil && q.state == refRunning {
		r.charge(q, key, now)
		ring := r.rings[q.p][r.pool(q.p, q.m)]
		ring.SetTurn((key + 1) % ring.Len())
	}
}

func (r *refGate) correct(id ID, actual int, now time.Time) {
	_, q := r.find(id)
	if q == nil || q.state != refRunning {
		return
	}
	r.lim[q.p].Correct(q.cost, actual, now)
	if ls := r.klim[q.p][r.pool(q.p, q.m)]; ls != nil {
		ls[q.key].Correct(q.cost, actual, now)
	}
}

func (r *refGate) lookup(id ID) (gateInfo, bool) {
	_, q := r.find(id)
	if q == nil {
		return gateInfo{}, false
	}
	in := gateInfo{Provider: q.p, Info: Info{Model: q.m, Priority: llm.Priority(q.c), Running: q.state == refRunning,
		Arrived: q.arrived, Deadline: q.deadline, Tokens: q.cost, Client: llm.Client{Name: q.client, Weight: q.share, MaxRunning: q.maxRun}}}
	if in.Running {
		in.Started, in.Key = q.started, q.key
	}
	return in, true
}

// batch starts every member at once or none (SPEC §5): only if the global cap and every
// provider's lanes, model lanes and tokens cover the members counted together. A batch
// never passes a waiting request; after a dispatch none could start, so that needs no rule.
func (r *refGate) batch(members []batchMember, c int, now time.Time) bool {
	if r.running(-1, -1)+len(members) > r.limits.MaxRunning {
		return false
	}
	perP, perM := map[int]int{}, map[[2]int]int{}
	for _, mb := range members {
		perP[mb.p]++
		perM[[2]int{mb.p, mb.m}]++
	}
	for p, n := range perP {
		if r.running(p, -1)+n > r.eff[p] || r.caps[p] >= 0 && r.caps[p] < n {
			return false
		}
	}
	for pm, n := range perM {
		if r.running(pm[0], pm[1])+n > r.modelLanes(pm[0], pm[1]) {
			return false
		}
	}
	// Start the members one by one as start does; if a limiter or a pool runs out, undo it all.
	lim, klim, caps := slices.Clone(r.lim), cloneKlim(r.klim), slices.Clone(r.caps)
	turns := make([][]int, len(r.rings))
	for p := range r.rings {
		for _, ring := range r.rings[p] {
			turns[p] = append(turns[p], ring.Turn())
		}
	}
	reqs := len(r.reqs)
	undo := func() bool {
		r.lim, r.klim, r.caps, r.reqs = lim, klim, caps, r.reqs[:reqs]
		for p := range turns {
			for pl, t := range turns[p] {
				r.rings[p][pl].SetTurn(t)
			}
		}
		return false
	}
	for _, mb := range members {
		r.seq++
		q := &refReq{id: mb.id, p: mb.p, m: mb.m, c: c, share: 1, seq: r.seq, cost: mb.cost, arrived: now,
			deadline: now.Add(r.specs[mb.p].QueueTimeout)}
		if !r.lim[mb.p].Allow(q.cost, now) {
			return undo()
		}
		key, ok := r.pickKey(q, now, nil)
		if !ok {
			return undo()
		}
		q.state, q.started = refRunning, now
		if r.caps[mb.p] > 0 {
			r.caps[mb.p]--
		}
		r.charge(q, key, now)
		r.reqs = append(r.reqs, q)
	}
	return true
}

func cloneKlim(k [][][]tokens.Limiter) [][][]tokens.Limiter {
	out := make([][][]tokens.Limiter, len(k))
	for p := range k {
		for _, ls := range k[p] {
			out[p] = append(out[p], slices.Clone(ls))
		}
	}
	return out
}
