package policy

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
)

// A provider's keys are a limiter like its rate limit: a request starts only on a key that
// is ready (not cooling, not set aside) and, with key_rate_limit, whose own bucket has room
// for it. Keys are kept in pools: the provider's own, and those of models with keys of
// their own. The rings are the caller's (it tells them of rate limits and refused keys);
// the per-key buckets are the provider's own derived state.

// pick picks a ready key for en that skip does not exclude and whose limiter has room for
// en's tokens: the key en's conversation is bound to when it is such a key (the turn moves
// past it, as for any pick), else the next in the ring's turn.
func (pl *pool) pick(en *entry, now time.Time, skip func(int) bool) (int, bool) {
	if k := int(en.bound) - 1; k >= 0 && pl.usable(k, en, now, skip) {
		pl.ring.SetTurn((k + 1) % pl.ring.Len())
		return k, true
	}
	if pl.lims == nil && skip == nil {
		return pl.ring.Pick(int(en.m), now, nil)
	}
	return pl.ring.Pick(int(en.m), now, func(i int) bool {
		return skip != nil && skip(i) || pl.lims != nil && !pl.lims[i].Allow(en.cost, now)
	})
}

// usable reports whether key k may carry en now: it is in the pool, ready for en's model,
// not excluded by skip and its limiter has room.
func (pl *pool) usable(k int, en *entry, now time.Time, skip func(int) bool) bool {
	return k < pl.ring.Len() && pl.ring.State(k, int(en.m), now) == keys.Ready &&
		(skip == nil || !skip(k)) && (pl.lims == nil || pl.lims[k].Allow(en.cost, now))
}

// charge takes en's tokens from the provider's limiter and key's, and records the key.
func (p *Provider) charge(en *entry, key int, now time.Time) {
	en.key = int32(key)
	p.limiter.Take(en.cost, now)
	if pl := &p.pools[p.models[en.m].pool]; pl.lims != nil && key >= 0 && key < len(pl.lims) {
		pl.lims[key].Take(en.cost, now)
	}
}

// RetryKey says which key the next attempt of running request id would use: a ready key
// that tried does not exclude (nil: none excluded) and whose key_rate_limit has room, in the
// ring's turn. It moves no turn (the caller may decide not to retry; Retry moves it). ok is
// false when there is none now, or id does not run.
func (p *Provider) RetryKey(id ID, now time.Time, tried func(int) bool) (key int, ok bool) {
	en := p.q.runningEntry(id)
	if en == nil {
		return 0, false
	}
	ring := p.pools[p.models[en.m].pool].ring
	turn := ring.Turn()
	key, ok = p.pools[p.models[en.m].pool].pick(en, now, tried)
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
	p.charge(en, key, now)
	if ring := p.pools[p.models[en.m].pool].ring; ring.Len() > 0 {
		ring.SetTurn((key + 1) % ring.Len())
	}
	return true
}

// Correct replaces the estimated tokens charged for running request id's last attempt by the
// tokens the backend reported it used (tokens.Limiter.Correct), in the provider's limiter
// and its key's. Call it before Finish.
func (p *Provider) Correct(id ID, actual int, now time.Time) {
	en := p.q.runningEntry(id)
	if en == nil {
		return
	}
	p.limiter.Correct(en.cost, actual, now)
	if pl := &p.pools[p.models[en.m].pool]; pl.lims != nil && en.key >= 0 && int(en.key) < len(pl.lims) {
		pl.lims[en.key].Correct(en.cost, actual, now)
	}
}

// Keys returns model m's pool index and its ring, for the caller to record what the backend
// said of a key (keys.Ring.RateLimited, Refused). Changing a ring changes what may start:
// the caller offers afresh afterwards.
func (p *Provider) Keys(m int) (pool int, ring *keys.Ring) {
	if m < 0 || m >= len(p.models) {
		return 0, p.pools[0].ring
	}
	pl := p.models[m].pool
	return pl, p.pools[pl].ring
}

// KeyWait is how long from now until a key of model m's pool is ready for it: 0 when one
// is, negative when only a probe's end can free one.
func (p *Provider) KeyWait(m int, now time.Time) time.Duration {
	_, ring := p.Keys(m)
	if m < 0 || m >= len(p.models) {
		m = -1
	}
	t := ring.NextFree(m, now)
	if t.IsZero() {
		return -1
	}
	return max(t.Sub(now), 0)
}

// Levels are the provider's rate-limit buckets at now (tokens available and capacity).
func (p *Provider) Levels(now time.Time) tokens.Levels { return p.limiter.Levels(now) }

// Limiter returns a copy of the provider's rate limiter, to ask it what holds a request back
// (tokens.Limiter.Wait names the dimension).
func (p *Provider) Limiter() tokens.Limiter { return p.limiter }
