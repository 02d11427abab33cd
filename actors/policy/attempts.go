package policy

import "time"

// A running request's call may take several attempts (retries on other keys, SPEC §4): each
// is charged to the limiters as its start was, and its tokens are corrected once the backend
// says what it used.

// RetryKey says which key the next attempt of running request id would use: a ready key
// that tried does not exclude (nil: none excluded) and whose key_rate_limit has room, in the
// ring's turn. It moves no turn (the caller may decide not to retry; Retry moves it). ok is
// false when there is none now, or id does not run.
func (p *Provider) RetryKey(id ID, now time.Time, tried func(int) bool) (key int, ok bool) {
	en := p.q.runningEntry(id)
	if en == nil {
		return 0, false
	}
	ring := p.limits.of(int(en.m)).ring
	turn := ring.Turn()
	key, ok = p.limits.pick(en, now, tried)
	ring.SetTurn(turn)
	return key, ok
}

// Retry charges one more attempt of running request id, on key, as its start was charged,
// and moves its ring's turn past key: a retry keeps its lane and is not held back by the
// limiters (it waits for its own reasons), but what it sends is counted. It returns false
// for an id that does not run.
func (p *Provider) Retry(id ID, key int, now time.Time) bool {
	en := p.q.runningEntry(id)
	if en == nil {
		return false
	}
	en.key = int32(key)
	p.limits.charge(int(en.m), key, en.cost, now)
	if ring := p.limits.of(int(en.m)).ring; ring.Len() > 0 {
		ring.SetTurn((key + 1) % ring.Len())
	}
	return true
}

// Correct replaces the estimated tokens charged for running request id's last attempt by the
// tokens the backend reported it used (tokens.Limiter.Correct), in the provider's limiter
// and its key's. Call it before Finish.
func (p *Provider) Correct(id ID, actual int, now time.Time) {
	if en := p.q.runningEntry(id); en != nil {
		p.limits.correct(int(en.m), int(en.key), en.cost, actual, now)
	}
}
