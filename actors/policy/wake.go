package policy

import "time"

// Expire removes the queued requests whose deadline is ≤ now and appends their ids to buf,
// oldest first within a provider. The caller rejects them with provider_queue_timeout and
// then calls Dispatch: a freed place may let others in, and a rate limiter may have refilled.
func (g *Gate) Expire(now time.Time, buf []ID) []ID {
	if g.queued == 0 {
		return buf
	}
	for p := range g.providers {
		arr := &g.providers[p].arrivals
		// One queue timeout per provider: arrival order is deadline order, so the expired
		// requests are a prefix of the arrival list.
		for arr.head != none && !g.entries[arr.head].deadline.After(now) {
			e := arr.head
			buf = append(buf, g.entries[e].id)
			g.dequeue(e)
			g.release(e)
		}
	}
	return buf
}

// NextWake returns the earliest time at which the gate's answer changes without any call:
// the earliest queue deadline, or the time a rate-limited provider whose queued work only
// lacks a token gets one. While Arrive holds started requests it returns the time they
// started (≤ now), so the owner's wake-up comes at once and its Dispatch reports them.
// ok is false when only a call (Arrive, Finish, Cancel, ...) can change anything.
func (g *Gate) NextWake() (t time.Time, ok bool) {
	if len(g.held) > 0 {
		t, ok = g.heldAt, true
	}
	if g.queued == 0 {
		return t, ok
	}
	earlier := func(c time.Time) {
		if !ok || c.Before(t) {
			t, ok = c, true
		}
	}
	for p := range g.providers {
		pr := &g.providers[p]
		if pr.arrivals.head != none {
			earlier(g.entries[pr.arrivals.head].deadline)
		}
		if pr.bucket.limited() && g.eligibleSoon(p) {
			earlier(pr.bucket.nextToken())
		}
	}
	return t, ok
}

// RetryAfter estimates how long a request for provider p refused at now should wait
// before trying again, or 0 when the gate has no idea (lanes free up when backends answer,
// which it cannot foresee). For a rate-limited provider it is the time until the limiter
// would have a token for one more request behind everything queued there. The caller
// applies its own bounds (SPEC §4: at least 1s, at most 60s).
func (g *Gate) RetryAfter(p int, now time.Time) time.Duration {
	if p < 0 || p >= len(g.providers) {
		return 0
	}
	pr := &g.providers[p]
	return pr.bucket.waitFor(pr.queued+1, now)
}
