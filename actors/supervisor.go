package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// supervisor is the root of the gateway's actors. It owns only what spans providers: the
// policy.Dispatcher (max_running, max_admitted, class priority, the providers' round-robin)
// fed by the providers' offers; it grants starts and gives verdicts, and never blocks.
//
// Its one fact is the generation counter sync; the dispatcher is derived from the
// providers' offers, so after a crash it is rebuilt by asking every provider for a fresh one
// (see rebuild). It is also the supervisor, in protoactor's sense, of the provider actors
// (HandleFailure, in supervision.go).
type supervisor struct {
	g         *Gateway
	disp      *policy.Dispatcher
	sync      uint64
	providers []*actor.PID // by slot; a reload appends (reconfigure.go)
	// limits are the caps in force and retired the slots whose provider a reload removed
	// and which have stopped: facts a rebuild needs (a retired provider reports nothing
	// any more, so the rebuilt dispatcher counts it idle from the start).
	limits  policy.Limits
	retired []bool
	spawned chan<- []*actor.PID // New's wait for the provider actors, answered once
	self    *actor.PID

	scheduled bool // a dispatchNow is in our mailbox
	resyncing bool // a resyncTick timer runs
	buf       []policy.Grant
	vbuf      []policy.Verdict
	abuf      []policy.Ack
	out       []grants // per provider, reused between dispatches

	// mode is the behaviour that receives: receiveNormal, or receiveFailed once the gateway
	// has failed (failed latches the change).
	mode   actor.Behavior
	failed bool

	draining bool
	idle     []bool // after drain: the providers that reported nothing left running

	batches []*batchCall // in flight: their reservations are still to come
	parked  []*batchCall // waiting for a rebuild to end or credit to come back before they are held (unpark)
	rbuf    []policy.Recall
}

func newSupervisor(g *Gateway, spawned chan<- []*actor.PID) *supervisor {
	n := len(g.opts.Providers)
	s := &supervisor{g: g, limits: g.caps.Load().limits, spawned: spawned, out: make([]grants, n), retired: make([]bool, n),
		mode: actor.NewBehavior()}
	s.disp = s.newDispatcher(n)
	s.mode.Become(s.receiveNormal)
	return s
}

// newDispatcher is a dispatcher for n providers under the caps in force. It hands out
// standing credit unless the replicas share their limits: there every start waits for its
// leases anyway.
func (s *supervisor) newDispatcher(n int) *policy.Dispatcher {
	d := policy.NewDispatcher(s.limits, n)
	d.SetClients(s.g.running, s.g.shares)
	if s.g.opts.Shared == nil {
		d.EnableCredit()
	}
	return d
}

// Receive hands the message to the supervisor's mode. The gateway fails outside this actor
// (its guardian strategy, or a rebuild that panicked), so the first message after the failure
// makes the change, before it is handled.
func (s *supervisor) Receive(ctx actor.Context) {
	if !s.failed && s.g.Failed() != nil {
		s.fail()
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
		s.disp.Report(m.p, m.o)
		s.schedule(ctx)
		s.unpark(ctx)
	case *dispatchNow:
		s.scheduled = false
		s.dispatch(ctx)
	case *resyncTick:
		s.resyncing = false
		if m.sync == s.sync {
			s.askUnknown(ctx)
		}
	case *startBatch:
		s.batch(ctx, m.b)
	case *reserved:
		s.reservedBy(ctx, m)
	case *drainAll:
		s.drain(ctx)
	case *providerIdle:
		s.providerIdle(m.p)
	case *reconfigure:
		s.reconfigure(ctx, m)
	case *providerRetired:
		s.providerRetired(ctx, m.p)
	case *actor.Started:
		s.self = ctx.Self()
		s.spawnProviders(ctx)
	}
}

// schedule sends dispatchNow to ourselves unless one is on its way, so that offers already
// in the mailbox are all taken in before the next dispatch: offers made at the same moment
// are dispatched together, as one global dispatcher would.
func (s *supervisor) schedule(ctx actor.Context) {
	if s.scheduled || !s.disp.Due() {
		return
	}
	s.scheduled = true
	send(ctx, s.self, &dispatchNow{})
}

// dispatch grants what can start, gives the verdicts on the arrivals the offers listed,
// and sends each provider its share in one message.
func (s *supervisor) dispatch(ctx actor.Context) {
	s.buf = s.disp.Dispatch(s.buf[:0])
	s.vbuf = s.disp.Verdicts(s.vbuf[:0])
	s.abuf = s.disp.Acks(s.abuf[:0])
	if len(s.buf) == 0 && len(s.vbuf) == 0 && len(s.abuf) == 0 {
		return
	}
	for _, gr := range s.buf {
		o := &s.out[gr.Provider]
		o.g = append(o.g, gr)
	}
	for _, v := range s.vbuf {
		o := &s.out[v.Provider]
		o.v = append(o.v, v)
	}
	for _, ack := range s.abuf {
		s.out[ack.Provider].ack = &ack
	}
	for p := range s.out {
		if o := &s.out[p]; len(o.g) > 0 || len(o.v) > 0 || o.ack != nil {
			if cr, ok := s.disp.CreditFor(p); ok {
				o.credit = &cr
			}
			// The message owns its slices: the next dispatch starts new ones.
			send(ctx, s.providers[p], &grants{g: o.g, v: o.v, ack: o.ack, credit: o.credit})
			*o = grants{}
		}
	}
	s.sendRecalls(ctx)
}

// sendRecalls asks back the credit the dispatcher needs back (policy.Recall).
func (s *supervisor) sendRecalls(ctx actor.Context) {
	s.rbuf = s.disp.Recalls(s.rbuf[:0])
	for _, r := range s.rbuf {
		send(ctx, s.providers[r.Provider], &recall{r: r})
	}
}

// unpark begins again the batches that waited for a rebuild to end or for credit to come
// back, once nothing of either is left.
func (s *supervisor) unpark(ctx actor.Context) {
	if len(s.parked) == 0 || s.disp.Recalling() || !s.disp.Ready() {
		return
	}
	parked := s.parked
	s.parked = nil
	for _, b := range parked {
		s.batch(ctx, b)
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
	pa.sync = s.sync // a provider added after a rebuild answers the generation in force
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

// rebuild replaces the dispatcher after a crash: the providers' offers it was derived from
// are asked for again, under a new generation so that offers made for the old dispatcher
// (which do not count the grants it sent) are ignored. It grants nothing until every
// provider has answered; providers that have not answered are asked again every
// resyncInterval, since a provider that crashed while handling the request lost it.
func (s *supervisor) rebuild(ctx actor.Context) {
	s.sync++
	s.disp = s.newDispatcher(len(s.providers))
	s.disp.Forget(s.sync)
	for p, gone := range s.retired {
		if gone {
			s.disp.Report(p, policy.Offer{Sync: s.sync}) // idle for good: known, with nothing
		}
	}
	s.scheduled = false
	s.buf, s.vbuf, s.abuf = nil, nil, nil
	s.forgetBatches()
	for p := range s.out {
		s.out[p] = grants{}
	}
	s.askUnknown(ctx)
}

// resyncInterval is how often a rebuilt supervisor asks again the providers that have not
// reported for its generation.
const resyncInterval = 100 * time.Millisecond

func (s *supervisor) askUnknown(ctx actor.Context) {
	if s.disp.Ready() {
		return
	}
	for p, pid := range s.providers {
		if !s.disp.Known(p) {
			send(ctx, pid, &resync{sync: s.sync})
		}
	}
	if !s.resyncing {
		s.resyncing = true
		self, root, sync := s.self, s.g.system.Root, s.sync
		// The timer's goroutine only sends one message and exits.
		time.AfterFunc(resyncInterval, func() { send(root, self, &resyncTick{sync: sync}) })
	}
}

// drain answers everything waiting and stops everything running, through the providers,
// and closes the gateway's idle channel once each has reported nothing left.
func (s *supervisor) drain(ctx actor.Context) {
	if s.draining {
		return
	}
	s.draining = true
	for _, b := range s.parked {
		b.decide(&llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"})
	}
	s.parked = nil
	s.idle = make([]bool, len(s.providers))
	for p, pid := range s.providers {
		if s.retired[p] {
			s.idle[p] = true
			continue
		}
		send(ctx, pid, &drainAll{})
	}
	s.checkIdle()
}

func (s *supervisor) providerIdle(p int) {
	if s.draining && p >= 0 && p < len(s.idle) {
		s.idle[p] = true
		s.checkIdle()
	}
}

func (s *supervisor) checkIdle() {
	for _, ok := range s.idle {
		if !ok {
			return
		}
	}
	select {
	case <-s.g.idle:
	default:
		close(s.g.idle)
	}
}

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
func (s *supervisor) fail() {
	s.failed = true
	for _, b := range s.parked {
		b.decide(errStopping())
	}
	s.parked = nil
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
		s.drain(ctx)
	case *providerIdle:
		s.providerIdle(m.p)
	case *reconfigure:
		m.ack(-1, errors.New("the gateway has failed"))
	}
}
