package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// supervisor is the root of the gateway's actors. It owns the admission state: every arrival,
// start, release, cancellation and queue expiry is decided here, one message at a time, by
// the pure policy.Gate. It never blocks: rejections are answered on the call's reply channel,
// starts are handed to the calls' lane actors.
type supervisor struct {
	g         *Gateway
	gate      *policy.Gate
	calls     map[policy.ID]*call // queued, and started but not yet released
	providers []*actor.PID
	lanes     [][]*actor.PID // per provider, as its actor last reported them (lanesReady)
	timer     *time.Timer
	wakeAt    time.Time
	buf       []policy.ID
	self      *actor.PID
	root      *actor.RootContext
	alive     bool
}

func newSupervisor(g *Gateway) *supervisor {
	specs := make([]policy.ProviderSpec, len(g.opts.Providers))
	for i, p := range g.opts.Providers {
		ms := make([]policy.ModelSpec, len(p.Models))
		for j, m := range p.Models {
			ms[j] = policy.ModelSpec{Name: m.Name, Lanes: m.Lanes}
		}
		specs[i] = policy.ProviderSpec{Name: p.Name, Lanes: p.Lanes, QueueLength: p.QueueLength,
			QueueTimeout: p.QueueTimeout, RPM: p.RPM, Models: ms}
	}
	return &supervisor{
		g:     g,
		gate:  policy.New(policy.Limits{MaxRunning: g.opts.MaxRunning, MaxAdmitted: g.opts.MaxAdmitted}, specs),
		calls: make(map[policy.ID]*call),
		root:  g.system.Root,
	}
}

// reincarnate is the supervisor's producer. The admission state is the gateway's single
// source of truth, so a restarted supervisor resumes with it rather than forgetting admitted
// calls; its children (provider actors) are respawned by Started.
func (s *supervisor) reincarnate() actor.Actor { return s }

// providerPIDs returns the provider actors' PIDs by name. It is called once by New after the
// supervisor has started; the map is read-only afterwards.
func (s *supervisor) providerPIDs() map[string]*actor.PID {
	ready := make(chan map[string]*actor.PID, 1)
	s.root.Send(s.g.supervisor, &pidsQuery{reply: ready})
	return <-ready
}

type pidsQuery struct{ reply chan map[string]*actor.PID }

// restarted, from a provider or lane actor that was restarted (m < 0: the provider actor):
// calls handed to it that it had not taken yet may have been lost with the failing message.
type restarted struct{ p, m int }

func (s *supervisor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *call:
		s.arrive(msg)
	case *release:
		s.release(msg.id)
	case *cancelCall:
		s.cancel(msg.id)
	case *wake:
		s.wakeAt = time.Time{}
		s.expire()
	case *stateQuery:
		msg.reply <- s.state()
	case *restarted:
		s.redeliver(ctx, msg.p, msg.m)
	case *lanesReady:
		if msg.p < len(s.providers) && msg.from.Equal(s.providers[msg.p]) {
			s.lanes[msg.p] = msg.lanes
		}
	case *addModels:
		ctx.Respond(&addModelsDone{err: s.grow(ctx, msg)})
	case *pidsQuery:
		m := make(map[string]*actor.PID, len(s.providers))
		for i, p := range s.g.opts.Providers {
			m[p.Name] = s.providers[i]
		}
		msg.reply <- m
	case *actor.Started:
		s.self = ctx.Self()
		s.alive = true
		s.spawnProviders(ctx)
	case *actor.Stopping:
		s.alive = false
		s.stopping()
	}
}

func (s *supervisor) spawnProviders(ctx actor.Context) {
	s.providers = s.providers[:0]
	s.lanes = make([][]*actor.PID, len(s.g.opts.Providers))
	for i := range s.g.opts.Providers {
		props := actor.PropsFromProducer(newProviderProducer(s.g, i, s.self),
			actor.WithSupervisor(laneStrategy()), actor.WithDispatcher(s.g.dispatch))
		s.providers = append(s.providers, ctx.Spawn(props))
	}
}

func (s *supervisor) arrive(c *call) {
	now := s.g.opts.Now()
	c.arrived = now // the queue wait starts when the gate sees the call
	if !s.alive {
		c.reply <- admitResult{err: &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}}
		return
	}
	outcome, kind := s.gate.Arrive(c.id, c.route.p, c.route.m, c.prio, now)
	switch outcome {
	case policy.Started:
		s.calls[c.id] = c
		s.start(c, now)
	case policy.Queued:
		s.calls[c.id] = c
	default:
		c.reply <- admitResult{err: s.busy(kind, c, now)}
	}
	// Arrive may also have started queued calls it could not report (a rate limiter
	// refilled before our timer fired), whatever it decided for this one; the gate then
	// wants a wake-up now.
	if at, ok := s.gate.NextWake(); ok && !at.After(now) {
		s.dispatch()
		return
	}
	s.schedule(now)
}

// busy builds a rejection that waiting can fix.
func (s *supervisor) busy(kind llm.Kind, c *call, now time.Time) *llm.Error {
	p := s.g.opts.Providers[c.route.p]
	wait := s.g.opts.RetryAfter
	if d := s.gate.RetryAfter(c.route.p, now); d > wait {
		wait = d // a rate-limited provider knows when its next token comes
	}
	e := &llm.Error{Kind: kind, Provider: p.Name, RetryAfter: wait}
	switch kind {
	case llm.KindOverloaded:
		e.Provider = ""
		e.Message = "the gateway is at its limit of admitted requests (max_admitted); try again shortly"
	case llm.KindQueueFull:
		e.Message = "provider " + p.Name + " has all lanes busy and its queue is full (queue_length); try again shortly"
	case llm.KindQueueTimeout:
		e.Message = "provider " + p.Name + " did not free a lane within queue_timeout (" + p.QueueTimeout.String() + ")"
	}
	return e
}

// start hands a call to its model's lane actor, or to its provider actor while the lanes are
// not known yet (just spawned, or a model just added); the provider passes it on. A call sent
// to a lane that a provider restart has just stopped is lost with it and re-sent by redeliver.
func (s *supervisor) start(c *call, now time.Time) {
	c.started = now
	to := s.providers[c.route.p]
	if lanes := s.lanes[c.route.p]; c.route.m < len(lanes) {
		to = lanes[c.route.m]
	}
	s.root.Send(to, &startCall{c: c})
}

func (s *supervisor) release(id policy.ID) {
	if _, ok := s.calls[id]; !ok {
		return // released twice, or answered at shutdown
	}
	delete(s.calls, id)
	s.gate.Finish(id, s.g.opts.Now())
	s.dispatch()
}

func (s *supervisor) cancel(id policy.ID) {
	c, ok := s.calls[id]
	if !ok || !s.gate.Cancel(id) {
		return // running (its request actor sees the hang-up) or already answered
	}
	delete(s.calls, id)
	c.reply <- admitResult{err: c.ctx.Err(), queueWait: s.g.opts.Now().Sub(c.arrived)}
	s.dispatch()
}

// dispatch starts whatever the gate lets start now and re-arms the wake timer.
func (s *supervisor) dispatch() {
	now := s.g.opts.Now()
	s.buf = s.gate.Dispatch(now, s.buf[:0])
	for _, id := range s.buf {
		if c, ok := s.calls[id]; ok {
			s.start(c, now)
		}
	}
	s.schedule(now)
}

// expire answers the calls whose queue wait ran out, then dispatches (a rate limiter may
// have refilled).
func (s *supervisor) expire() {
	now := s.g.opts.Now()
	s.buf = s.gate.Expire(now, s.buf[:0])
	for _, id := range s.buf {
		c, ok := s.calls[id]
		if !ok {
			continue
		}
		delete(s.calls, id)
		c.reply <- admitResult{err: s.busy(llm.KindQueueTimeout, c, now), queueWait: now.Sub(c.arrived)}
	}
	s.dispatch()
}

// schedule arms the one timer for the gate's next wake-up, if it moved earlier.
func (s *supervisor) schedule(now time.Time) {
	at, ok := s.gate.NextWake()
	if !ok || (!s.wakeAt.IsZero() && !at.Before(s.wakeAt)) {
		return
	}
	s.wakeAt = at
	if s.timer != nil {
		s.timer.Stop()
	}
	self, root := s.self, s.root
	// The timer's goroutine only sends one message and exits.
	s.timer = time.AfterFunc(at.Sub(now), func() { root.Send(self, &wake{}) })
}

// redeliver re-sends the started calls of a restarted actor that it had not taken; a call
// it did take was either finished or is being stopped by its request actor.
func (s *supervisor) redeliver(ctx actor.Context, p, m int) {
	for _, c := range s.calls {
		if c.route.p == p && (m < 0 || c.route.m == m) && !c.started.IsZero() && !c.taken.Load() {
			ctx.Send(s.providers[p], &startCall{c: c})
		}
	}
}

// stopping answers every call that no request actor owns yet; running calls are stopped by
// their request actors, which the actor system stops after this.
func (s *supervisor) stopping() {
	if s.timer != nil {
		s.timer.Stop()
	}
	now := s.g.opts.Now()
	for id, c := range s.calls {
		if c.taken.CompareAndSwap(false, true) {
			s.gate.Cancel(id)
			c.reply <- admitResult{err: &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"},
				queueWait: now.Sub(c.arrived)}
		}
	}
	clear(s.calls)
}

// state renders the gate's snapshot as the /admin/state document.
func (s *supervisor) state() AdminState {
	snap := s.gate.Snapshot()
	st := AdminState{Running: snap.Running, Queued: snap.Queued, MaxRunning: snap.MaxRunning,
		MaxAdmitted: snap.MaxAdmitted, Providers: make([]ProviderState, len(snap.Providers))}
	for i, p := range snap.Providers {
		ps := ProviderState{Name: p.Name, Kind: s.g.opts.Providers[i].Kind, Lanes: p.Lanes, EffectiveLanes: p.EffectiveLanes,
			Running: p.Running, Queued: p.Queued, QueueLength: p.QueueLength, Models: make([]ModelState, len(p.Models))}
		for j, m := range p.Models {
			ps.Models[j] = ModelState{ID: p.Name + "/" + m.Name, ModelLanes: m.ModelLanes, Running: m.Running, Queued: m.Queued}
		}
		st.Providers[i] = ps
	}
	return st
}
