package actors

import (
	"errors"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// outOfService is the provider actor taken out of service for good: no admission, and no
// recovery of its own (a crash here loses the message as anywhere, and the provider stays
// out of service); it answers, accounts and reports, so that its calls' lanes and the global
// cap stay right while the rest of the gateway keeps serving.
type outOfService struct{ a *providerActor }

// errProviderFailed is the cause of every call a provider taken out of service stops.
var errProviderFailed = errors.New("provider taken out of service")

// fail takes the provider out of service for good: its actors failed past their restart
// budget, so a fault repeats. Every waiting call is answered provider_unavailable, every
// running one is stopped; from then on the provider only keeps its lanes' accounting
// (outOfService) and offers nothing.
func (a *providerActor) fail(ctx actor.Context) {
	if a.failed {
		return
	}
	a.failed = true
	a.mode.Become(outOfService{a}.receive)
	a.slot.down.Store(true)
	a.carry(ctx, a.pacer.Reset())
	a.g.log.Error().Str("provider", a.name).Msg("provider taken out of service: its actors failed past their restart budget")
	now := a.g.now()
	if a.rebuilding {
		// The lanes' reports still on their way are applied as they come (laneReport).
		// Until all are in, the policy does not know every running call: it offers
		// nothing, so the supervisor keeps counting the calls of the last offer and never
		// grants past max_running while they still run.
		a.rebuilding, a.reportsDue = false, true
		a.epoch++
		a.pol.Rebuilt(now, a.epoch, a.sync)
	}
	for id, w := range a.waiting {
		a.pol.Cancel(id)
		delete(a.waiting, id)
		w.c.answer(admitResult{err: providerDown(a.name), queueWait: w.queueWait(now)})
	}
	a.pol.Lanes().SetEffective(0)
	for _, l := range a.lanes {
		if l != nil {
			send(ctx, l, &cancelAll{cause: errProviderFailed})
		}
	}
	outOfService{a}.offer(ctx, now)
}

// receive handles a message of the provider out of service.
func (d outOfService) receive(ctx actor.Context) {
	a := d.a
	a.g.faults.hit(faultOutOfService, a.name, "", ctx.Message())
	now := a.g.now()
	switch m := ctx.Message().(type) {
	case *arrive:
		if old := m.c.requeueOf; old != nil {
			a.pol.Finish(old.c.id, now)
			delete(a.runs, old.c.id)
		}
		m.c.answer(admitResult{err: providerDown(a.name)})
	case *retryAsk:
		m.answer(retryAnswer{})
	case *grants:
		d.grants(ctx, m, now)
	case *freed:
		d.finish(ctx, m.c, now)
	case *unleased: // the replicas had no room for it; it will not wait now
		m.c.answer(admitResult{err: providerDown(a.name)})
		d.finish(ctx, m.c, now)
	case *resync:
		a.pol.Resync(m.sync)
		a.epoch, a.sync = a.pol.Epoch(), m.sync
		d.offer(ctx, now)
	case offerDue: // queued before the provider failed; offer offers at once now
		a.pacer.Due()
	case *recall:
		if a.pol.Recall(m.r) {
			d.offer(ctx, now)
		}
	case *addModel:
		m.reply <- errors.New("provider " + a.name + " is out of service")
	case *reserve:
		send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, why: providerDown(a.name), o: a.pol.Offer(now)})
	case *settle:
		d.settle(ctx, m, now)
	case *reconfigureProvider:
		m.ack(a.p, nil) // not sent: a reload rebuilds a provider out of service in a new slot
	case *retire:
		a.retiring = true
		m.ack(a.p, nil)
		a.reloads.retireDown(ctx)
	case *drainAll:
		a.draining = true
		if a.pol.Lanes().Running() == 0 {
			send(ctx, a.g.supervisor, &providerIdle{p: a.p})
		}
	case *laneReport:
		d.laneReport(ctx, m, now)
	case *stateQuery, *revokeClient, *retireCheck:
		a.receiveAlways(ctx, m, false)
	}
}

// grants counts the supervisor's grants as seen; the offer gives the starts back.
func (d outOfService) grants(ctx actor.Context, m *grants, now time.Time) {
	for _, gr := range m.g {
		d.a.pol.Grant(gr, now)
	}
	if m.ack != nil {
		d.a.pol.Ack(*m.ack)
	}
	d.offer(ctx, now)
}

// settle ends a batch's reservation: its members are answered provider_unavailable.
func (d outOfService) settle(ctx actor.Context, m *settle, now time.Time) {
	a := d.a
	if r := a.reserved[m.b]; r != nil {
		a.batches.release(r, now)
		for _, c := range r.calls {
			c.answer(admitResult{err: providerDown(a.name)})
		}
	}
	delete(a.reserved, m.b)
	d.offer(ctx, now)
}

// laneReport applies a report of a rebuild the failure cut short; the last one lets the
// provider offer again.
func (d outOfService) laneReport(ctx actor.Context, m *laneReport, now time.Time) {
	a := d.a
	rebuildMode{a}.resumeReported(m)
	if m.m < len(a.reported) {
		a.reported[m.m] = true
	}
	if a.reportsDue && !slices.Contains(a.reported, false) {
		a.reportsDue = false
		rebuildMode{a}.forgetUnreported()
		d.offer(ctx, now)
	}
}

// offer sends the out-of-service provider's offer, once every lane's report of a rebuild
// cut short is in (see fail).
func (d outOfService) offer(ctx actor.Context, now time.Time) {
	if !d.a.reportsDue {
		send(ctx, d.a.g.supervisor, &offer{p: d.a.p, o: d.a.pol.Offer(now)})
	}
}

// finish frees call c's lanes in a provider out of service.
func (d outOfService) finish(ctx actor.Context, c *call, now time.Time) {
	a := d.a
	if !a.pol.Finish(c.id, now) && a.reportsDue {
		rebuildMode{a}.endedUnreported(c.id)
	}
	delete(a.runs, c.id)
	d.offer(ctx, now)
	if a.draining && a.pol.Lanes().Running() == 0 {
		send(ctx, a.g.supervisor, &providerIdle{p: a.p})
	}
	a.reloads.retireDown(ctx)
}
