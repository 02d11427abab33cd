package actors

import (
	"cmp"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// rebuildMode is the provider actor between a crash and the last of its lanes' reports: its
// policy is new and does not yet know what runs, so it keeps the facts (arrivals,
// withdrawals, freed lanes, health) and admits nothing until finish.
type rebuildMode struct{ a *providerActor }

// rebuild replaces the derived state after a crash: a new policy.Provider, to be filled
// from the facts once every lane has reported what runs on it (rebuildMode.finish).
func (a *providerActor) rebuild(ctx actor.Context) {
	a.carry(ctx, a.pacer.Reset()) // the timer stops, and an offerDue lost in the crash must not hold every later offer back
	a.pol = policy.NewProvider(a.spec())
	clear(a.blocks)
	a.unreported = make(map[policy.ID]bool, len(a.runs))
	for id := range a.runs {
		a.unreported[id] = true
	}
	for _, res := range a.reserved { // batch members: running in the policy, on no lane yet
		for _, c := range res.calls {
			r := a.runs[c.id]
			a.pol.Resume(c.member(c.route.m), r.started, r.key)
			delete(a.unreported, c.id)
		}
	}
	a.rebuilding = true
	a.mode.Become(rebuildMode{a}.receive)
	a.reported = make([]bool, len(a.lanes))
	for m, l := range a.lanes {
		if l == nil { // a removed model's lane, stopped once idle
			a.reported[m] = true
			continue
		}
		send(ctx, l, &reportRunning{})
	}
	if !slices.Contains(a.reported, false) {
		rebuildMode{a}.finish(ctx)
	}
}

// receive handles messages while the lanes' reports are awaited. Arrivals and withdrawals
// change the facts; freed lanes are applied as they come (a lane reports before or after it
// frees a call, in its own order, so the two never disagree); grants and verdicts are for
// the old epoch and void. A crash here rebuilds again.
func (r rebuildMode) receive(ctx actor.Context) {
	a := r.a
	defer a.recoverRebuild(ctx)
	msg := ctx.Message()
	a.g.faults.hit(faultProvider, a.name, "", msg)
	a.g.faults.hit(faultRebuilding, a.name, "", msg)
	now := a.g.now()
	switch m := msg.(type) {
	case *laneReport:
		r.laneReport(ctx, m)
	case *arrive:
		r.arrive(m.c, now)
	case *retryAsk:
		m.answer(retryAnswer{}) // the rebuild does not know the call's state: no retry; its ending records it
	case *withdraw:
		if w, ok := a.waiting[m.c.id]; ok {
			delete(a.waiting, m.c.id)
			w.c.answer(admitResult{err: w.c.ctx.Err(), queueWait: w.queueWait(now)})
		}
	case *freed:
		if !a.finish(m.c, m.end, now) {
			r.endedUnreported(m.c.id)
		}
	case *unleased:
		r.unleased(m, now)
	case *resync:
		a.sync = m.sync // answered when the rebuild ends
	case *recall:
		// The rebuilt policy holds no credit; the rebuild's end offers.
	case offerDue:
		a.pacer.Due() // the rebuild's end offers
	case *drainAll:
		a.draining = true
	case *reserve:
		why := &llm.Error{Kind: llm.KindBatchCapacity, Provider: a.name, RetryAfter: time.Second,
			Message: "provider " + a.name + " is rebuilding its state after a fault; try again shortly"}
		send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, why: why, o: a.pol.Offer(now)})
	case *retire:
		a.retiring = true
		m.ack(a.p, nil) // the rebuild's offer looks whether it is idle already
	default:
		// What other replicas decided of the health is applied (the health is kept across
		// the rebuild; its end tells the new policy); so are questions, reloads, settled
		// batches and a retireCheck (sent only once the retired provider was idle, which
		// nothing rebuilt changes: dropped here, nothing would stop the provider). Grants,
		// wakes and lease notices are for the old epoch and policy: dropped.
		a.receiveAlways(ctx, msg, false)
	}
}

// laneReport applies one lane's report of what runs on it; the last one ends the rebuild.
func (r rebuildMode) laneReport(ctx actor.Context, m *laneReport) {
	a := r.a
	if m.m < len(a.reported) && !a.reported[m.m] {
		a.reported[m.m] = true
		r.resumeReported(m)
	}
	if !slices.Contains(a.reported, false) {
		r.finish(ctx)
	}
}

// resumeReported puts the calls a lane reports running back into the rebuilt policy, but
// for those whose stream's freed came first (endedUnreported): the report is older than
// their end.
func (r rebuildMode) resumeReported(m *laneReport) {
	a := r.a
	for _, rc := range m.calls {
		if awaiting, ok := a.unreported[rc.member.ID]; !ok || awaiting {
			a.pol.Resume(rc.member, rc.started, rc.key)
		}
		delete(a.unreported, rc.member.ID)
	}
}

// endedUnreported marks a call whose freed came while the rebuilt policy did not hold it:
// if no lane has reported it yet, a report that still lists it does not resume it.
func (r rebuildMode) endedUnreported(id policy.ID) {
	if r.a.unreported[id] {
		r.a.unreported[id] = false
	}
}

// forgetUnreported drops the records of started calls no lane reported, once all have.
func (r rebuildMode) forgetUnreported() {
	for id := range r.a.unreported {
		delete(r.a.runs, id)
	}
	r.a.unreported = nil
}

// arrive keeps a call to be queued when the rebuild ends; a capacity requeue gives the
// refused call's lanes back at once.
func (r rebuildMode) arrive(c *call, now time.Time) {
	a := r.a
	if old := c.requeueOf; old != nil {
		a.pol.Finish(old.c.id, now) // its freed, still to come, forgets its record
	}
	w := wait{c: c, entered: now, deadline: c.deadline}
	if w.deadline.IsZero() {
		w.deadline = now.Add(a.pv.QueueTimeout)
	}
	a.waiting[c.id] = w
}

// unleased puts a call the replicas had no room for back to waiting: the rebuild requeues
// it in arrival order (if a lane reported it running before it was handed back, that is
// undone first).
func (r rebuildMode) unleased(m *unleased, now time.Time) {
	a := r.a
	c := m.c
	a.pol.Finish(c.id, now)
	probe := a.runs[c.id].probe
	delete(a.runs, c.id)
	a.waiting[c.id] = wait{c: c, entered: m.run.entered(), deadline: m.run.deadline, confirmed: true, probe: probe}
}

// finish requeues the waiting calls in arrival order, starts a new epoch, and offers.
func (r rebuildMode) finish(ctx actor.Context) {
	a := r.a
	now := a.g.now()
	r.forgetUnreported()
	calls := make([]wait, 0, len(a.waiting))
	for _, w := range a.waiting {
		calls = append(calls, w)
	}
	slices.SortFunc(calls, func(x, y wait) int {
		return cmp.Or(x.entered.Compare(y.entered), cmp.Compare(x.c.id, y.c.id))
	})
	for _, w := range calls {
		c := w.c
		if c.answered.Load() {
			delete(a.waiting, c.id)
			continue
		}
		ar := a.arrival(&w)
		ar.Reported = true // offered before the crash: it awaits only its verdict
		if o, _ := a.pol.Enter(c.id, ar, now); o == policy.Rejected {
			delete(a.waiting, c.id)
		}
	}
	a.epoch++
	a.pol.Rebuilt(now, a.epoch, a.sync)
	a.vitals.applyHealth(now)
	a.rebuilding = false
	a.mode.Become(a.receiveNormal)
	a.g.log.Warn().Str("provider", a.name).Int("running", a.pol.Lanes().Running()).Int("queued", a.pol.Queued()).
		Msg("provider actor rebuilt its state after a crash")
	if a.draining {
		a.drain(ctx)
		return
	}
	a.offer(ctx, now)
}
