package policy

import "time"

// Expire removes the queued requests whose deadline is ≤ now and appends their ids to buf,
// oldest first. The caller rejects them with provider_queue_timeout. A provider has one
// queue timeout, so arrival order is deadline order and the expired requests are a prefix
// of the arrival list.
func (p *Provider) Expire(now time.Time, buf []ID) []ID {
	for arr := &p.arrivals; arr.head != none && !p.entries[arr.head].deadline.After(now); {
		e := arr.head
		buf = append(buf, p.entries[e].id)
		p.forget(e)
	}
	return buf
}

// NextWake returns the earliest time after now at which the provider's offer changes
// without any call, or its earliest queue deadline if that has come: the deadline, or the
// time its rate limiter gains a token while queued work that lanes would let start lacks
// tokens. ok is false when only a call (Arrive, Finish, ...) can change anything. The
// provider does not know the gateway's global cap, so it may wake for a token that the cap
// then keeps unused: such a wake changes no decision, but keeps the dispatcher's view of
// what the provider could start current for the moment the cap frees.
func (p *Provider) NextWake(now time.Time) (t time.Time, ok bool) {
	if p.queued == 0 {
		return t, false
	}
	t, ok = p.entries[p.arrivals.head].deadline, true
	free := p.eff - p.running
	if !p.bucket.limited() || free <= 0 {
		return t, ok
	}
	have := p.bucket.tokens(now, free)
	if have >= p.bucket.burst() || have >= free {
		return t, ok
	}
	if p.demand() > have {
		if next := p.bucket.nextIncrease(now, have); next.Before(t) {
			t = next
		}
	}
	return t, ok
}

// RetryAfter estimates how long a request refused at now should wait before trying again,
// or 0 when the provider has no idea (lanes free up when backends answer, which it cannot
// foresee). For a rate-limited provider it is the time until the limiter would have a token
// for one more request behind everything queued. The caller applies its own bounds (SPEC §4:
// at least 1s, at most 60s).
func (p *Provider) RetryAfter(now time.Time) time.Duration {
	return p.bucket.waitFor(p.queued+1, now)
}
