package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// supervisor is the root of the gateway's actors: a shell over its pure core, a
// policy.Supervisor (the dispatcher fed by the providers' offers, its generation, the
// providers retired, the drain). Each message is one call of the core, whose effects it
// carries out (apply): it grants starts and gives verdicts, and never blocks. Beside the
// core it keeps the provider actors, which it spawns and supervises in protoactor's sense
// (HandleFailure, in supervision.go), and the batches it is admitting (batch.go).
//
// The core's facts survive a crash; its dispatcher is derived from the providers' offers,
// so after a crash it is rebuilt by asking every provider for a fresh one (rebuild).
type supervisor struct {
	g         *Gateway
	core      *policy.Supervisor
	providers []*actor.PID        // by slot; a reload appends (reconfigure.go)
	spawned   chan<- []*actor.PID // New's wait for the provider actors, answered once
	self      *actor.PID

	// mode is the behaviour that receives: receiveNormal, or receiveFailed once the gateway
	// has failed (failed latches the change).
	mode   actor.Behavior
	failed bool

	admitting map[policy.BatchID]*batchCall // the batches its core is admitting or keeps parked
}

func newSupervisor(g *Gateway, spawned chan<- []*actor.PID) *supervisor {
	s := &supervisor{g: g, spawned: spawned, mode: actor.NewBehavior(), admitting: map[policy.BatchID]*batchCall{}}
	// Standing credit is handed out unless the replicas share their limits: there every
	// start waits for its leases anyway.
	s.core = policy.NewSupervisor(policy.SupervisorSpec{Limits: g.caps.Load().limits, Providers: len(g.opts.Providers),
		Slots: g.running, Shares: g.shares, Credit: g.opts.Shared == nil})
	s.mode.Become(s.receiveNormal)
	return s
}

// Receive hands the message to the supervisor's mode. The gateway fails outside this actor
// (its guardian strategy, or a rebuild that panicked), so the first message after the failure
// makes the change, before it is handled.
func (s *supervisor) Receive(ctx actor.Context) {
	if !s.failed && s.g.Failed() != nil {
		s.fail(ctx)
	}
	s.mode.Receive(ctx)
}

// receiveNormal is the supervisor of a gateway in service: it dispatches, batches, reloads
// and drains.
func (s *supervisor) receiveNormal(ctx actor.Context) {
	msg := ctx.Message()
	defer s.recoverRebuild(ctx)
	s.g.faults.hit(faultSupervisor, "", "", msg)
	switch m := msg.(type) {
	case *offer:
		s.apply(ctx, s.core.Offer(m.p, m.o))
	case *dispatchNow:
		s.apply(ctx, s.core.DispatchNow())
	case *resyncTick:
		s.apply(ctx, s.core.ResyncTick(m.sync))
	case *startBatch:
		s.batch(ctx, m.b)
	case *reserved:
		s.reservedBy(ctx, m)
	case *drainAll:
		s.apply(ctx, s.core.Drain())
	case *providerIdle:
		s.apply(ctx, s.core.ProviderIdle(m.p))
	case *reconfigure:
		s.reconfigure(ctx, m)
	case *providerRetired:
		s.providerRetired(ctx, m.p)
	case *actor.Started:
		s.self = ctx.Self()
		s.spawnProviders(ctx)
	}
}

// resyncInterval is how often a rebuilt supervisor asks again the providers that have not
// reported for its generation.
const resyncInterval = 100 * time.Millisecond

// apply carries out what the core decided.
func (s *supervisor) apply(ctx actor.Context, fx *policy.SupervisorEffects) {
	for i := range fx.Grants {
		o := &fx.Grants[i]
		send(ctx, s.providers[o.Provider], &grants{g: o.Grants, v: o.Verdicts, ack: o.Ack, credit: o.Credit})
	}
	for _, r := range fx.Recalls {
		send(ctx, s.providers[r.Provider], &recall{r: r})
	}
	if fx.Dispatch {
		// After the offers already in the mailbox: offers made at the same moment are
		// dispatched together.
		send(ctx, s.self, &dispatchNow{})
	}
	for _, p := range fx.Resync {
		send(ctx, s.providers[p], &resync{sync: fx.Sync})
	}
	if fx.ArmResync {
		self, root, sync := s.self, s.g.system.Root, fx.Sync
		// The timer's goroutine only sends one message and exits.
		time.AfterFunc(resyncInterval, func() { send(root, self, &resyncTick{sync: sync}) })
	}
	for _, p := range fx.Drain {
		send(ctx, s.providers[p], &drainAll{})
	}
	s.applyBatches(ctx, fx)
	if fx.Idle {
		select {
		case <-s.g.idle:
		default:
			close(s.g.idle)
		}
	}
}

func (s *supervisor) spawnProviders(ctx actor.Context) {
	slots := s.g.slots.all()
	for i, pv := range s.g.opts.Providers {
		s.spawnProvider(ctx, slots[i], pv, pv.Models)
	}
	s.spawned <- s.providers
}

// spawnProvider starts the actor of the provider in slot sl.
func (s *supervisor) spawnProvider(ctx actor.Context, sl *slot, pv Provider, models []Model) {
	pa := newProviderActor(s.g, sl, pv, models)
	pa.sync = s.core.Sync() // a provider added after a rebuild answers the generation in force
	props := s.g.props(func() actor.Actor { return pa },
		actor.WithMailbox(func() actor.Mailbox {
			mb := s.g.mailbox()
			pa.inbox = mb // before the mailbox runs: its first message happens after this
			return mb
		}))
	pid := ctx.Spawn(props)
	sl.pid.Store(pid)
	s.providers = append(s.providers, pid)
}

// rebuild replaces the core's dispatcher after a crash (policy.Supervisor.Rebuild), which
// tells the batches it was admitting to try again.
func (s *supervisor) rebuild(ctx actor.Context) { s.apply(ctx, s.core.Rebuild()) }

// errGatewayFailed is the cause of every call stopped because the supervisor itself ran out
// of restarts.
var errGatewayFailed = errors.New("the gateway's supervisor failed repeatedly")

// errStopping is what a batch the failed gateway will not start is answered (a new error
// each time: its receivers may annotate it).
func errStopping() error {
	return &llm.Error{Kind: llm.KindDraining, Message: "the gateway is stopping after an internal failure (see its log)"}
}

// fail makes the supervisor the failed gateway's: it answers the batches parked for it and
// from now on receives in receiveFailed.
func (s *supervisor) fail(ctx actor.Context) {
	s.failed = true
	s.apply(ctx, s.core.Fail())
	s.mode.Become(s.receiveFailed)
}

// receiveFailed is the supervisor once the gateway has failed: it grants nothing and only
// follows the drain.
func (s *supervisor) receiveFailed(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *startBatch:
		m.b.decide(errStopping())
	case *reserved:
		if m.ok {
			send(ctx, s.providers[m.p], &settle{b: m.b})
		}
	case *drainAll:
		s.apply(ctx, s.core.Drain())
	case *providerIdle:
		s.apply(ctx, s.core.ProviderIdle(m.p))
	case *reconfigure:
		m.ack(-1, errors.New("the gateway has failed"))
	}
}
