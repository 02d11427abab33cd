package policy

import "time"

// Several replicas (SPEC §17) add a second gate after this policy: a request the policy
// starts must also take its leases in the replicas' shared state before its backend is
// opened. When the replicas run a scope full, the owner puts the request back where it
// was (Unstart) and blocks its model (Block), so that the provider offers only what
// could start, and other models, providers and classes are granted meanwhile; a lane
// freed anywhere unblocks it (Unblock) and it is offered again.

// Unstart puts a request that Grant started back in its queue, at the place its arrival
// gave it (it is ahead of every later arrival again) and with its original deadline,
// kept: it had been admitted, so it needs no verdict, and it keeps counting against
// max_admitted as it did running. The tokens its start took from the rate limiter and its
// key stay spent: the limiters cannot tell their takes apart, and spending them errs on
// the side of the backend's limits. It returns false, changing nothing, for an id that is
// unknown or not running.
//
// The queue may then keep more than queue_length requests for a while: by at most the
// requests started and refused by the replicas at once.
func (p *Provider) Unstart(id ID, now time.Time) bool {
	e, ok := p.stopRunning(id)
	if !ok {
		return false
	}
	en := &p.q.entries[e]
	en.state, en.started = queued, time.Time{}
	en.confirmed, en.mature = true, true
	if en.reported == 0 {
		en.reported = p.offers // never listed as fresh: it was reported when it arrived
	}
	p.q.link(e)
	return true
}
