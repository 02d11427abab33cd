package policy

import "time"

// Expire removes the queued requests whose deadline is ≤ now and appends their ids to buf,
// earliest deadline first. The caller rejects them with provider_queue_timeout. The
// deadline list is kept in deadline order, so the expired requests are its prefix.
func (p *Provider) Expire(now time.Time, buf []ID) []ID {
	for dl := &p.q.deadlines; dl.head != none && !p.q.entries[dl.head].deadline.After(now); {
		e := dl.head
		buf = append(buf, p.q.entries[e].id)
		p.q.forget(e)
	}
	return buf
}

// NextWake returns the earliest time after now at which the provider's offer changes
// without any call, or its earliest queue deadline if that has come: the deadline, or the
// time a limiter that holds back queued work lanes would let start has room for it (the
// rate limiter's tokens for the request it stopped at, a key's cooldown ending or its bucket
// refilling for the request its pool stopped at), or the end of lanes kept for a batch. A limiter the simulated starts alone
// overfill changes only with another start, and wakes nothing. ok is false when only a call
// (Arrive, Finish, ...) can change anything. The provider does not know the gateway's global
// cap, so it may wake for tokens that the cap then keeps unused: such a wake changes no
// decision, but keeps the dispatcher's view of what the provider could start current for the
// moment the cap frees.
func (p *Provider) NextWake(now time.Time) (t time.Time, ok bool) {
	if p.q.n == 0 {
		return t, false
	}
	t, ok = p.q.entries[p.q.deadlines.head].deadline, true
	if h := &p.batchHold; h.holdingFor(now) && h.until.Before(t) {
		t = h.until // the lanes kept for a batch go back to the queue
	}
	if !p.limits.limited(now) {
		return t, ok
	}
	p.sim.play(p, now, -1)
	s := &p.sim
	if s.stop >= 0 && p.limits.rate.Fits(s.starts, s.tokens, s.stop) {
		if w, _ := s.lim.Wait(s.stop, now); now.Add(w).Before(t) {
			t = now.Add(w)
		}
	}
	for pl := range s.pools {
		if sp := &s.pools[pl]; sp.blocked {
			if at, found := s.poolWake(p, pl, -1, sp.cost, now); found && at.Before(t) {
				t = at
			}
		}
	}
	for m, held := range s.held {
		if !held {
			continue
		}
		if at, found := s.poolWake(p, p.limits.poolOf[m], m, s.heldCost[m], now); found && at.Before(t) {
			t = at
		}
	}
	return t, ok
}
