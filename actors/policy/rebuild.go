package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// A provider whose owner crashed is not trusted: the owner makes a new one (NewProvider,
// with the same key rings: the keys' health is a fact the backend stated) and gives it back
// the facts, which it keeps apart from the derived state: the requests running on its lanes
// (Resume) and the requests waiting, with their places and deadlines (Enter). Then Rebuilt
// drains the limiters and sets the epoch. Everything else (the queues' order, counts,
// eligibility, offers) follows from those facts; the owner applies again what it decided
// from its own facts (effective lanes, the start cap).

// Resume records request mb as running since started, its last attempt estimated at
// mb.Tokens on key. It returns false, changing nothing, for an unknown model or class or an
// id already known.
func (p *Provider) Resume(mb Member, started time.Time, key int) bool {
	if !p.restorable(mb.ID, mb.Model, mb.Class) {
		return false
	}
	e := p.q.add(entry{id: mb.ID, m: int32(mb.Model), client: p.q.clientFor(mb.Client), class: uint8(mb.Class),
		state: running, arrived: started, started: started, cost: max(mb.Tokens, 0), key: int32(key)})
	p.lanes.resume(mb.Model)
	p.q.running(e, nil)
	// Its start took a slot of its client's cap, which the slots (the gateway's) still count.
	p.q.entries[e].counted = p.slots != nil && p.q.clients[p.q.entries[e].client].maxRun > 0
	return true
}

// Rebuilt ends a rebuild at now: the limiters start drained (the starts the lost state had
// counted may have been recent) and the protocol continues at epoch, which must be newer
// than any epoch the lost state used so that grants still in flight for it are void, with
// the dispatcher generation sync the lost state had last answered.
func (p *Provider) Rebuilt(now time.Time, epoch, sync uint64) {
	p.limits.drain(now)
	p.epoch, p.seen, p.sync, p.credit = epoch, 0, sync, 0
}

// Epoch is the provider's current protocol epoch: a fact its owner keeps, with the
// dispatcher generation it last answered (Resync), to hand to Rebuilt after a crash.
func (p *Provider) Epoch() uint64 { return p.epoch }

func (p *Provider) restorable(id ID, m int, prio llm.Priority) bool {
	_, dup := p.q.index[id]
	return !dup && m >= 0 && m < len(p.models) && prio >= 0 && prio < llm.NumPriorities
}
