package policy

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
)

// Limiters are what one provider's starts spend besides lanes: its rate limit (rpm, tpm,
// burst) and its keys. The keys are a limiter like the rate limit: a request starts only on
// a key that is ready (not cooling, not set aside) and, with key_rate_limit, whose own bucket
// has room for it. Keys are kept in pools: the provider's own (pool 0), and those of models
// with keys of their own; each model draws from one pool. The rings are the caller's (it
// tells them of rate limits and refused keys, Keys); the buckets are derived state, drained
// when a rebuild or a reload replaces them. Models are indexed as the Provider's.
type Limiters struct {
	limit  tokens.Limit // the rate limit rate enforces
	rate   tokens.Limiter
	pools  []pool
	poolOf []int // by model: the pool its keys come from
}

// newLimiters makes the limiters of ps with full buckets and no model yet.
func newLimiters(ps ProviderSpec) Limiters {
	l := Limiters{limit: tokens.Limit{RPM: ps.RPM, TPM: ps.TPM, Burst: ps.Burst}}
	l.rate = tokens.NewLimiter(l.limit)
	for _, kp := range keyPools(ps) {
		l.pools = append(l.pools, newPool(kp))
	}
	return l
}

// keyPools is ps's key pools, one pool of one key when it has none.
func keyPools(ps ProviderSpec) []KeyPool {
	if len(ps.Keys) == 0 {
		return []KeyPool{{}}
	}
	return ps.Keys
}

// Keys returns model m's pool index and its ring, for the caller to record what the backend
// said of a key (keys.Ring.RateLimited, Refused). Changing a ring changes what may start:
// the caller offers afresh afterwards.
func (l *Limiters) Keys(m int) (pool int, ring *keys.Ring) {
	if m < 0 || m >= len(l.poolOf) {
		return 0, l.pools[0].ring
	}
	pl := l.poolOf[m]
	return pl, l.pools[pl].ring
}

// KeyWait is how long from now until a key of model m's pool is ready for it: 0 when one
// is, negative when only a probe's end can free one.
func (l *Limiters) KeyWait(m int, now time.Time) time.Duration {
	_, ring := l.Keys(m)
	if m < 0 || m >= len(l.poolOf) {
		m = -1
	}
	t := ring.NextFree(m, now)
	if t.IsZero() {
		return -1
	}
	return max(t.Sub(now), 0)
}

// Levels are the provider's rate-limit buckets at now (tokens available and capacity).
func (l *Limiters) Levels(now time.Time) tokens.Levels { return l.rate.Levels(now) }

// Rate returns a copy of the provider's rate limiter, to ask it what holds a request back
// (tokens.Limiter.Wait names the dimension).
func (l *Limiters) Rate() tokens.Limiter { return l.rate }

// RetryAfter is how long a request estimated at tokens, refused at now, should wait before
// trying again, or 0 when the provider has no idea (lanes free up when backends answer, which
// it cannot foresee): for a rate-limited provider, the time until its rate limiter has room
// for that request, which is when the queue moves on. The caller applies its own bounds
// (SPEC §4: at least 1s, at most 60s) and adds what it knows of keys and the breaker.
func (l *Limiters) RetryAfter(tokens int, now time.Time) time.Duration {
	w, _ := l.rate.Wait(tokens, now)
	return w
}

// addModel records which pool a new model draws from: ms.Keys, or the provider's own pool
// when that is no pool.
func (l *Limiters) addModel(ms ModelSpec) {
	pl := ms.Keys
	if pl < 0 || pl >= len(l.pools) {
		pl = 0
	}
	l.poolOf = append(l.poolOf, pl)
}

// of is model m's pool.
func (l *Limiters) of(m int) *pool { return &l.pools[l.poolOf[m]] }

// pick picks the key en starts on, as pool.pick in its model's pool.
func (l *Limiters) pick(en *entry, now time.Time, skip func(int) bool) (int, bool) {
	return l.of(int(en.m)).pick(en, now, skip)
}

// charge takes the tokens of an attempt of model m costing cost on key from the rate
// limiter and the key's bucket.
func (l *Limiters) charge(m, key, cost int, now time.Time) {
	l.rate.Take(cost, now)
	if pl := l.of(m); pl.lims != nil && key >= 0 && key < len(pl.lims) {
		pl.lims[key].Take(cost, now)
	}
}

// correct replaces the cost charged for an attempt of model m on key by the tokens it
// used, in the rate limiter and the key's bucket.
func (l *Limiters) correct(m, key, cost, actual int, now time.Time) {
	l.rate.Correct(cost, actual, now)
	if pl := l.of(m); pl.lims != nil && key >= 0 && key < len(pl.lims) {
		pl.lims[key].Correct(cost, actual, now)
	}
}

// blocker says what of the limiters holds back a request for model m (known) estimated at
// tokens at now: no key ready or with room, or the rate limiter; BlockedElsewhere: neither.
func (l *Limiters) blocker(m, tokens int, now time.Time) Blocker {
	probe := entry{m: int32(m), cost: tokens}
	pl := l.of(m)
	if !pl.ring.NextFree(m, now).Equal(now) {
		return BlockedByKeys
	}
	if pl.lims != nil && !pl.some(&probe, now) {
		return BlockedByKeys
	}
	if !l.rate.Allow(tokens, now) {
		return BlockedByRateLimit
	}
	return BlockedElsewhere
}

// limited reports whether anything but lanes may hold a request back at now: a rate limit,
// key limits, a pool with no key ready, or keys set aside for some model alone. Without,
// NextWake needs no simulation.
func (l *Limiters) limited(now time.Time) bool {
	if l.rate.Limited() {
		return true
	}
	for i := range l.pools {
		if ring := l.pools[i].ring; l.pools[i].lims != nil || ring.HasPairs() || !ring.NextFree(-1, now).Equal(now) {
			return true
		}
	}
	return false
}

// drain empties every bucket at now: a rebuilt provider does not know what the lost state
// had let through.
func (l *Limiters) drain(now time.Time) {
	l.rate.Drain(now)
	for i := range l.pools {
		l.pools[i].drain(now)
	}
}

// reconfigure takes a reload's rate limit and key pools (Provider.Reconfigure): a changed
// rate limit, or a pool whose ring or key_rate_limit changed, starts empty at now. It
// returns the pools it replaced, whose running requests' keys are gone; models keep their
// pools (reconfigureModel moves them).
func (l *Limiters) reconfigure(ps ProviderSpec, now time.Time) (replaced []int) {
	if lim := (tokens.Limit{RPM: ps.RPM, TPM: ps.TPM, Burst: ps.Burst}); lim != l.limit {
		l.limit = lim
		l.rate = tokens.NewLimiter(lim)
		l.rate.Drain(now)
	}
	for i, kp := range keyPools(ps) {
		if i < len(l.pools) && l.pools[i].ring == kp.Ring && l.pools[i].limit == kp.Limit {
			continue
		}
		if kp.Ring == nil && i < len(l.pools) {
			kp.Ring = l.pools[i].ring // no keys before or after: the same one "key"
		}
		pl := newPool(kp)
		pl.drain(now)
		replaced = append(replaced, i)
		if i < len(l.pools) {
			l.pools[i] = pl
		} else {
			l.pools = append(l.pools, pl)
		}
	}
	return replaced
}

// reconfigureModel moves model m to the pool ms names, when that is a pool.
func (l *Limiters) reconfigureModel(m int, ms ModelSpec) {
	if ms.Keys >= 0 && ms.Keys < len(l.pools) {
		l.poolOf[m] = ms.Keys
	}
}
