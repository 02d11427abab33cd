package actors

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// busy builds a rejection that waiting can fix, naming what held the request back: the
// gateway's caps, the provider's lanes, the model's lanes, or the rate limiter.
func (a *providerActor) busy(kind llm.Kind, c *call, now time.Time) *llm.Error {
	pv := &a.g.opts.Providers[a.p]
	wait := a.g.opts.RetryAfter
	if d := a.pol.RetryAfter(0, now); d > wait {
		wait = d // a rate-limited provider knows when its next token comes
	}
	e := &llm.Error{Kind: kind, Provider: pv.Name, RetryAfter: wait}
	if kind == llm.KindOverloaded {
		e.Provider = ""
		e.Message = fmt.Sprintf("the gateway is at its limit of admitted requests (max_admitted %d, running and queued across all providers); try again shortly",
			a.g.opts.MaxAdmitted)
		return e
	}
	held := a.heldBy(c, now)
	switch kind {
	case llm.KindQueueFull:
		e.Message = fmt.Sprintf("%s, and provider %s's queue is full (queue_length %d); try again shortly", held, pv.Name, pv.QueueLength)
	case llm.KindQueueTimeout:
		e.Message = fmt.Sprintf("%s, and the request did not start within provider %s's queue_timeout (%s)", held, pv.Name, pv.QueueTimeout)
	default:
		e.Message = held
	}
	return e
}

// heldBy says in words what holds the call's model back now.
func (a *providerActor) heldBy(c *call, now time.Time) string {
	pv := &a.g.opts.Providers[a.p]
	st := a.pol.Snapshot()
	switch a.pol.Blocker(c.route.m, 0, now) {
	case policy.BlockedByLanes:
		if st.EffectiveLanes < st.Lanes {
			return fmt.Sprintf("provider %s has all its %d effective lanes busy (of %d configured: the backend was seen to take fewer)",
				pv.Name, st.EffectiveLanes, st.Lanes)
		}
		return fmt.Sprintf("provider %s has all its lanes busy (%d of %d)", pv.Name, st.Running, st.Lanes)
	case policy.BlockedByModelLanes:
		ms := st.Models[c.route.m]
		return fmt.Sprintf("model %s has all its model lanes busy (%d of %d)", c.route.id, ms.Running, ms.ModelLanes)
	case policy.BlockedByRateLimit:
		return fmt.Sprintf("provider %s's rate limit (rpm %d) holds requests back until its next token", pv.Name, pv.RPM)
	}
	return fmt.Sprintf("the gateway runs its limit of %d requests at once across all providers (max_running)", a.g.opts.MaxRunning)
}
