package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// laneActor runs one model's calls: it makes each started call's stream (its backend
// context and run timer), spawns its request actor, answers the waiting Start, and when the
// backend has stopped tells its provider that the call's lanes are free. Its one fact is the
// calls running on the model, a record each (laneRun: what its provider started it with, its
// stream, its leases); the idle request actors it keeps for its next calls, and those it
// retired, only save work. It survives a crash as it is (a crash loses only the message
// being handled, which the provider's supervision handles), and a provider rebuilding its
// own state asks for it.
type laneActor struct {
	g       *Gateway
	p, m    int
	slot    *slot
	names   [2]string // provider and model, for the fault seam
	running map[policy.ID]laneRun
	idle    []*actor.PID // request actors waiting for a call, at most maxIdleRequesters
	// retired are the request actors this lane stopped itself because idle was full: they
	// serve no call, so their Terminated needs no search of running, a search of thousands
	// of calls when thousands are in flight (docs/benchmarks.md has the profile).
	retired map[string]bool
	// stopping: the lane is stopping (its provider stops). It spawns no request actor from
	// then on: a child spawned after its children were told to stop would never be, and the
	// lane would wait for it for ever.
	stopping bool
}

// maxIdleRequesters bounds the request actors a lane keeps for its next calls; past it, a
// freed request actor is stopped.
const maxIdleRequesters = 64

func (a *providerActor) spawnLane(ctx actor.Context, m int) {
	la := &laneActor{g: a.g, p: a.p, m: m, slot: a.slot, names: [2]string{a.name, a.models[m].Name}, running: map[policy.ID]laneRun{},
		retired: map[string]bool{}}
	props := a.g.props(func() actor.Actor { return la }, actor.WithSupervisor(requestStrategy{g: a.g}))
	a.lanes = append(a.lanes, ctx.Spawn(props))
}

func (a *laneActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	if !a.slot.down.Load() {
		a.g.faults.hit(faultLane, a.names[0], a.names[1], msg)
	}
	switch m := msg.(type) {
	case *startCall:
		r := laneRun{c: m.c, run: &m.run}
		if sh := m.run.shared; sh != nil {
			r.lease, r.charged = sh.lease, sh.charged
		}
		if a.g.opts.Shared != nil && r.lease == nil {
			a.acquire(ctx, r)
		} else {
			a.start(ctx, r)
		}
	case *leased:
		a.leased(ctx, m)
	case *released:
		a.forget(ctx, m.c)
		if m.requeued {
			send(ctx, ctx.Parent(), &freed{c: m.c, end: &m.end}) // the stream told only its next arrival
		}
	case *abort:
		a.drop(ctx, m.c, m.lease)
	case *reportRunning:
		calls := make([]runningCall, 0, len(a.running))
		for _, r := range a.running {
			// A call whose stream has ended may have told its provider already (freed): it
			// runs no more, so it is not reported, whether or not its release is here yet.
			if r.s == nil || !r.s.ended.Load() {
				calls = append(calls, runningCall{member: r.c.member(a.m), started: r.run.started, key: r.run.key})
			}
		}
		send(ctx, ctx.Parent(), &laneReport{m: a.m, calls: calls})
	case *cancelAll:
		for _, r := range a.running {
			switch {
			case r.s != nil:
				r.s.cancel(m.cause)
			case r.leasing != nil:
				r.leasing(m.cause) // still asking for its leases
			}
		}
	case *actor.Terminated:
		a.requesterStopped(ctx, m.Who)
	case *actor.Stopping:
		a.stop(ctx)
	}
}

// stop is the lane stopping. Its request actors stop with it, but name no call: what runs
// here stops now. A call whose stream has ended is forgotten at once (its lease goes back):
// its release, still in the mailbox, may never be handled once the lane has stopped.
func (a *laneActor) stop(ctx actor.Context) {
	a.stopping = true
	for _, r := range a.running {
		switch {
		case r.s != nil && r.s.ended.Load():
			a.forget(ctx, r.c)
		case r.s != nil:
			r.s.cancel(errStopped)
		}
	}
}

// requester returns a request actor for a call: an idle one, or a new one.
func (a *laneActor) requester(ctx actor.Context) *actor.PID {
	if n := len(a.idle); n > 0 {
		pid := a.idle[n-1]
		a.idle = a.idle[:n-1]
		return pid
	}
	return ctx.Spawn(a.g.props(func() actor.Actor { return &requestActor{g: a.g} }))
}

// requesterStopped: a request actor stopped (it failed; its strategy stops it). Its
// stopping cancelled the call whose hang-up it handled; it must not be handed another. A
// call handed to it after it failed (its release reached the lane before its failure did,
// so it was recycled) is not its fate: that call gets a new request actor, told at once if
// the client has left meanwhile (the hang-up may have gone to the stopped one). One the
// lane retired itself serves no call and was never handed out again.
func (a *laneActor) requesterStopped(ctx actor.Context, pid *actor.PID) {
	if a.retired[pid.Id] {
		delete(a.retired, pid.Id)
		return
	}
	for i, p := range a.idle {
		if p.Equal(pid) {
			a.idle = append(a.idle[:i], a.idle[i+1:]...)
			break
		}
	}
	for _, r := range a.running {
		if r.s == nil || !r.s.self.Load().Equal(pid) {
			continue
		}
		if r.s.requesterStopping.Load() {
			r.s.cancel(errStopped) // it stopped while serving the call (a no-op: it cancelled it)
			continue
		}
		if a.stopping {
			continue // Stopping cancelled it; no hang-up is left to tell
		}
		next := a.requester(ctx)
		r.s.self.Store(next)
		if r.c.ctx.Err() != nil {
			send(ctx, next, &clientGone{s: r.s})
		}
	}
}

// start runs a call the provider started (r). The stream is made and the Start answered
// here, so the waiting Start does not also wait for the request actor; the request actor
// owns the call's cancellation from then on. A call answered while it was on its way is
// released at once: nobody runs it.
func (a *laneActor) start(ctx actor.Context, r laneRun) {
	c := r.c
	if a.stopping {
		// Its provider stops: the call is not started here (a stop system message overtakes
		// the start already in the mailbox).
		c.answer(admitResult{queueWait: r.run.queueWait(), err: &llm.Error{Kind: llm.KindProviderUnavailable,
			Provider: c.route.provider, RetryAfter: time.Second,
			Message: "provider " + c.route.provider + " stopped as this request was starting; it did not run; try again"}})
		a.drop(ctx, c, r.lease)
		return
	}
	if !c.answered.Load() {
		r.s = newStream(a.g, c, r.run, r.charged, r.lease != nil, ctx.Self(), a.requester(ctx))
	}
	a.running[c.id] = r
	if r.s == nil || !c.answer(admitResult{stream: r.s, queueWait: r.run.queueWait()}) {
		a.drop(ctx, c, nil)
	}
}

// forget drops the lane's record of a call whose backend has stopped: its lease goes back
// and its request actor is free for the next call.
func (a *laneActor) forget(ctx actor.Context, c *call) {
	if r, ok := a.running[c.id]; ok {
		delete(a.running, c.id)
		if l := r.lease; l != nil {
			go l.Release() // exits after one bounded round trip to the shared state
		}
		// Its watcher is unregistered (the stream ended): the request actor is free.
		if r.s != nil && !r.s.requesterStopping.Load() {
			if self := r.s.self.Load(); len(a.idle) < maxIdleRequesters {
				a.idle = append(a.idle, self)
			} else {
				a.retired[self.Id] = true
				ctx.Stop(self)
			}
		}
	}
}

// drop abandons a call nobody will run (its Start was answered otherwise): its stream is
// stopped before it was ever opened, which releases it; a call that has no stream yet is
// released at once, and so is lease, a batch member's the lane does not hold (its start
// was lost in a crash).
func (a *laneActor) drop(ctx actor.Context, c *call, lease replicas.Lease) {
	r, ok := a.running[c.id]
	if ok && r.s != nil {
		r.s.abandon()
		return
	}
	if !ok && lease != nil {
		go lease.Release() // exits after one bounded round trip to the shared state
	}
	a.free(ctx, c)
}

// free forgets a call that never ran and tells its provider its lanes are free. The
// provider is told even of a call the lane no longer holds: an abort re-sent after a crash
// must still reach it, and it ignores a call it has freed already.
func (a *laneActor) free(ctx actor.Context, c *call) {
	a.forget(ctx, c)
	send(ctx, ctx.Parent(), &freed{c: c})
}
