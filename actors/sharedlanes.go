package actors

import (
	"context"
	"time"
)

// lanesPub is one scope's publishing of the lanes this replica learns (sharedhealth.go).
// One Learn per scope is in flight at a time, and a change learned meanwhile waits for it:
// the shared state then receives this replica's values in the order it learned them (a
// goroutine per change could store 4 after 2 and leave this replica running 2).
type lanesPub struct {
	known   int  // the value this replica last saw stored (0: none seen); Learn's was
	busy    bool // a Learn is in flight
	pending bool // a change was learned since that Learn left: publish the current value next
}

// lanesPublished, from a Learn's goroutine to its provider actor: the shared state now
// holds stored for scope (sent, unless it refused a rise); err when it did not answer.
type lanesPublished struct {
	scope        string
	sent, stored int
	err          error
}

// lanesPub is scope's publishing state, made on first use.
func (rl replicaLink) lanesPub(scope string) *lanesPub {
	a := rl.a
	if a.pubs == nil {
		a.pubs = map[string]*lanesPub{}
	}
	p := a.pubs[scope]
	if p == nil {
		p = &lanesPub{}
		a.pubs[scope] = p
	}
	return p
}

// shareLanes publishes that scope's learned lanes changed, once the Learn in flight for
// scope, if any, has answered.
func (rl replicaLink) shareLanes(scope string) {
	a := rl.a
	if a.g.opts.Shared == nil {
		return
	}
	p := rl.lanesPub(scope)
	p.pending = true
	if !p.busy {
		rl.publishLanes(scope, p)
	}
}

// publishLanes sends scope's current learned value to the shared state, off the actor's
// goroutine, with the value last seen stored as the one a rise replaces.
func (rl replicaLink) publishLanes(scope string, p *lanesPub) {
	a := rl.a
	m, ok := rl.scopeLanes(scope)
	p.pending = false
	if !ok {
		return // a reload removed the scope
	}
	lanes, _ := a.health.Lanes(m)
	sh, root, self, was := a.g.opts.Shared, a.g.system.Root, a.self, p.known
	p.busy = true
	go func() { // exits after one round trip bounded by sharedTimeout; tells the actor its answer
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		stored, err := sh.Learn(ctx, scope, lanes, was)
		send(root, self, &lanesPublished{scope: scope, sent: lanes, stored: stored, err: err})
	}()
}

// lanesPublished takes a Learn's answer: a refused rise adopts the stored, lower value on
// the path a read takes (never loosening what was learned since), and the change learned
// meanwhile, if any, goes next.
func (rl replicaLink) lanesPublished(m *lanesPublished, now time.Time) {
	a := rl.a
	p := rl.lanesPub(m.scope)
	p.busy = false
	switch {
	case m.err != nil:
		a.g.log.Debug().Err(m.err).Str("name", m.scope).Msg("learned lanes not shared: the replicas' shared state did not take them")
	case m.stored != m.sent:
		rl.lanesShared(&lanesShared{scope: m.scope, lanes: m.stored, from: "the shared state (a rise refused: another replica cut)", lower: true}, now)
	default:
		p.known = m.stored
	}
	if p.pending {
		rl.publishLanes(m.scope, p)
	}
}
