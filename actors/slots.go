package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A provider is known by its slot: an index that never moves and is never reused. A reload
// that adds a provider gives it the next slot; one that removes a provider retires its slot,
// whose actor finishes what it runs and what it has queued and then stops, and the slot
// stays empty for good. So an index held by a call, a lane, a message in flight or the
// dispatcher always names the same provider, and nothing has to be renumbered while actors
// and Start read it. The slots are published copy-on-write (Gateway.slots), so Start reads
// them with one atomic load.
type slot struct {
	p    int
	name string
	pid  atomic.Pointer[actor.PID] // set once the supervisor has spawned the provider actor

	// down is set once the provider was taken out of service after its actors failed past
	// their restart budget (supervision.go).
	down atomic.Bool
	// retired is set when a reload removed the provider and its actor has nothing left to
	// run; from then on no call may be sent to it (enter fails), and it stops once the
	// calls that entered before have reached its mailbox (inflight is 0).
	retired  atomic.Bool
	inflight atomic.Int64
	// claim decides, once a reload removed the provider, between its retired actor and a
	// reload that adds it back (claimNone → claimClosing or claimRevived, whichever comes
	// first): the actor stops only if no reload took the slot back, and a reload takes it back
	// only if the actor has not begun to stop. The actor sets it to claimNone again when
	// it serves anew.
	claim atomic.Int32
}

// The values of slot.claim.
const (
	claimNone    int32 = iota
	claimClosing       // the retired actor found itself idle and stops
	claimRevived       // a reload added the provider back into this slot
)

// revive takes a removed provider's slot back for a reload that adds it again, unless its
// actor has begun to stop (it has nothing left then, and the provider gets a new slot) or
// is out of service.
func (s *slot) revive() bool {
	return !s.down.Load() && s.claim.CompareAndSwap(claimNone, claimRevived)
}

// enter reserves the right to send the provider actor a call; false when it is retired.
// The sender calls leave once the message is in the actor's mailbox, so an actor that sees
// retired set and inflight 0 has every call ever sent to it in its mailbox already.
func (s *slot) enter() bool {
	s.inflight.Add(1)
	if s.retired.Load() {
		s.inflight.Add(-1)
		return false
	}
	return true
}

func (s *slot) leave() { s.inflight.Add(-1) }

// slotList is the providers by slot, replaced whole when a reload adds slots.
type slotList struct{ atomic.Pointer[[]*slot] }

// at returns provider p's slot.
func (l *slotList) at(p int) *slot { return (*l.Load())[p] }

// all returns every slot, the retired ones included.
func (l *slotList) all() []*slot { return *l.Load() }

// retireCheckEvery is how often a retired provider actor looks again whether calls are
// still on their way to it (a window of nanoseconds: between Start's enter and leave).
const retireCheckEvery = time.Millisecond
