package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// A provider whose owner crashed is not trusted: the owner makes a new one (NewProvider)
// and gives it back the facts, which it keeps apart from the derived state: the requests
// running on its lanes (Resume) and the requests waiting, in arrival order (Requeue). Then
// Rebuilt drains the rate limiter and sets the epoch. Everything else (the queues' order,
// counts, eligibility, offers) follows from those facts.

// Resume records request id as running on model m since started. It returns false,
// changing nothing, for an unknown model or class or an id already known.
func (p *Provider) Resume(id ID, m int, prio llm.Priority, started time.Time) bool {
	if !p.restorable(id, m, prio) {
		return false
	}
	e := p.alloc()
	p.seq++
	p.entries[e] = entry{id: id, m: int32(m), class: uint8(prio), state: running, seq: p.seq,
		arrived: started, started: started}
	p.index[id] = e
	p.running++
	p.models[m].running++
	return true
}

// Requeue puts request id back in its queue as if it had arrived at arrived (its deadline is
// arrived + queue_timeout; one already past expires at the next Expire). confirmed says
// whether its verdict had kept it; an unconfirmed one awaits a verdict again. Requests must
// be requeued in their original arrival order. It returns false, changing nothing, for an
// unknown model or class or an id already known.
func (p *Provider) Requeue(id ID, m int, prio llm.Priority, arrived time.Time, confirmed bool) bool {
	if !p.restorable(id, m, prio) {
		return false
	}
	e := p.enqueue(id, m, uint8(prio), arrived, arrived.Add(p.timeout), confirmed)
	p.entries[e].mature = true // reported before: a verdict is all it may lack
	return true
}

// Rebuilt ends a rebuild at now: the rate limiter starts drained (the starts the lost state
// had counted may have been recent) and the protocol continues at epoch, which must be newer
// than any epoch the lost state used so that grants still in flight for it are void, with
// the dispatcher generation sync the lost state had last answered.
func (p *Provider) Rebuilt(now time.Time, epoch, sync uint64) {
	p.bucket.drain(now)
	p.epoch, p.seen, p.sync = epoch, 0, sync
}

// Epoch is the provider's current protocol epoch, and Sync the dispatcher generation it
// last answered: the facts an owner keeps to hand to Rebuilt after a crash.
func (p *Provider) Epoch() uint64 { return p.epoch }

// Sync: see Epoch.
func (p *Provider) Sync() uint64 { return p.sync }

func (p *Provider) restorable(id ID, m int, prio llm.Priority) bool {
	_, dup := p.index[id]
	return !dup && m >= 0 && m < len(p.models) && prio >= 0 && prio < llm.NumPriorities
}
