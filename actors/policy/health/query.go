package health

import (
	"maps"
	"slices"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
)

// Pool is the key pool of model m: its own, or the provider's (0).
func (h *State) Pool(m int) int { return h.pool[m] }

// Pools is how many key pools there are.
func (h *State) Pools() int { return len(h.rings) }

// Ring is pool pl's keys. The queue's policy picks keys from it; only State changes it.
func (h *State) Ring(pl int) *keys.Ring { return h.rings[pl] }

// Keyed reports whether pool pl has real keys.
func (h *State) Keyed(pl int) bool { return h.keyed[pl] }

// Refused is what the backend said when it last refused a key of pool pl; "" when none.
func (h *State) Refused(pl int) string { return h.refused[pl] }

// OwnKeys is the models with keys of their own, in order, each with its pool.
func (h *State) OwnKeys() []int { return slices.Sorted(maps.Keys(h.pool)) }

// Lanes is the learned lanes of model m's scope: its own, with keys of its own (own), else
// the provider's.
func (h *State) Lanes(m int) (lanes int, own bool) {
	if l, ok := h.models[m]; ok {
		return l.Effective(), true
	}
	return h.lanes.Effective(), false
}

// ProviderLanes is the provider's learned lanes.
func (h *State) ProviderLanes() int { return h.lanes.Effective() }

// LanesSnapshot is the learning of model m's own scope, or the provider's for m < 0.
func (h *State) LanesSnapshot(m int, now time.Time) capacity.Snapshot {
	if l, ok := h.models[m]; ok {
		return l.Snapshot(now)
	}
	return h.lanes.Snapshot(now)
}

// Adopt takes lanes another replica learned for model m's own scope, or the provider's for
// m < 0.
func (h *State) Adopt(m, n int, now time.Time) (capacity.Change, bool) {
	l := h.lanes
	if ml, ok := h.models[m]; ok {
		l = ml
	}
	c := *l
	ch, changed := c.Adopt(n, now)
	*l = c
	return ch, changed
}

// BreakerState is the breaker's state at now.
func (h *State) BreakerState(now time.Time) breaker.State { return h.breaker.State(now) }

// RetryAfter is how long until the breaker's probe; zero when it is not open.
func (h *State) RetryAfter(now time.Time) time.Duration { return h.breaker.RetryAfter(now) }

// BreakerSince is when the breaker's state last changed; zero when never.
func (h *State) BreakerSince() time.Time { return h.breaker.Since() }

// Verdict is why a failed attempt is or is not tried again.
type Verdict int

const (
	Retry       Verdict = iota // it is: retry.Decision says when and on which key
	Final                      // the retry policy says no (retry.Decision.Why)
	BreakerOpen                // the circuit opened: nothing starts here, the call moves on
	BudgetSpent                // the retry budget is spent: the failure is answered
)

// Retry decides whether a failed attempt of a call of model m is tried again (at as
// retry.Policy.Decide takes it, jitter in [0, 1)), and spends the retry budget when it is.
// A rate limit on a pool without keys has no key to rest or move from: it backs off as a
// provider down does, honouring the hint.
func (h *State) Retry(at retry.Attempt, m int, jitter float64, now time.Time) (retry.Decision, Verdict) {
	if at.Class == retry.RateLimited && !h.keyed[h.Pool(m)] {
		at.Class = retry.Down
	}
	d := h.retry.Decide(at, jitter)
	switch {
	case !d.Retry:
		return d, Final
	case h.breaker.State(now) != breaker.Closed:
		return d, BreakerOpen
	}
	b := *h.budget
	ok := b.Retry(now)
	*h.budget = b
	if !ok {
		return d, BudgetSpent
	}
	return d, Retry
}

// Probing reports whether the breaker's half-open probe is out.
func (h *State) Probing() bool { return h.probing }
