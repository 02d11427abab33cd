package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Supervision, per actor kind (STYLE.md, practice 8; docs/architecture.md has the table).
//
// protoactor's Restart directive makes a new actor and stops its children first: a restarted
// provider would cancel every call running on its lanes, a restarted supervisor every call
// of the gateway. The supervisor, provider and lane actors therefore restart in place: the
// failing actor drops its derived state and rebuilds it from its facts (recoverRebuild, in
// the deferred recovery of its Receive), and its parent's strategy decides, within a
// restart budget, to resume it (its children keep running) or to take it out of service.
// Request actors stop: a request cannot be resumed halfway through a stream; stopping
// cancels its backend, so its client gets a clean error and its lanes come back.
//
// A crash loses the message being handled. The parent's strategy hands it to the message's
// lost method (loss.go), which says by type what its loss means: the call it carries is
// answered, a message that only frees or withdraws is sent again, or the rebuild re-derives
// its effect.

// restartBudget is how many failures an actor may have within a window before it is taken
// out of service instead of resumed: a fault that repeats must not loop forever.
type restartBudget struct {
	max    int
	within time.Duration
}

var (
	supervisorBudget = restartBudget{max: 3, within: time.Minute}
	providerBudget   = restartBudget{max: 5, within: 10 * time.Second}
	laneBudget       = restartBudget{max: 5, within: 10 * time.Second}
)

// spent counts one more failure and reports whether the budget is exceeded.
func (b restartBudget) spent(rs *actor.RestartStatistics) bool {
	rs.Fail()
	return rs.NumberOfFailures(b.within) > b.max
}

// requestStrategy stops a failed request actor (see above), after its lost message says what
// its loss means.
type requestStrategy struct{ g *Gateway }

func (r requestStrategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason, msg any) {
	r.g.log.Error().Str("reason", fmt.Sprint(reason)).Str("message", fmt.Sprintf("%T", msg)).
		Msg("request actor failed; it stops, which cancels its call")
	lose(msg, &loss{g: r.g, kind: faultRequest, child: child, p: -1, name: "?"})
	sup.StopChildren(child)
}

// HandleFailure is the supervisor's strategy for its provider actors.
func (s *supervisor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason, msg any) {
	p := -1
	for i, pid := range s.providers {
		if pid.Equal(child) {
			p = i
		}
	}
	root := s.g.system.Root
	name := "?"
	if p >= 0 {
		name = s.g.slots.at(p).name
	}
	exhausted := providerBudget.spent(rs)
	s.g.log.Error().Str("provider", name).Str("reason", fmt.Sprint(reason)).Str("message", fmt.Sprintf("%T", msg)).
		Int("failures", rs.NumberOfFailures(providerBudget.within)).Bool("budget_spent", exhausted).
		Msg("provider actor failed; it rebuilt its state and resumes")
	lose(msg, &loss{g: s.g, kind: faultProvider, child: child, p: p, name: name})
	if exhausted && p >= 0 {
		s.g.slots.at(p).down.Store(true)
		send(root, child, &failNow{})
	}
	sup.ResumeChildren(child)
}

// HandleFailure is a provider actor's strategy for its lane actors.
func (a *providerActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason, msg any) {
	m := -1
	for i, pid := range a.lanes {
		if pid != nil && pid.Equal(child) {
			m = i
		}
	}
	root := a.g.system.Root
	model := "?"
	if m >= 0 {
		model = a.models[m].Name
	}
	exhausted := laneBudget.spent(rs)
	a.g.log.Error().Str("provider", a.name).Str("model", model).Str("reason", fmt.Sprint(reason)).
		Str("message", fmt.Sprintf("%T", msg)).Int("failures", rs.NumberOfFailures(laneBudget.within)).
		Bool("budget_spent", exhausted).Msg("lane actor failed; it resumes")
	lose(msg, &loss{g: a.g, kind: faultLane, child: child, p: a.p, name: a.name, lanes: a})
	if exhausted {
		a.slot.down.Store(true)
		send(root, a.self, &failNow{})
	}
	sup.ResumeChildren(child)
}

// supervisorGuardian is the strategy for the supervisor itself, which has no parent actor.
// Past its budget the gateway has failed: every provider leaves service (answering what
// waits, stopping what runs) and Gateway.Failed reports it, so that the process can exit
// and be started afresh by whatever runs it.
type supervisorGuardian struct{ g *Gateway }

func newSupervisorGuardian(g *Gateway) actor.SupervisorStrategy { return &supervisorGuardian{g: g} }

func (sg *supervisorGuardian) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason, msg any) {
	g := sg.g
	exhausted := supervisorBudget.spent(rs)
	g.log.Error().Str("reason", fmt.Sprint(reason)).Str("message", fmt.Sprintf("%T", msg)).
		Int("failures", rs.NumberOfFailures(supervisorBudget.within)).Bool("budget_spent", exhausted).
		Msg("supervisor actor failed; it rebuilt its state from the providers and resumes")
	root := g.system.Root
	lose(msg, &loss{g: g, kind: faultSupervisor, child: child, p: -1, name: "?"})
	if exhausted {
		g.fail(fmt.Errorf("%w (%d times within %s): %v", errGatewayFailed, supervisorBudget.max+1, supervisorBudget.within, reason))
		for _, sl := range g.slots.all() {
			if pid := sl.pid.Load(); pid != nil && !sl.retired.Load() {
				send(root, pid, &failNow{})
			}
		}
	}
	sup.ResumeChildren(child)
}

// recoverRebuild, deferred at the top of an actor's Receive, turns a panic into a rebuild of
// the actor's derived state, then lets the panic go on to protoactor, whose supervision
// consults the strategy above. A rebuild that itself fails takes the actor out of service:
// the gateway for the supervisor, the provider for a provider actor.
func (s *supervisor) recoverRebuild(ctx actor.Context) {
	if r := recover(); r != nil {
		rebuildOr(func() { s.rebuild(ctx) }, func() { s.g.fail(errGatewayFailed) })
		panic(r)
	}
}

func (a *providerActor) recoverRebuild(ctx actor.Context) {
	if r := recover(); r != nil {
		rebuildOr(func() { a.rebuild(ctx) }, func() { a.slot.down.Store(true) })
		panic(r)
	}
}

// rebuildOr runs rebuild, and failed if rebuild panics.
func rebuildOr(rebuild, failed func()) {
	defer func() {
		if recover() != nil {
			failed()
		}
	}()
	rebuild()
}
