package policy

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/providers/llm"
)

// Provider is one provider's side of admission: its bounded queue with deadlines, its lanes
// and model lanes, its limiters (the rate limit, the keys, a cap on starts), and the choice of
// which of its requests starts next (least-busy model, then first come first served). Starts
// themselves are the dispatcher's to grant: Provider tells it what it could start (Offer) and
// starts what it is granted (Grant). See doc.go for the rules and the protocol.
type Provider struct {
	name          string
	lanes, eff    int
	running       int
	queued        int
	confirmed     int // queued entries the dispatcher's verdict kept
	queuedByClass [llm.NumPriorities]int
	queueLength   int
	timeout       time.Duration
	models        []model
	deadlines     list         // queued entries in deadline order
	limit         tokens.Limit // the rate limit limiter enforces
	limiter       tokens.Limiter
	pools         []pool
	startCap      int // starts still allowed; negative: no cap

	entries []entry
	free    int32
	index   map[ID]int32
	seq     uint64

	epoch, seen uint64 // the protocol: grants of this epoch handled so far
	sync        uint64 // the dispatcher generation last answered
	offers      uint64 // offers made; each entry knows the one that first reported it
	credit      int    // the ceiling of the credit held (credit.go); 0: none

	sim       simulation // Offer's and Grant's scratch space
	batchHold batchHold  // the batch lanes are kept for (batchhold.go)
}

type model struct {
	name    string
	lanes   int
	eff     int // effective model lanes: lanes unless learned lower
	pool    int
	running int
	queued  int
	fifo    [llm.NumPriorities]list
	blocked bool // the replicas' shared state has no room for it now (Block)
}

// pool is one set of keys: their ring and, with key_rate_limit, each key's limiter.
type pool struct {
	ring  *keys.Ring
	limit tokens.Limit
	lims  []tokens.Limiter // per key; nil when key_rate_limit limits nothing
}

// NewProvider builds a provider with every lane free, an empty queue and full buckets, at
// epoch 0.
func NewProvider(ps ProviderSpec) *Provider {
	p := &Provider{
		name: ps.Name, lanes: max(ps.Lanes, 0), eff: max(ps.Lanes, 0),
		queueLength: max(ps.QueueLength, 0), timeout: ps.QueueTimeout,
		deadlines: newList(), free: none, startCap: -1,
		limit: tokens.Limit{RPM: ps.RPM, TPM: ps.TPM, Burst: ps.Burst},
	}
	p.limiter = tokens.NewLimiter(p.limit)
	pools := ps.Keys
	if len(pools) == 0 {
		pools = []KeyPool{{}}
	}
	for _, kp := range pools {
		p.pools = append(p.pools, newPool(kp))
	}
	for _, ms := range ps.Models {
		p.models = append(p.models, p.newModel(ms))
	}
	// Size for the usual worst case so steady state never grows: a full queue and every lane.
	size := p.queueLength + p.lanes + 1
	p.entries = make([]entry, 0, size)
	p.index = make(map[ID]int32, size)
	return p
}

func newPool(kp KeyPool) pool {
	pl := pool{ring: kp.Ring, limit: kp.Limit}
	if pl.ring == nil {
		pl.ring = keys.New(1, keys.Config{})
	}
	if l := tokens.NewLimiter(kp.Limit); l.Limited() {
		pl.lims = make([]tokens.Limiter, pl.ring.Len())
		for i := range pl.lims {
			pl.lims[i] = l
		}
	}
	return pl
}

func (p *Provider) newModel(ms ModelSpec) model {
	md := model{name: ms.Name, lanes: max(ms.Lanes, 0), pool: ms.Keys}
	md.eff = md.lanes
	if md.pool < 0 || md.pool >= len(p.pools) {
		md.pool = 0
	}
	for c := range md.fifo {
		md.fifo[c] = newList()
	}
	return md
}

// Arrive enqueues a new request id for model m with class prio at now, at the tail of its
// FIFO: it waits for a grant (no barging: a grant starts the request the SPEC order picks,
// which is an older one when one is eligible) and for the dispatcher's verdict on whether it
// may wait at all (Verdict). It is Enter for a request that costs no tokens.
func (p *Provider) Arrive(id ID, m int, prio llm.Priority, now time.Time) (Outcome, llm.Kind) {
	return p.Enter(id, Arrival{Model: m, Class: prio}, now)
}

// Enter puts request id in its queue at now: in its FIFO at the place its arrival time
// gives it, in the deadline order by its deadline (see Arrival). It returns Queued, or
// Rejected for a caller's mistake: llm.KindModelNotFound for an unknown model,
// llm.KindInvalidRequest for an unknown class or an id already admitted. A rejected request
// changes nothing. A request that is not Confirmed awaits its verdict.
func (p *Provider) Enter(id ID, a Arrival, now time.Time) (Outcome, llm.Kind) {
	if a.Model < 0 || a.Model >= len(p.models) {
		return Rejected, llm.KindModelNotFound
	}
	if a.Class < 0 || a.Class >= llm.NumPriorities {
		return Rejected, llm.KindInvalidRequest
	}
	if _, dup := p.index[id]; dup {
		return Rejected, llm.KindInvalidRequest
	}
	if a.Arrived.IsZero() {
		a.Arrived = now
	}
	if a.Deadline.IsZero() {
		a.Deadline = now.Add(p.timeout)
	}
	p.enqueue(id, a)
	return Queued, 0
}

// Verdict applies the dispatcher's verdict on a pending arrival (Offer.Pending), which comes
// after the grants the dispatcher computed with that arrival in view. If the request has
// started or is gone meanwhile, or the verdict is of an older epoch, it is moot and Verdict
// returns false. Otherwise an overloaded verdict is llm.KindOverloaded and a queue-full one
// llm.KindQueueFull: Verdict returns the kind and true, and has forgotten the request; or it
// keeps the request and returns false.
//
// The dispatcher decides queue_full from the offers' kept counts, which never count fewer
// than the provider keeps: verdicts come in arrival order, and only verdicts add to the
// count. The provider checks again all the same, so that its queue never holds more than
// queue_length kept requests whatever the dispatcher believed.
func (p *Provider) Verdict(v Verdict) (llm.Kind, bool) {
	e, ok := p.index[v.ID]
	if !ok || v.Epoch != p.epoch || p.entries[e].state != queued || p.entries[e].confirmed {
		return 0, false
	}
	switch {
	case v.Overloaded:
		p.forget(e)
		return llm.KindOverloaded, true
	case v.QueueFull || p.confirmed >= p.queueLength:
		p.forget(e)
		return llm.KindQueueFull, true
	}
	p.entries[e].confirmed = true
	p.confirmed++
	return 0, false
}

// Start is what a grant started: the request and the key its call uses (an index in its
// model's pool).
type Start struct {
	ID  ID
	Key int
}

// Grant handles one grant from the dispatcher: it starts the request of class g.Class that
// the SPEC order picks now, charges the limiters, picks its key, and returns them; or it
// returns ok false and starts nothing when the grant is void (an older epoch's) or can no
// longer be used (the request it was meant for was cancelled or expired in between, or a
// request of a higher class arrived for the same lanes). A grant of the current epoch counts
// as seen either way: the next Offer tells the dispatcher, which takes the start back. kept
// says the request had been kept by a verdict: the dispatcher counted it as kept, so the
// owner must offer again for it to count it as running instead.
func (p *Provider) Grant(g Grant, now time.Time) (st Start, kept, ok bool) {
	if g.Epoch != p.epoch {
		return Start{}, false, false
	}
	p.seen++
	if g.Class < 0 || g.Class >= llm.NumPriorities {
		return Start{}, false, false
	}
	e := p.simulate(now, int(g.Class))
	if e == none {
		return Start{}, false, false
	}
	key, ok := p.pickKey(&p.entries[e], now, nil)
	if !ok {
		return Start{}, false, false // the simulation found a key: unreachable
	}
	kept = p.entries[e].confirmed
	p.start(e, key, now)
	return Start{ID: p.entries[e].id, Key: key}, kept, true
}

// Offer is the provider's snapshot for the dispatcher at now.
func (p *Provider) Offer(now time.Time) Offer {
	p.simulate(now, -1)
	p.offers++
	p.credit = 0 // an offer gives the credit back (see Credit)
	o := Offer{Epoch: p.epoch, Sync: p.sync, Seen: p.seen, Seq: p.offers, Running: p.running, Queued: p.queued,
		Kept: p.confirmed, QueueLength: p.queueLength, Avail: p.sim.avail, Room: p.room()}
	o.Fresh, o.Pending = p.unjudged()
	return o
}

// unjudged reports the queued requests without a verdict: how many are fresh (not yet
// acknowledged; those first reported now are stamped with this offer), and the acknowledged
// ones, in arrival order. Verdicts and acknowledgements both come in arrival order, so all
// these are the newest requests, the deadline list's tail, the fresh ones last (a request
// that came back confirmed, a capacity requeue or a fallback, may sit among them).
func (p *Provider) unjudged() (fresh int, pending []ID) {
	n := p.queued - p.confirmed
	if n == 0 {
		return 0, nil
	}
	var ids []ID
	for e := p.deadlines.tail; e != none && n > 0; e = p.entries[e].links[byDeadline].prev {
		en := &p.entries[e]
		if en.confirmed {
			continue
		}
		n--
		if !en.mature {
			if en.reported == 0 {
				en.reported = p.offers
			}
			fresh++
			continue
		}
		if ids == nil {
			ids = make([]ID, n+1)
		}
		ids[n] = en.id
	}
	if ids == nil {
		return fresh, nil
	}
	return fresh, ids[n:]
}

// Ack applies the dispatcher's acknowledgement of an offer, which comes after the grants that
// offer caused: the requests it first reported and that still wait now await a verdict. It
// returns how many do (the owner offers again to list them), 0 for an ack of another epoch.
func (p *Provider) Ack(a Ack) int {
	if a.Epoch != p.epoch {
		return 0
	}
	n, left := 0, p.queued-p.confirmed
	for e := p.deadlines.tail; e != none && left > 0; e = p.entries[e].links[byDeadline].prev {
		en := &p.entries[e]
		if en.confirmed {
			continue // came back admitted: it may sit among the fresh
		}
		left--
		if en.mature {
			break // the acknowledged are older: nothing fresh before them
		}
		if en.reported != 0 && en.reported <= a.Seq {
			en.mature = true
			n++
		}
	}
	return n
}

// Finish releases the lanes of a running request. It returns false, changing nothing, for
// an id that is unknown or still queued. Its freed lanes show in the next Offer.
func (p *Provider) Finish(id ID, now time.Time) bool {
	e, ok := p.stopRunning(id)
	if ok {
		p.release(e)
	}
	return ok
}

// stopRunning takes a running request off its lanes and returns its entry, still
// allocated; ok is false, changing nothing, for an id that is unknown or not running.
func (p *Provider) stopRunning(id ID) (int32, bool) {
	e, ok := p.index[id]
	if !ok || p.entries[e].state != running {
		return none, false
	}
	p.running--
	p.models[p.entries[e].m].running--
	return e, true
}

// Cancel removes a queued request, returning true; false for an unknown or running one.
func (p *Provider) Cancel(id ID) bool {
	e, ok := p.index[id]
	if !ok || p.entries[e].state != queued {
		return false
	}
	p.forget(e)
	return true
}

// SetEffectiveLanes sets how many of the provider's lanes may be used (SPEC §7
// effective_lanes), clamped to [0, Lanes]. Lowering it stops nothing already running; new
// requests wait until running drops below it.
func (p *Provider) SetEffectiveLanes(n int) { p.eff = min(max(n, 0), p.lanes) }

// SetModelLanes sets model m's effective model lanes, clamped to [0, model_lanes], as
// SetEffectiveLanes does for the provider (a model with keys of its own learns its own).
func (p *Provider) SetModelLanes(m, n int) {
	if m >= 0 && m < len(p.models) {
		p.models[m].eff = min(max(n, 0), p.models[m].lanes)
	}
}

// SetStartCap allows at most n more starts (each start takes one), or any number when n is
// negative. The circuit breaker uses it: 0 while open, 1 for the half-open probe.
func (p *Provider) SetStartCap(n int) { p.startCap = max(n, -1) }

// AddModel adds a model while the provider runs and returns its index. Nothing admitted is
// disturbed: existing models keep their indexes, and the new one starts with free lanes
// and empty queues.
func (p *Provider) AddModel(ms ModelSpec) int {
	p.models = append(p.models, p.newModel(ms))
	return len(p.models) - 1
}

// Resync answers a rebuilt dispatcher of generation sync (Dispatcher.Forget): the provider
// starts a new epoch, so that grants its predecessor sent and this provider has not handled
// yet are void, and its next Offer is one the new dispatcher accepts; every request it had
// reported now awaits a verdict.
func (p *Provider) Resync(sync uint64) {
	p.epoch++
	p.seen = 0
	p.sync = sync
	p.credit = 0
	// The old dispatcher's acknowledgements may be lost: everything reported awaits a verdict.
	for e := p.deadlines.head; e != none; e = p.entries[e].links[byDeadline].next {
		if en := &p.entries[e]; en.reported != 0 {
			en.mature = true
		}
	}
}

// Running is the number of requests running.
func (p *Provider) Running() int { return p.running }

// Queued is the number of requests waiting, those awaiting a verdict included.
func (p *Provider) Queued() int { return p.queued }

// EffectiveLanes is the lanes calls may use now.
func (p *Provider) EffectiveLanes() int { return p.eff }

// enqueue links a new queued entry into its queues and counts.
func (p *Provider) enqueue(id ID, a Arrival) int32 {
	e := p.alloc()
	p.seq++
	p.entries[e] = entry{
		id: id, m: int32(a.Model), class: uint8(a.Class), state: queued, confirmed: a.Confirmed, seq: p.seq,
		cost: max(a.Tokens, 0), arrived: a.Arrived, deadline: a.Deadline, mature: a.Reported && !a.Confirmed,
	}
	p.index[id] = e
	p.link(e)
	return e
}

// link puts queued entry e in its FIFO and in the deadline order, by its arrival and
// deadline, and counts it.
func (p *Provider) link(e int32) {
	en := &p.entries[e]
	md := &p.models[en.m]
	p.insert(&md.fifo[en.class], byModel, e)
	p.insert(&p.deadlines, byDeadline, e)
	p.queued++
	p.queuedByClass[en.class]++
	md.queued++
	if en.confirmed {
		p.confirmed++
	}
}

// dequeue unlinks a queued entry from its queues and counts; the entry stays allocated.
func (p *Provider) dequeue(e int32) {
	en := &p.entries[e]
	md := &p.models[en.m]
	p.unlink(&md.fifo[en.class], byModel, e)
	p.unlink(&p.deadlines, byDeadline, e)
	p.queued--
	p.queuedByClass[en.class]--
	md.queued--
	if en.confirmed {
		p.confirmed--
	}
}

// forget removes a queued entry altogether.
func (p *Provider) forget(e int32) {
	p.dequeue(e)
	p.release(e)
}

// start moves a queued entry to running on key, taking its lanes, a start of the cap, and
// its tokens from the provider's and the key's limiters.
func (p *Provider) start(e int32, key int, now time.Time) {
	p.dequeue(e)
	en := &p.entries[e]
	en.state = running
	en.confirmed = false
	en.started = now
	p.running++
	p.models[en.m].running++
	if p.startCap > 0 {
		p.startCap--
	}
	p.charge(en, key, now)
}

// Member is one request of a batch: its id, model and class, and its estimated tokens for
// the tpm buckets.
type Member struct {
	ID     ID
	Model  int
	Class  llm.Priority
	Tokens int
}

// Reservation is what Reserve started: the batch's members and the key each one's call uses
// (Keys[i] for Members[i]), and the limiters before and after they took the members' tokens,
// so that Release can give them back.
type Reservation struct {
	Members       []ID
	Keys          []int
	before, after limiterState
	released      bool
}

// limiterState is a copy of the provider's start cap and limiter, and of the per-key limiters and the key
// turn of the pools a batch used.
type limiterState struct {
	startCap int
	provider tokens.Limiter
	keys     map[int][]tokens.Limiter // by pool
	turns    map[int]int              // by pool
}

// Reserve starts every member of a batch at once, or none (SPEC §5): they start only if the
// start cap, the provider's free (effective) lanes, each model's free (effective) model lanes,
// the rate limiter and the keys cover them all, and no waiting request of the provider could
// start (a batch never passes a queue). When they started it returns their Reservation and
// ok true: they are then running, as Finish, Lookup and Snapshot see them. Otherwise it
// returns what held them back and ok false, changing nothing. A member id already known, or
// an unknown model or class, refuses the whole batch with BlockedElsewhere.
func (p *Provider) Reserve(members []Member, now time.Time) (Reservation, Blocker, bool) {
	need := make(map[int]int, len(members))
	for _, mb := range members {
		if !p.restorable(mb.ID, mb.Model, mb.Class) {
			return Reservation{}, BlockedElsewhere, false
		}
		need[mb.Model]++
	}
	// Lanes kept for another batch are not theirs; the batch they are kept for passes the
	// waiting requests of its class and below, which may take only the lanes beyond it.
	keptLanes, keptModels, mine := p.batchHold.keptFrom(members, len(p.models), now)
	switch {
	case p.startCap >= 0 && p.startCap < len(members):
		return Reservation{}, BlockedByStartCap, false
	case p.eff-p.running-keptLanes < len(members):
		return Reservation{}, BlockedByLanes, false
	}
	for m, n := range need {
		if md := &p.models[m]; md.eff-md.running-kept(keptModels, m) < n {
			return Reservation{}, BlockedByModelLanes, false
		}
	}
	lim := p.limiter
	for _, mb := range members {
		if !lim.Allow(mb.Tokens, now) {
			return Reservation{}, BlockedByRateLimit, false
		}
		lim.Take(mb.Tokens, now)
	}
	if !p.keysFor(members, now) {
		return Reservation{}, BlockedByKeys, false
	}
	if p.simulate(now, -1); p.sim.waitsAbove(p.batchHold.passes(mine)) {
		return Reservation{}, BlockedByQueue, false
	}
	if mine {
		p.batchHold = batchHold{} // it starts now: nothing is kept any more
	}
	r := Reservation{Members: make([]ID, len(members)), Keys: make([]int, len(members)), before: p.limiters(members)}
	for i, mb := range members {
		e := p.alloc()
		p.seq++
		p.entries[e] = entry{id: mb.ID, m: int32(mb.Model), class: uint8(mb.Class), state: running, seq: p.seq,
			arrived: now, started: now, deadline: now.Add(p.timeout), cost: max(mb.Tokens, 0)}
		p.index[mb.ID] = e
		p.running++
		p.models[mb.Model].running++
		if p.startCap > 0 {
			p.startCap--
		}
		key, _ := p.pickKey(&p.entries[e], now, nil) // keysFor found one for each, in this order
		p.charge(&p.entries[e], key, now)
		r.Members[i], r.Keys[i] = mb.ID, key
	}
	r.after = p.limiters(members)
	return r, BlockedElsewhere, true
}

// keysFor plays forward in thought the key picks members would make one after another (as
// pickKey, each charging its key's bucket), and reports whether every member finds a key.
func (p *Provider) keysFor(members []Member, now time.Time) bool {
	turns := map[int]int{}
	lims := map[int][]tokens.Limiter{}
	for _, mb := range members {
		pi := p.models[mb.Model].pool
		pl := &p.pools[pi]
		if _, seen := turns[pi]; !seen {
			turns[pi] = pl.ring.Turn()
			if pl.lims != nil {
				lims[pi] = append([]tokens.Limiter(nil), pl.lims...)
			}
		}
		n, found := pl.ring.Len(), false
		for k := range n {
			j := (turns[pi] + k) % n
			if pl.ring.State(j, mb.Model, now) != keys.Ready {
				continue
			}
			if l := lims[pi]; l != nil {
				if !l[j].Allow(mb.Tokens, now) {
					continue
				}
				l[j].Take(mb.Tokens, now)
			}
			turns[pi], found = (j+1)%n, true
			break
		}
		if !found {
			return false
		}
	}
	return true
}

// limiters copies the provider's limiter and the per-key limiters of members' pools.
func (p *Provider) limiters(members []Member) limiterState {
	st := limiterState{startCap: p.startCap, provider: p.limiter, keys: map[int][]tokens.Limiter{}, turns: map[int]int{}}
	for _, mb := range members {
		pi := p.models[mb.Model].pool
		if _, seen := st.turns[pi]; seen {
			continue
		}
		st.turns[pi] = p.pools[pi].ring.Turn()
		if p.pools[pi].lims != nil {
			st.keys[pi] = append([]tokens.Limiter(nil), p.pools[pi].lims...)
		}
	}
	return st
}

// Release frees the members of an aborted batch that still run, and gives their tokens
// back to each limiter that took none since, their keys' turn back to each ring that picked
// none since, and their starts back to the start cap if it is where they left it: then the batch leaves no trace there. If one did (the provider started
// other requests meanwhile, or was rebuilt), its tokens stay spent: the limiter cannot tell
// which of its takes to undo, and spending them errs on the side of the backend's limit.
// Releasing r again does nothing.
func (p *Provider) Release(r *Reservation, now time.Time) {
	if r.released {
		return
	}
	r.released = true
	for _, id := range r.Members {
		p.Finish(id, now)
	}
	if p.limiter == r.after.provider {
		p.limiter = r.before.provider
	}
	if p.startCap == r.after.startCap {
		p.startCap = r.before.startCap
	}
	for pi, after := range r.after.keys {
		lims := p.pools[pi].lims
		for k := range lims {
			if k < len(after) && lims[k] == after[k] {
				lims[k] = r.before.keys[pi][k]
			}
		}
	}
	for pi, after := range r.after.turns {
		if ring := p.pools[pi].ring; ring.Turn() == after {
			ring.SetTurn(r.before.turns[pi])
		}
	}
}
