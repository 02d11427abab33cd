package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Provider is one provider's side of admission: its bounded queue with deadlines, its lanes
// and model lanes, its rate limiter, and the choice of which of its requests starts next
// (least-busy model, then first come first served). Starts themselves are the dispatcher's
// to grant: Provider tells it what it could start (Offer) and starts what it is granted
// (Grant). See doc.go for the rules and the protocol.
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
	arrivals      list // queued entries in arrival (= deadline) order
	bucket        bucket

	entries []entry
	free    int32
	index   map[ID]int32
	seq     uint64

	epoch, seen uint64 // the protocol: grants of this epoch handled so far
	sync        uint64 // the dispatcher generation last answered
	offers      uint64 // offers made; each entry knows the one that first reported it

	sim simulation // Offer's and Grant's scratch space
}

type model struct {
	name    string
	lanes   int
	running int
	queued  int
	fifo    [llm.NumPriorities]list
}

// NewProvider builds a provider with every lane free and an empty queue, at epoch 0.
func NewProvider(ps ProviderSpec) *Provider {
	p := &Provider{
		name: ps.Name, lanes: max(ps.Lanes, 0), eff: max(ps.Lanes, 0),
		queueLength: max(ps.QueueLength, 0), timeout: ps.QueueTimeout,
		arrivals: newList(), bucket: newBucket(ps.RPM, ps.Burst), free: none,
	}
	for _, ms := range ps.Models {
		p.models = append(p.models, newModel(ms))
	}
	// Size for the usual worst case so steady state never grows: a full queue and every lane.
	size := p.queueLength + p.lanes + 1
	p.entries = make([]entry, 0, size)
	p.index = make(map[ID]int32, size)
	return p
}

func newModel(ms ModelSpec) model {
	md := model{name: ms.Name, lanes: max(ms.Lanes, 0)}
	for c := range md.fifo {
		md.fifo[c] = newList()
	}
	return md
}

// Arrive enqueues request id for model m with class prio at now, at the tail of its FIFO:
// it waits for a grant (no barging: a grant starts the request the SPEC order picks, which
// is an older one when one is eligible) and for the dispatcher's verdict on whether it may
// wait at all (Verdict). It returns Queued, or Rejected for a caller's mistake:
// llm.KindModelNotFound for an unknown model, llm.KindInvalidRequest for an unknown class or
// an id already admitted. A rejected request changes nothing.
func (p *Provider) Arrive(id ID, m int, prio llm.Priority, now time.Time) (Outcome, llm.Kind) {
	if m < 0 || m >= len(p.models) {
		return Rejected, llm.KindModelNotFound
	}
	if prio < 0 || prio >= llm.NumPriorities {
		return Rejected, llm.KindInvalidRequest
	}
	if _, dup := p.index[id]; dup {
		return Rejected, llm.KindInvalidRequest
	}
	p.enqueue(id, m, uint8(prio), now, now.Add(p.timeout), false)
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

// Grant handles one grant from the dispatcher: it starts the request of class g.Class that
// the SPEC order picks now and returns its id, or returns ok false and starts nothing when
// the grant is void (an older epoch's) or can no longer be used (the request it was meant for
// was cancelled or expired in between, or a request of a higher class arrived for the same
// lanes). A grant of the current epoch counts as seen either way: the next Offer tells the
// dispatcher, which takes the start back. kept says the request had been kept by a verdict:
// the dispatcher counted it as kept, so the owner must offer again for it to count it as
// running instead.
func (p *Provider) Grant(g Grant, now time.Time) (id ID, kept, ok bool) {
	if g.Epoch != p.epoch {
		return 0, false, false
	}
	p.seen++
	if g.Class < 0 || g.Class >= llm.NumPriorities {
		return 0, false, false
	}
	e := p.simulate(now, int(g.Class))
	if e == none {
		return 0, false, false
	}
	kept = p.entries[e].confirmed
	p.start(e, now)
	return p.entries[e].id, kept, true
}

// Offer is the provider's snapshot for the dispatcher at now.
func (p *Provider) Offer(now time.Time) Offer {
	p.simulate(now, -1)
	p.offers++
	o := Offer{Epoch: p.epoch, Sync: p.sync, Seen: p.seen, Seq: p.offers, Running: p.running, Queued: p.queued,
		Kept: p.confirmed, QueueLength: p.queueLength, Avail: p.sim.avail}
	o.Fresh, o.Pending = p.unjudged()
	return o
}

// unjudged reports the queued requests without a verdict: how many are fresh (not yet
// acknowledged; those first reported now are stamped with this offer), and the acknowledged
// ones, in arrival order. Verdicts and acknowledgements both come in arrival order, so all
// these are the newest requests, a suffix of the arrival list, the fresh ones last.
func (p *Provider) unjudged() (fresh int, pending []ID) {
	n := p.queued - p.confirmed
	if n == 0 {
		return 0, nil
	}
	var ids []ID
	for e := p.arrivals.tail; e != none && n > 0; e = p.entries[e].links[byArrival].prev {
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
	n := 0
	for e := p.arrivals.tail; e != none; e = p.entries[e].links[byArrival].prev {
		en := &p.entries[e]
		if en.confirmed || en.mature {
			break // the acknowledged and the judged are older: nothing fresh before them
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
	e, ok := p.index[id]
	if !ok || p.entries[e].state != running {
		return false
	}
	en := &p.entries[e]
	p.running--
	p.models[en.m].running--
	p.release(e)
	return true
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

// AddModel adds a model while the provider runs and returns its index. Nothing admitted is
// disturbed: existing models keep their indexes, and the new one starts with free lanes
// and empty queues.
func (p *Provider) AddModel(ms ModelSpec) int {
	p.models = append(p.models, newModel(ms))
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
	// The old dispatcher's acknowledgements may be lost: everything reported awaits a verdict.
	for e := p.arrivals.head; e != none; e = p.entries[e].links[byArrival].next {
		if en := &p.entries[e]; en.reported != 0 {
			en.mature = true
		}
	}
}

// Running is the number of requests running.
func (p *Provider) Running() int { return p.running }

// Queued is the number of requests waiting, those awaiting a verdict included.
func (p *Provider) Queued() int { return p.queued }

// enqueue links a new queued entry into its queues and counts.
func (p *Provider) enqueue(id ID, m int, class uint8, arrived, deadline time.Time, confirmed bool) int32 {
	e := p.alloc()
	p.seq++
	p.entries[e] = entry{
		id: id, m: int32(m), class: class, state: queued, confirmed: confirmed, seq: p.seq,
		arrived: arrived, deadline: deadline,
	}
	p.index[id] = e
	p.push(&p.models[m].fifo[class], byModel, e)
	p.push(&p.arrivals, byArrival, e)
	p.queued++
	p.queuedByClass[class]++
	p.models[m].queued++
	if confirmed {
		p.confirmed++
	}
	return e
}

// dequeue unlinks a queued entry from its queues and counts; the entry stays allocated.
func (p *Provider) dequeue(e int32) {
	en := &p.entries[e]
	md := &p.models[en.m]
	p.unlink(&md.fifo[en.class], byModel, e)
	p.unlink(&p.arrivals, byArrival, e)
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

// start moves a queued entry to running, taking its lanes and a rate-limit token.
func (p *Provider) start(e int32, now time.Time) {
	p.dequeue(e)
	en := &p.entries[e]
	en.state = running
	en.confirmed = false
	en.started = now
	p.running++
	p.models[en.m].running++
	p.bucket.take(now)
}

// Member is one request of a batch: its id, model and class.
type Member struct {
	ID    ID
	Model int
	Class llm.Priority
}

// Reservation is what Reserve started: the batch's members, and the rate limiter before and
// after it took their tokens, so that Release can give them back.
type Reservation struct {
	Members             []ID
	tatBefore, tatAfter time.Time
	released            bool
}

// Reserve starts every member of a batch at once, or none (SPEC §5): they start only if the
// provider's free lanes, each model's free model lanes and the rate limiter's tokens cover
// them all, and no waiting request of the provider could start (a batch never passes a
// queue). When they started it returns their Reservation and ok true: they are then running,
// as Finish, Lookup and Snapshot see them. Otherwise it returns what held them back and ok
// false, changing nothing. A member id already known, or an unknown model or class, refuses
// the whole batch with BlockedElsewhere.
func (p *Provider) Reserve(members []Member, now time.Time) (Reservation, Blocker, bool) {
	need := make(map[int]int, len(members))
	for _, mb := range members {
		if !p.restorable(mb.ID, mb.Model, mb.Class) {
			return Reservation{}, BlockedElsewhere, false
		}
		need[mb.Model]++
	}
	switch {
	case p.eff-p.running < len(members):
		return Reservation{}, BlockedByLanes, false
	case p.bucket.tokens(now, len(members)) < len(members):
		return Reservation{}, BlockedByRateLimit, false
	}
	for m, n := range need {
		if md := &p.models[m]; md.lanes-md.running < n {
			return Reservation{}, BlockedByModelLanes, false
		}
	}
	if p.simulate(now, -1); p.sim.avail != [llm.NumPriorities]int{} {
		return Reservation{}, BlockedByQueue, false
	}
	r := Reservation{Members: make([]ID, len(members)), tatBefore: p.bucket.tat}
	for i, mb := range members {
		e := p.alloc()
		p.seq++
		p.entries[e] = entry{id: mb.ID, m: int32(mb.Model), class: uint8(mb.Class), state: running, seq: p.seq,
			arrived: now, started: now}
		p.index[mb.ID] = e
		p.running++
		p.models[mb.Model].running++
		p.bucket.take(now)
		r.Members[i] = mb.ID
	}
	r.tatAfter = p.bucket.tat
	return r, BlockedElsewhere, true
}

// Release frees the members of an aborted batch that still run, and gives their tokens
// back to the rate limiter if it took none since: then the batch leaves no trace. If it did
// (the provider started other requests meanwhile, or was rebuilt), the tokens stay spent: the
// limiter cannot tell which of its takes to undo, and spending them errs on the side of the
// backend's limit. Releasing r again does nothing.
func (p *Provider) Release(r *Reservation, now time.Time) {
	if r.released {
		return
	}
	r.released = true
	for _, id := range r.Members {
		p.Finish(id, now)
	}
	if p.bucket.tat.Equal(r.tatAfter) {
		p.bucket.tat = r.tatBefore
	}
}
