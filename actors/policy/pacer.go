package policy

import "time"

// A Pacer decides when a provider's owner sends its offer and when its timer wakes it.
//
// Offers supersede each other, and each lists the calls still awaiting a verdict, which the
// dispatcher works through: offering once per message costs O(queue) per message, and under
// a burst of arrivals a short queue grows long (docs/benchmarks.md, "The collapse at 3,000
// RPS"). So an owner with other messages waiting in its mailbox queues the offer behind them
// (a message to itself) and sends the one offer when its turn comes; with the mailbox empty
// it sends at once. The timer is armed for the policy's next wake-up (Provider.NextWake)
// unless one armed fires no later, and stopped when nothing waits for it.
//
// The Pacer keeps no clock and starts no timer: each method returns a Pace, which the owner
// carries out.
type Pacer struct {
	queued bool      // an offer is queued behind the mailbox's messages
	wakeAt time.Time // when the armed timer fires; zero when none is armed
	// armed numbers the timers armed, so that a wake-up of one stopped or superseded (its
	// message already on its way) is told from the armed one's.
	armed uint64
}

// Pace is what a Pacer decided, for its owner to carry out in this order: stop the armed
// timer, arm a new one (to fire In from now, its wake-up telling Woke the timer's number),
// send the offer now (Offer), or queue it behind the mailbox's messages (Queue: then tell
// Due when its turn comes).
type Pace struct {
	Stop  bool
	Arm   bool
	In    time.Duration
	Timer uint64
	Offer bool
	Queue bool
}

// Offer is a change the dispatcher must hear of. waiting is how many calls the policy holds
// queued (with none, nothing waits for a deadline or a token, so the timer stops); busy
// whether other messages wait in the owner's mailbox.
func (p *Pacer) Offer(waiting int, busy bool) Pace {
	var pc Pace
	if waiting == 0 {
		pc.Stop = p.stop()
	}
	switch {
	case p.queued:
	case busy:
		p.queued, pc.Queue = true, true
	default:
		pc.Offer = true
	}
	return pc
}

// Due is the queued offer's message, come to its turn: the owner sends its offer now (or,
// in a mode that offers nothing, drops it). An offer is queued once until then.
func (p *Pacer) Due() { p.queued = false }

// Wake arms the timer for next, the policy's next wake-up at now, unless one armed fires no
// later; with none (ok false), the timer stops.
func (p *Pacer) Wake(now, next time.Time, ok bool) Pace {
	switch {
	case !ok:
		return Pace{Stop: p.stop()}
	case !p.wakeAt.IsZero() && !next.Before(p.wakeAt):
		return Pace{}
	}
	pc := Pace{Stop: p.stop(), Arm: true, In: max(next.Sub(now), 0)}
	p.armed++
	p.wakeAt, pc.Timer = next, p.armed
	return pc
}

// Woke is the wake-up of timer number n, and reports whether it is the armed one. One
// stopped or superseded since it fired has nothing to wake for: the armed timer (if any)
// fires for the policy's next wake-up.
func (p *Pacer) Woke(n uint64) bool {
	if n != p.armed || p.wakeAt.IsZero() {
		return false
	}
	p.wakeAt = time.Time{}
	return true
}

// Idle is the provider needing no offer and nothing to wake for: the timer stops.
func (p *Pacer) Idle() Pace { return Pace{Stop: p.stop()} }

// Reset forgets the offer queued and stops the timer: the owner's offers start afresh (a
// rebuild after a crash, whose queued offer may have been lost with the crash; a provider
// out of service or retired).
func (p *Pacer) Reset() Pace {
	p.queued = false
	return p.Idle()
}

// stop forgets the armed timer and reports whether there was one to stop.
func (p *Pacer) stop() bool {
	armed := !p.wakeAt.IsZero()
	p.wakeAt = time.Time{}
	return armed
}
