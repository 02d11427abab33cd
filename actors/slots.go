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

// slot returns provider p's slot.
func (g *Gateway) slot(p int) *slot { return (*g.slots.Load())[p] }

// allSlots returns every slot, the retired ones included.
func (g *Gateway) allSlots() []*slot { return *g.slots.Load() }

// retireCheckEvery is how often a retired provider actor looks again whether calls are
// still on their way to it (a window of nanoseconds: between Start's enter and leave).
const retireCheckEvery = time.Millisecond
