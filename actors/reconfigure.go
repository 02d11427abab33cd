package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
)

// A reload (Gateway.Reconfigure, reload.go) reaches the actors as these messages. Each
// carries the whole target state of what it changes, so that handling one twice is
// harmless: a supervision strategy sends again one whose handler crashed, and the rebuild
// after the crash keeps what was applied (the settings and models are facts).

// reconfigure, from Gateway.Reconfigure to the supervisor: the caps in force, the providers
// to start in new slots, those whose settings change and those to retire. The supervisor
// applies the caps and starts the new ones itself and hands the rest to the providers;
// each answers on acks.
type reconfigure struct {
	limits policy.Limits
	add    []providerSetup // slots never used before, in slot order
	change []providerSetup
	remove []int
	acks   chan reconfigured // buffered for every answer, repeats included
}

// providerSetup is one provider's settings and models in force after a reload. models lists
// every model the provider ever had, by index (an index is never reused); gone marks those
// the reload removed.
type providerSetup struct {
	slot   *slot
	pv     Provider
	models []Model
	gone   []bool
	keys   bool // the keys changed: calls that run now have keys of before
	// revive: a reload added back the provider an earlier one removed, while its actor
	// still finished its calls (slot.revive): it serves again in its slot, its running
	// and queued calls counted against its lanes as before.
	revive bool
}

// reconfigured answers one part of a reload: p is the provider's slot, -1 the supervisor's.
type reconfigured struct {
	p   int
	err error
}

// ack answers without ever blocking an actor: the channel is sized for every answer, and a
// repeat past it (a handler that crashed more than once) is not needed.
func (m *reconfigure) ack(p int, err error) {
	select {
	case m.acks <- reconfigured{p: p, err: err}:
	default:
	}
}

// reconfigureProvider, from the supervisor to a provider actor: take these settings.
type reconfigureProvider struct {
	setup providerSetup
	r     *reconfigure
}

func (m *reconfigureProvider) ack(p int, err error) { m.r.ack(p, err) }

// retire, from the supervisor to a provider actor a reload removed: admit nothing new,
// finish what runs and what is queued, then stop.
type retire struct{ r *reconfigure }

func (m *retire) ack(p int, err error) { m.r.ack(p, err) }

// retireCheck, from a retired provider actor to itself: stop once no call is on its way.
type retireCheck struct{ final bool }

// providerRetired, from a retired provider actor to the supervisor: it is idle, and no call
// can reach it any more; stop it.
type providerRetired struct{ p int }

// reconfigure applies a reload's gateway-wide part: it starts the new providers' actors,
// hands each changed or removed provider its part, and gives the core the caps (lowering
// them stops nothing: the dispatcher grants nothing until running is below max_running)
// and the new providers' slots. A part already applied (the message is sent again after a
// crash) is skipped.
func (s *supervisor) reconfigure(ctx actor.Context, m *reconfigure) {
	for _, ps := range m.add {
		switch {
		case ps.slot.p < len(s.providers):
			continue // started already
		case ps.slot.p > len(s.providers):
			// The gateway's slots and the supervisor's providers grow only together: a gap is a bug.
			panic(fmt.Sprintf("internal fault: a reload adds provider slot %d to %d providers", ps.slot.p, len(s.providers)))
		}
		s.spawnProvider(ctx, ps.slot, ps.pv, ps.models)
	}
	for _, ps := range m.change {
		send(ctx, s.providers[ps.slot.p], &reconfigureProvider{setup: ps, r: m})
	}
	for _, p := range m.remove {
		send(ctx, s.providers[p], &retire{r: m})
	}
	// Credit handed out under the old caps comes back before the reload is acknowledged, so
	// every call sent after it reaches its provider after the recall.
	s.apply(ctx, s.core.Reconfigure(m.limits, len(s.providers)))
	m.ack(-1, nil)
}

// providerRetired stops a retired provider that has nothing left: its lanes and request
// actors stop with it. Its slot stays, idle for good, in the dispatcher.
func (s *supervisor) providerRetired(ctx actor.Context, p int) {
	fx, ok := s.core.Retire(p)
	if !ok {
		return
	}
	ctx.Stop(s.providers[p])
	s.g.log.Info().Str("provider", s.g.slots.at(p).name).Msg("removed provider stopped: it finished what it ran and had queued")
	s.apply(ctx, fx)
}

// reconfigure takes a reload's settings for this provider. Nothing admitted is disturbed:
// running calls keep the stream, backend, run timer and lanes they have; queued calls keep
// their place and deadline; lowered lanes and queue_length only hold back what has not
// started or entered yet (policy.Provider.Reconfigure). New models get their lanes; removed
// models admit nothing new and their lanes stop once idle.
func (pr providerReload) reconfigure(ctx actor.Context, m *reconfigureProvider) {
	a := pr.a
	now := a.g.now()
	set := m.setup
	a.pv = set.pv
	for len(a.models) < len(set.models) {
		a.models = append(a.models, set.models[len(a.models)])
		a.gone = append(a.gone, false)
	}
	for i := range set.models {
		a.models[i] = set.models[i]
		if set.gone[i] && !a.gone[i] && i < len(a.lanes) && a.lanes[i] != nil {
			a.goneLanes++
		}
		a.gone[i] = a.gone[i] || set.gone[i]
	}
	if set.keys {
		a.keysSince = now
	}
	if set.revive && a.retiring {
		a.retiring = false
		a.slot.claim.Store(claimNone)
		a.g.log.Info().Str("provider", a.name).Int("running", a.pol.Lanes().Running()).Int("queued", a.pol.Queued()).
			Msg("provider added back by a reload while it finished its calls: it serves again, in the same lanes")
	}
	whole, pairs := a.health.Reconfigure(healthSpec(a.pv, a.models), now)
	a.vitals.restoredByReload(whole, pairs)
	a.pol.Reconfigure(a.spec(), now)
	for len(a.lanes) < len(a.models) {
		a.spawnLane(ctx, len(a.lanes))
		if a.rebuilding {
			a.reported = append(a.reported, true) // a new lane runs nothing
		}
	}
	a.vitals.applyHealth(now)
	m.ack(a.p, nil)
	if !a.rebuilding {
		a.offer(ctx, now)
	}
}

// staleKeys reports whether a call started at started, before a reload changed the keys:
// its key index names a key of the old ring, and its backend is the old one.
func (pr providerReload) staleKeys(started time.Time) bool {
	a := pr.a
	return !a.keysSince.IsZero() && !started.IsZero() && started.Before(a.keysSince)
}

// retire takes the provider out of the served set: from now on only what it runs and has
// queued goes on (a capacity requeue of a running call included).
func (pr providerReload) retire(ctx actor.Context, m *retire) {
	a := pr.a
	a.retiring = true
	a.g.log.Info().Str("provider", a.name).Int("running", a.pol.Lanes().Running()).Int("queued", a.pol.Queued()).
		Msg("provider removed by a reload: it admits nothing new and finishes what it runs and has queued")
	m.ack(a.p, nil)
	a.offer(ctx, a.g.now())
}

// retireIdle stops the lanes of removed models that are idle, and starts the retired
// provider's own stop once nothing of it runs or waits.
func (pr providerReload) retireIdle(ctx actor.Context) {
	a := pr.a
	if a.goneLanes > 0 {
		snap := a.pol.Snapshot()
		for m, gone := range a.gone {
			if gone && a.lanes[m] != nil && m < len(snap.Models) && snap.Models[m].Running == 0 && snap.Models[m].Queued == 0 {
				ctx.Stop(a.lanes[m])
				a.lanes[m] = nil
				a.goneLanes--
			}
		}
	}
	if a.retiring && !a.closing && a.pol.Lanes().Running() == 0 && a.pol.Queued() == 0 && len(a.waiting) == 0 &&
		a.slot.claim.CompareAndSwap(claimNone, claimClosing) { // else a reload is adding it back
		a.closing = true
		a.slot.retired.Store(true) // Start sends nothing more (slot.enter)
		send(ctx, a.self, &retireCheck{})
	}
}

// retireDown is retireIdle for a provider out of service: it queues nothing (it answered its
// waiting calls when it went down), so once a reload removed it and its running calls have
// ended, it stops like any retired provider.
func (pr providerReload) retireDown(ctx actor.Context) {
	a := pr.a
	if a.retiring && !a.closing && a.pol.Lanes().Running() == 0 && a.slot.claim.CompareAndSwap(claimNone, claimClosing) {
		a.closing = true
		a.slot.retired.Store(true)
		send(ctx, a.self, &retireCheck{})
	}
}

// retireCheck waits until every call that Start sent before the slot was retired is in the
// mailbox (and so handled before this message, answered as not found), then asks the
// supervisor to stop the provider.
func (pr providerReload) retireCheck(ctx actor.Context, m *retireCheck) {
	a := pr.a
	if a.slot.inflight.Load() > 0 {
		self, root := a.self, a.g.system.Root
		// The timer's goroutine only sends one message and exits.
		time.AfterFunc(retireCheckEvery, func() { send(root, self, &retireCheck{}) })
		return
	}
	if !m.final {
		// A Start that entered before the slot was retired may have sent its call after
		// this check was queued and left since: one more round through the mailbox puts
		// every such call ahead of the stop.
		send(ctx, a.self, &retireCheck{final: true})
		return
	}
	a.carry(ctx, a.pacer.Reset())
	send(ctx, a.g.supervisor, &providerRetired{p: a.p})
}

// providerReload is the provider actor's part of reloads: it takes a reload's settings and
// models (and models a backend reports at run time), tells a call started before a reload
// from one of now, and retires the provider a reload removed once nothing of it is left.
type providerReload struct{ a *providerActor }
