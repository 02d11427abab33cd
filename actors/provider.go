package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// providerActor runs one provider's admitted calls. It owns a lane actor per model and hands
// each started call to its model's lane. Its state is rebuilt on restart: the lanes are
// respawned and the supervisor re-sends the calls that were lost with the failing message.
type providerActor struct {
	g        *Gateway
	p        int
	parent   *actor.PID
	lanes    []*actor.PID
	restarts int
	// stopping is set once the actor is stopping: protoactor still delivers user messages
	// while it waits for its children to stop, and a child spawned then would never be told
	// to stop, so the actor would never finish stopping.
	stopping bool
}

// newProviderProducer returns the producer of provider p's actor. The producer counts
// incarnations so a restarted actor knows to report itself.
func newProviderProducer(g *Gateway, p int, parent *actor.PID) actor.Producer {
	incarnations := 0
	return func() actor.Actor {
		incarnations++
		return &providerActor{g: g, p: p, parent: parent, restarts: incarnations - 1}
	}
}

func (a *providerActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Stopping:
		a.stopping = true
	case *startCall:
		if a.stopping {
			return // the supervisor answered every call not yet taken when it began to stop
		}
		if msg.c.route.m >= len(a.lanes) { // a model added since this incarnation started
			a.spawnLanes(ctx, len(a.g.table.Load().models[a.p]))
		}
		ctx.Send(a.lanes[msg.c.route.m], msg)
	case *addLanes:
		if !a.stopping {
			a.spawnLanes(ctx, msg.n)
		}
	case *panicNow:
		if msg.model == "" {
			panic(fmt.Sprintf("injected fault in provider %s", a.g.opts.Providers[a.p].Name))
		}
		for m, mv := range a.g.table.Load().models[a.p] {
			if mv.Name == msg.model && m < len(a.lanes) {
				ctx.Send(a.lanes[m], msg)
			}
		}
	case *restarted: // from one of our lanes
		ctx.Send(a.parent, msg)
	case *actor.Started:
		pv := a.g.opts.Providers[a.p]
		a.spawnLanes(ctx, len(a.g.table.Load().models[a.p]))
		if a.restarts > 0 {
			a.g.log.Warn().Str("provider", pv.Name).Int("restarts", a.restarts).Msg("provider actor restarted")
			ctx.Send(a.parent, &restarted{p: a.p, m: -1})
		}
	}
}
