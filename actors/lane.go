package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// laneActor runs the calls of one model: it spawns a request actor per call and is their
// supervisor. A lane actor that fails is restarted; its request actors are stopped with it,
// which cancels their backends, so their clients get a clean error and the lanes come back.
type laneActor struct {
	g        *Gateway
	p, m     int
	parent   *actor.PID
	restarts int
	stopping bool // see providerActor.stopping
}

func newLaneProducer(g *Gateway, p, m int, parent *actor.PID) actor.Producer {
	incarnations := 0
	return func() actor.Actor {
		incarnations++
		return &laneActor{g: g, p: p, m: m, parent: parent, restarts: incarnations - 1}
	}
}

func (a *laneActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Stopping:
		a.stopping = true
	case *startCall:
		c := msg.c
		if a.stopping || !c.taken.CompareAndSwap(false, true) {
			return // a duplicate re-sent after a restart, or answered at shutdown
		}
		// The call's stream is made here and answered at once, so the waiting Start does not
		// also wait for the request actor's first message; the request actor owns the call's
		// cancellation from its start on.
		s, cancel := newStream(a.g, c)
		s.self = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return newRequestActor(a.g, c, cancel) },
			actor.WithDispatcher(a.g.dispatch)))
		c.reply <- admitResult{stream: s, queueWait: c.started.Sub(c.arrived)}
	case *panicNow:
		panic(fmt.Sprintf("injected fault in lane %s/%s", a.g.opts.Providers[a.p].Name, a.g.model(a.p, a.m).Name))
	case *actor.Started:
		if a.restarts > 0 {
			a.g.log.Warn().Str("provider", a.g.opts.Providers[a.p].Name).Str("model", a.g.model(a.p, a.m).Name).
				Int("restarts", a.restarts).Msg("lane actor restarted")
			ctx.Send(a.parent, &restarted{p: a.p, m: a.m})
		}
	}
}
