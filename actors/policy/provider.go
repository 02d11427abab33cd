package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Provider is one provider's side of admission: its bounded queue with deadlines, its lanes
// and model lanes (Lanes), its limiters (the rate limit and the keys, Limiters), and the
// choice of which of its requests starts next (least-busy model, then first come first
// served). Starts themselves are the dispatcher's to grant: Provider tells it what it could
// start (Offer) and starts what it is granted (Grant). See doc.go for the rules and the
// protocol.
type Provider struct {
	name        string
	queueLength int
	timeout     time.Duration
	models      []string // the models' names, by index (Lanes and Limiters index them alike)
	q           queue    // the admitted requests and the order they wait in
	lanes       Lanes
	limits      Limiters
	slots       *Slots

	epoch, seen uint64 // the protocol: grants of this epoch handled so far
	sync        uint64 // the dispatcher generation last answered
	offers      uint64 // offers made; each entry knows the one that first reported it
	credit      int    // the ceiling of the credit held (credit.go); 0: none

	sim       simulation // Offer's and Grant's scratch space
	lastHeads []Head     // the last offer's Heads, which never change once sent
	batchHold batchHold  // the batch lanes are kept for (batchhold.go)
}

// NewProvider builds a provider with every lane free, an empty queue and full buckets, at
// epoch 0.
func NewProvider(ps ProviderSpec) *Provider {
	p := &Provider{
		name: ps.Name, queueLength: max(ps.QueueLength, 0), timeout: ps.QueueTimeout, slots: ps.Clients,
		lanes: newLanes(ps.Lanes), limits: newLimiters(ps),
	}
	// Size for the usual worst case so steady state never grows: a full queue and every lane.
	p.q = newQueue(p.queueLength+p.lanes.lanes+1, 0)
	p.q.shares = ps.Shares
	for _, ms := range ps.Models {
		p.AddModel(ms)
	}
	return p
}

// Lanes are the provider's lanes and model lanes, for the owner to set what it learned and
// to read what runs.
func (p *Provider) Lanes() *Lanes { return &p.lanes }

// Limiters are the provider's rate limiter and keys, for the owner to record what the
// backend said of a key and to ask what holds a request back.
func (p *Provider) Limiters() *Limiters { return &p.limits }

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
	if _, dup := p.q.index[id]; dup {
		return Rejected, llm.KindInvalidRequest
	}
	if a.Arrived.IsZero() {
		a.Arrived = now
	}
	if a.Deadline.IsZero() {
		a.Deadline = now.Add(p.timeout)
	}
	p.q.link(p.q.add(entry{
		id: id, m: int32(a.Model), client: p.q.clientFor(a.Client), class: uint8(a.Class), state: queued,
		confirmed: a.Confirmed, cost: max(a.Tokens, 0), arrived: a.Arrived, deadline: a.Deadline,
		mature: a.Reported && !a.Confirmed, bound: int32(max(a.Bound, 0)),
	}))
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
	e, ok := p.q.index[v.ID]
	if !ok || v.Epoch != p.epoch || p.q.entries[e].state != queued || p.q.entries[e].confirmed {
		return 0, false
	}
	switch {
	case v.Overloaded:
		p.q.forget(e)
		return llm.KindOverloaded, true
	case v.QueueFull || p.q.confirmed >= p.queueLength:
		p.q.forget(e)
		return llm.KindQueueFull, true
	}
	p.q.entries[e].confirmed = true
	p.q.confirmed++
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
// as seen either way: the next Offer tells the dispatcher, which takes the start back. again
// says the owner must offer again although the grant was used: the request had been kept by
// a verdict (the dispatcher counted it as kept, not as running); it is another client's
// than the grant's (the provider's order changed since its offer, which the dispatcher's
// view of whom its next starts serve must learn); or its client has a max_running of its
// own (the dispatcher counts the grant against the client's room until an offer says it
// was handled, when the slots count it instead).
func (p *Provider) Grant(g Grant, now time.Time) (st Start, again, ok bool) {
	if g.Epoch != p.epoch {
		return Start{}, false, false
	}
	p.seen++
	if g.Class < 0 || g.Class >= llm.NumPriorities {
		return Start{}, false, false
	}
	e := p.sim.play(p, now, int(g.Class))
	// A client's last slot may have gone to another provider since the simulation looked:
	// play again, which now skips that client, a bounded number of times.
	for tries := len(p.q.clients); e != none && !p.q.claim(e, p.slots, false); tries-- {
		if e = none; tries > 0 {
			e = p.sim.play(p, now, int(g.Class))
		}
	}
	if e == none {
		return Start{}, false, false
	}
	key, ok := p.limits.pick(&p.q.entries[e], now, nil)
	if !ok {
		p.q.unclaim(e, p.slots)
		return Start{}, false, false // the simulation found a key: unreachable
	}
	cl := &p.q.clients[p.q.entries[e].client]
	again = p.q.entries[e].confirmed || cl.name != g.Client || p.slots != nil && cl.maxRun > 0
	p.start(e, key, now)
	return Start{ID: p.q.entries[e].id, Key: key}, again, true
}

// Offer is the provider's snapshot for the dispatcher at now.
func (p *Provider) Offer(now time.Time) Offer {
	p.sim.play(p, now, -1)
	p.offers++
	p.credit = 0 // an offer gives the credit back (see Credit)
	o := Offer{Epoch: p.epoch, Sync: p.sync, Seen: p.seen, Seq: p.offers, Running: p.lanes.running, Queued: p.q.n,
		Kept: p.q.confirmed, QueueLength: p.queueLength, Avail: p.sim.avail, Room: p.sim.room(&p.lanes)}
	o.Heads = offerHeads(p.sim.served, &p.lastHeads)
	o.Fresh, o.Pending = p.q.unjudged(p.offers)
	return o
}

// Ack applies the dispatcher's acknowledgement of an offer, which comes after the grants that
// offer caused: the requests it first reported and that still wait now await a verdict. It
// returns how many do (the owner offers again to list them), 0 for an ack of another epoch.
func (p *Provider) Ack(a Ack) int {
	if a.Epoch != p.epoch {
		return 0
	}
	n, left := 0, p.q.n-p.q.confirmed
	for e := p.q.deadlines.tail; e != none && left > 0; e = p.q.entries[e].links[byDeadline].prev {
		en := &p.q.entries[e]
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
		p.q.release(e)
	}
	return ok
}

// stopRunning takes a running request off its lanes and returns its entry, still
// allocated; ok is false, changing nothing, for an id that is unknown or not running.
func (p *Provider) stopRunning(id ID) (int32, bool) {
	e, ok := p.q.index[id]
	if !ok || p.q.entries[e].state != running {
		return none, false
	}
	p.lanes.stop(int(p.q.entries[e].m))
	p.q.stopped(e, p.slots)
	return e, true
}

// Cancel removes a queued request, returning true; false for an unknown or running one.
func (p *Provider) Cancel(id ID) bool {
	e, ok := p.q.index[id]
	if !ok || p.q.entries[e].state != queued {
		return false
	}
	p.q.forget(e)
	return true
}

// AddModel adds a model while the provider runs and returns its index. Nothing admitted is
// disturbed: existing models keep their indexes, and the new one starts with free lanes
// and empty queues.
func (p *Provider) AddModel(ms ModelSpec) int {
	p.models = append(p.models, ms.Name)
	p.lanes.addModel(ms)
	p.limits.addModel(ms)
	p.q.addModel()
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
	for e := p.q.deadlines.head; e != none; e = p.q.entries[e].links[byDeadline].next {
		if en := &p.q.entries[e]; en.reported != 0 {
			en.mature = true
		}
	}
}

// Queued is the number of requests waiting, those awaiting a verdict included.
func (p *Provider) Queued() int { return p.q.n }

// start moves a queued entry to running on key, taking its lanes, a start of the cap, and
// its tokens from the provider's and the key's limiters.
func (p *Provider) start(e int32, key int, now time.Time) {
	p.q.dequeue(e)
	en := &p.q.entries[e]
	en.state = running
	en.confirmed = false
	en.started = now
	p.lanes.take(int(en.m))
	p.q.started(e)
	en.key = int32(key)
	p.limits.charge(int(en.m), key, en.cost, now)
}
