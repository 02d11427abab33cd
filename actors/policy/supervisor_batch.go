package policy

import (
	"maps"
	"slices"
)

// A batch (SPEC §5) at the supervisor's core: its global slots are held in the dispatcher
// while each of its providers reserves its members (BeginBatch asks them: Reserve); the
// last answer decides it (Reserved): every provider reserved, and all are told to commit,
// or one refused, and those that reserved are told to free what they did (Settle).

// BatchID names a batch at the supervisor.
type BatchID uint64

// BatchOutcome is how a batch was decided.
type BatchOutcome int

const (
	BatchCommitted BatchOutcome = iota // every provider reserved its members: they run
	BatchFailed                        // a provider refused; Why is its first refusal
	BatchRefused                       // max_running has no room for all its members at once now
	BatchDraining                      // the gateway is shutting down
	BatchRetired                       // a reload removed the provider of its member Member
	BatchForgotten                     // the supervisor was rebuilt while admitting it: try again
	BatchStopped                       // the gateway has failed and is stopping
)

// BatchDecision is a batch's one answer.
type BatchDecision struct {
	ID      BatchID
	Outcome BatchOutcome
	Why     error // BatchFailed: the first provider's refusal
	Member  int   // BatchRetired: the first member whose provider a reload removed
}

// BatchSend is a message about batch ID to Provider: reserve its members (Reserve), or
// commit or free them (Settle).
type BatchSend struct {
	Provider int
	ID       BatchID
	Commit   bool
}

// batch is one batch the core is admitting, or keeps parked until it can.
type batch struct {
	id      BatchID
	members []int        // each member's provider, in request order
	shares  map[int]int  // members by provider
	waiting map[int]bool // providers whose reservation is still to come
	ok      []int        // providers that reserved
	why     error        // the first refusal
	failed  bool
}

// BeginBatch admits batch id, whose members' providers are members, in request order: its
// global slots are held and its providers asked to reserve, or it is parked until the
// dispatcher is rebuilt or its credit given back, or it is decided at once.
func (s *Supervisor) BeginBatch(id BatchID, members []int) *SupervisorEffects {
	fx := s.effects()
	b := &batch{id: id, members: members, shares: map[int]int{}}
	for _, p := range members {
		b.shares[p]++
	}
	s.begin(fx, b)
	return fx
}

func (s *Supervisor) begin(fx *SupervisorEffects, b *batch) {
	if s.draining {
		fx.Decided = append(fx.Decided, BatchDecision{ID: b.id, Outcome: BatchDraining})
		return
	}
	for i, p := range b.members {
		if s.isRetired(p) {
			fx.Decided = append(fx.Decided, BatchDecision{ID: b.id, Outcome: BatchRetired, Member: i})
			return
		}
	}
	switch k := len(b.members); {
	case !s.disp.Ready():
		// Rebuilding after a crash: the dispatcher knows the running count again once every
		// provider has offered.
		s.parked = append(s.parked, b)
		return
	case !s.disp.Hold(k):
		if s.disp.Recalling() {
			// Unused credit may hold the slots: begin again once it is given back.
			s.parked = append(s.parked, b)
			fx.Recalls = s.disp.Recalls(fx.Recalls)
			return
		}
		fx.Decided = append(fx.Decided, BatchDecision{ID: b.id, Outcome: BatchRefused})
		return
	}
	b.waiting = map[int]bool{}
	for _, p := range slices.Sorted(maps.Keys(b.shares)) {
		b.waiting[p] = true
		fx.Reserve = append(fx.Reserve, BatchSend{Provider: p, ID: b.id})
	}
	s.batches[b.id] = b
}

// Reserved takes provider p's answer to batch id's reservation: whether it reserved, why
// not, and its offer, in which the members it reserved count. The last answer decides the
// batch; an answer for a batch no longer admitted (a rebuilt supervisor forgot it) frees
// what it reserved.
func (s *Supervisor) Reserved(id BatchID, p int, ok bool, why error, o Offer) *SupervisorEffects {
	fx := s.effects()
	s.disp.Report(p, o)
	b := s.batches[id]
	first := b != nil && b.waiting[p]
	if first {
		delete(b.waiting, p)
		s.disp.Unhold(b.shares[p]) // its members now count in its offer, or are refused
	}
	s.schedule(fx) // the offer may list arrivals, or the slots given back may let one start
	s.unpark(fx)
	switch {
	case b == nil:
		if ok {
			fx.Settle = append(fx.Settle, BatchSend{Provider: p, ID: id})
		}
		return fx
	case !first:
		return fx // the provider's answer again: what it said is known
	}
	if ok {
		b.ok = append(b.ok, p)
	} else if !b.failed {
		b.failed, b.why = true, why
	}
	if len(b.waiting) > 0 {
		return fx
	}
	delete(s.batches, id)
	for _, q := range b.ok {
		fx.Settle = append(fx.Settle, BatchSend{Provider: q, ID: id, Commit: !b.failed})
	}
	d := BatchDecision{ID: id, Outcome: BatchCommitted}
	if b.failed {
		d.Outcome, d.Why = BatchFailed, b.why
	}
	fx.Decided = append(fx.Decided, d)
	return fx
}

// unpark begins again the batches that waited for a rebuild to end or for credit to come
// back, once nothing of either is left.
func (s *Supervisor) unpark(fx *SupervisorEffects) {
	if len(s.parked) == 0 || !s.disp.Ready() || s.disp.Recalling() {
		return
	}
	parked := s.parked
	s.parked = nil
	for _, b := range parked {
		s.begin(fx, b)
	}
}

// forgetBatches decides every batch being admitted or parked as forgotten: a rebuilt
// dispatcher holds nothing for them. Reservations that come later are freed (Reserved).
func (s *Supervisor) forgetBatches(fx *SupervisorEffects) {
	for _, id := range slices.Sorted(maps.Keys(s.batches)) {
		fx.Decided = append(fx.Decided, BatchDecision{ID: id, Outcome: BatchForgotten})
	}
	for _, b := range s.parked {
		fx.Decided = append(fx.Decided, BatchDecision{ID: b.id, Outcome: BatchForgotten})
	}
	clear(s.batches)
	s.parked = nil
}

// dropParked decides every parked batch as outcome.
func (s *Supervisor) dropParked(fx *SupervisorEffects, outcome BatchOutcome) {
	for _, b := range s.parked {
		fx.Decided = append(fx.Decided, BatchDecision{ID: b.id, Outcome: outcome})
	}
	s.parked = nil
}

// Fail is the gateway failing: the parked batches are refused, as it stops.
func (s *Supervisor) Fail() *SupervisorEffects {
	fx := s.effects()
	s.dropParked(fx, BatchStopped)
	return fx
}
