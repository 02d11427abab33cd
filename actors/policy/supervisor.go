package policy

import "fmt"

// Supervisor is the supervisor actor's core: the Dispatcher it feeds with the providers'
// offers, the generation it asks for them under after a rebuild, the providers a reload
// retired, and the drain. Each event the actor receives is one method, which returns what
// the actor is to do (SupervisorEffects); it has no goroutines, clock or mailbox.
//
// Its facts (the generation, the caps, the retired providers) survive Rebuild; the
// dispatcher is derived from the providers' offers and made anew, under a new generation.
type Supervisor struct {
	spec    SupervisorSpec
	disp    *Dispatcher
	sync    uint64
	retired []bool // by provider: a reload removed it and it has stopped

	scheduled bool // a dispatch was asked for (Dispatch) and has not been made
	resyncing bool // a ResyncTick was asked for (ArmResync) and has not come
	draining  bool
	idle      []bool // after the drain: the providers that have nothing left

	batches map[BatchID]*batch // being admitted: their reservations are still to come
	parked  []*batch           // waiting for a rebuild to end or credit to come back (unpark)

	fx   SupervisorEffects
	out  []ProviderGrants // by provider, gathered during a dispatch
	gbuf []Grant
	vbuf []Verdict
	abuf []Ack
}

// SupervisorSpec is what the supervisor's dispatcher is made with.
type SupervisorSpec struct {
	Limits    Limits
	Providers int
	Slots     *Slots  // each client's max_running (the gateway's: it outlives a rebuild)
	Shares    *Shares // each client's service at max_running (the gateway's)
	Credit    bool    // hand providers standing credit (not when replicas share the limits)
}

// ProviderGrants is one provider's part of a dispatch: one message to it. Its slices are
// the message's own.
type ProviderGrants struct {
	Provider int
	Grants   []Grant
	Verdicts []Verdict
	Ack      *Ack
	Credit   *Credit
}

// SupervisorEffects is what the supervisor actor carries out after an event, in this
// order. It is valid until the core's next method call.
type SupervisorEffects struct {
	Grants    []ProviderGrants // send each provider its part of the dispatch
	Recalls   []Recall         // ask these providers for their credit back
	Dispatch  bool             // call DispatchNow once the messages already in the mailbox are in
	Resync    []int            // ask these providers for a fresh offer under Sync
	ArmResync bool             // call ResyncTick(Sync) after the resync interval
	Sync      uint64
	Drain     []int           // tell these providers to drain
	Reserve   []BatchSend     // ask these providers to reserve a batch's members
	Settle    []BatchSend     // tell these providers to commit or free what they reserved
	Decided   []BatchDecision // answer these batches
	Idle      bool            // the drain is over: every provider has nothing left
}

// NewSupervisor is the core of a supervisor for spec.Providers providers.
func NewSupervisor(spec SupervisorSpec) *Supervisor {
	s := &Supervisor{spec: spec, retired: make([]bool, spec.Providers), out: make([]ProviderGrants, spec.Providers),
		batches: map[BatchID]*batch{}}
	s.disp = s.newDispatcher()
	return s
}

func (s *Supervisor) newDispatcher() *Dispatcher {
	d := NewDispatcher(s.spec.Limits, s.spec.Providers)
	d.SetClients(s.spec.Slots, s.spec.Shares)
	if s.spec.Credit {
		d.EnableCredit()
	}
	return d
}

// effects starts the effects of a new event.
func (s *Supervisor) effects() *SupervisorEffects {
	fx := &s.fx
	*fx = SupervisorEffects{Grants: fx.Grants[:0], Recalls: fx.Recalls[:0], Resync: fx.Resync[:0], Drain: fx.Drain[:0],
		Reserve: fx.Reserve[:0], Settle: fx.Settle[:0], Decided: fx.Decided[:0], Sync: s.sync}
	return fx
}

// Offer takes provider p's offer. A dispatch follows once the offers already in the
// mailbox are in, so that offers made at the same moment are dispatched together, as one
// global dispatcher would; parked batches begin again if they can.
func (s *Supervisor) Offer(p int, o Offer) *SupervisorEffects {
	fx := s.effects()
	s.disp.Report(p, o)
	s.schedule(fx)
	s.unpark(fx)
	return fx
}

func (s *Supervisor) schedule(fx *SupervisorEffects) {
	if !s.scheduled && s.disp.Due() {
		s.scheduled, fx.Dispatch = true, true
	}
}

// DispatchNow grants what can start, gives the verdicts on the arrivals the offers listed,
// and gathers each provider's part in one message; then asks back the credit the
// dispatcher needs.
func (s *Supervisor) DispatchNow() *SupervisorEffects {
	fx := s.effects()
	s.scheduled = false
	s.gbuf = s.disp.Dispatch(s.gbuf[:0])
	s.vbuf = s.disp.Verdicts(s.vbuf[:0])
	s.abuf = s.disp.Acks(s.abuf[:0])
	if len(s.gbuf) == 0 && len(s.vbuf) == 0 && len(s.abuf) == 0 {
		return fx
	}
	for _, g := range s.gbuf {
		s.out[g.Provider].Grants = append(s.out[g.Provider].Grants, g)
	}
	for _, v := range s.vbuf {
		s.out[v.Provider].Verdicts = append(s.out[v.Provider].Verdicts, v)
	}
	for _, a := range s.abuf {
		s.out[a.Provider].Ack = &a
	}
	for p := range s.out {
		o := &s.out[p]
		if len(o.Grants) == 0 && len(o.Verdicts) == 0 && o.Ack == nil {
			continue
		}
		o.Provider = p
		if cr, ok := s.disp.CreditFor(p); ok {
			o.Credit = &cr
		}
		fx.Grants = append(fx.Grants, *o)
		*o = ProviderGrants{} // the message owns its slices: the next dispatch starts new ones
	}
	fx.Recalls = s.disp.Recalls(fx.Recalls)
	return fx
}

// Rebuild replaces the dispatcher after a crash: the offers it was derived from are asked
// for again, under a new generation, so that offers made for the old one (which do not
// count the grants it sent) are ignored. It grants nothing until every provider has
// answered; those that have not are asked again at each ResyncTick, since a provider that
// crashed while handling the request lost it. The batches it was admitting are forgotten.
func (s *Supervisor) Rebuild() *SupervisorEffects {
	s.sync++
	fx := s.effects()
	s.forgetBatches(fx)
	s.disp = s.newDispatcher()
	s.disp.Forget(s.sync)
	for p, gone := range s.retired {
		if gone {
			s.disp.Report(p, Offer{Sync: s.sync}) // idle for good: known, with nothing
		}
	}
	s.scheduled = false
	s.gbuf, s.vbuf, s.abuf = nil, nil, nil
	for p := range s.out {
		s.out[p] = ProviderGrants{}
	}
	s.askUnknown(fx)
	return fx
}

// ResyncTick is the resync interval passing for generation sync.
func (s *Supervisor) ResyncTick(sync uint64) *SupervisorEffects {
	fx := s.effects()
	s.resyncing = false
	if sync == s.sync {
		s.askUnknown(fx)
	}
	return fx
}

func (s *Supervisor) askUnknown(fx *SupervisorEffects) {
	if s.disp.Ready() {
		return
	}
	for p := range s.spec.Providers {
		if !s.disp.Known(p) {
			fx.Resync = append(fx.Resync, p)
		}
	}
	if !s.resyncing {
		s.resyncing, fx.ArmResync = true, true
	}
}

// Drain begins the drain: every provider in service is told to answer what waits and stop
// what runs; the drain is over once each has said it has nothing left (ProviderIdle).
// Parked batches are refused, and so is every batch from now on.
func (s *Supervisor) Drain() *SupervisorEffects {
	fx := s.effects()
	if s.draining {
		return fx
	}
	s.draining = true
	s.dropParked(fx, BatchDraining)
	s.idle = make([]bool, s.spec.Providers)
	for p, gone := range s.retired {
		if gone {
			s.idle[p] = true
			continue
		}
		fx.Drain = append(fx.Drain, p)
	}
	s.checkIdle(fx)
	return fx
}

// ProviderIdle is provider p saying it has nothing left after the drain.
func (s *Supervisor) ProviderIdle(p int) *SupervisorEffects {
	fx := s.effects()
	if s.draining && p >= 0 && p < len(s.idle) {
		s.idle[p] = true
		s.checkIdle(fx)
	}
	return fx
}

func (s *Supervisor) checkIdle(fx *SupervisorEffects) {
	for _, ok := range s.idle {
		if !ok {
			return
		}
	}
	fx.Idle = true
}

// Retire takes provider p out for good: a reload removed it and it has nothing left. It
// reports false for a provider unknown or retired already (the message came again).
func (s *Supervisor) Retire(p int) (*SupervisorEffects, bool) {
	fx := s.effects()
	if p < 0 || p >= len(s.retired) || s.retired[p] {
		return fx, false
	}
	s.retired[p] = true
	s.disp.Report(p, Offer{Sync: s.sync}) // nothing runs or waits there any more
	if s.draining {
		s.idle[p] = true
		s.checkIdle(fx)
	}
	return fx, true
}

// Reconfigure takes a reload's caps and its providers, now n (a reload only adds: a removed
// provider keeps its slot until it retires). A provider added during the drain drains at
// once. Credit handed out under the old caps is asked back, and raised caps may let a start
// through now.
func (s *Supervisor) Reconfigure(l Limits, n int) *SupervisorEffects {
	fx := s.effects()
	s.spec.Limits = l
	s.disp.SetLimits(l)
	for p := s.spec.Providers; p < n; p++ {
		if got := s.disp.AddProvider(); got != p {
			// The dispatcher and the gateway's slots grow only here, together: a mismatch is a bug.
			panic(fmt.Sprintf("internal fault: the dispatcher added provider %d where the gateway has %d", got, p))
		}
		s.out = append(s.out, ProviderGrants{})
		s.retired = append(s.retired, false)
		if s.draining {
			s.idle = append(s.idle, false)
			fx.Drain = append(fx.Drain, p)
		}
	}
	s.spec.Providers = max(s.spec.Providers, n)
	fx.Recalls = s.disp.Recalls(fx.Recalls)
	s.schedule(fx)
	return fx
}

// isRetired reports whether a reload retired provider p.
func (s *Supervisor) isRetired(p int) bool { return p >= 0 && p < len(s.retired) && s.retired[p] }

// Running is how many calls the dispatcher counts running, at most max_running.
func (s *Supervisor) Running() int { return min(s.disp.Running(), s.spec.Limits.MaxRunning) }

// Sync is the generation in force: the one a provider's offers are to answer.
func (s *Supervisor) Sync() uint64 { return s.sync }

// Limits are the caps in force.
func (s *Supervisor) Limits() Limits { return s.spec.Limits }
