package actors

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// busy builds a rejection that waiting can fix, naming what held the request back (the
// gateway's caps, the provider's lanes, the model's lanes, the circuit breaker, the keys or
// the rate limiter) and advising the wait that one will really take when it can tell.
func (a *providerActor) busy(kind llm.Kind, c *call, now time.Time) *llm.Error {
	pv := &a.pv
	e := &llm.Error{Kind: kind, Provider: pv.Name, RetryAfter: a.g.RetryAfter()}
	if kind == llm.KindOverloaded {
		e.Provider = ""
		e.Message = fmt.Sprintf("the gateway is at its limit of admitted requests (max_admitted %d, running and queued across all providers); try again shortly",
			a.g.caps.Load().limits.MaxAdmitted)
		return e
	}
	held, wait := a.heldBy(c, now)
	e.RetryAfter = max(e.RetryAfter, wait, a.pol.Limiters().RetryAfter(c.tokens, now))
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

// heldBy says in words what holds the call's model back now, and how long until it lets a
// request go when that is known (0 otherwise: lanes free when backends answer).
func (a *providerActor) heldBy(c *call, now time.Time) (string, time.Duration) {
	pv := &a.pv
	st := a.pol.Snapshot()
	switch a.pol.Blocker(c.route.m, c.tokens, now) {
	case policy.BlockedByCluster:
		return a.peers.blockedBy(c.route.m), a.peers.blockedFor(c.route.m, now)
	case policy.BlockedByStartCap:
		if w := a.health.RetryAfter(now); w > 0 {
			return fmt.Sprintf("provider %s's circuit breaker is open after repeated failures (its probe goes in %s)", pv.Name, w.Round(time.Millisecond)), w
		}
		return fmt.Sprintf("provider %s's circuit breaker lets one probe call through and waits for its answer", pv.Name), 0
	case policy.BlockedByLanes:
		if st.EffectiveLanes < st.Lanes {
			return fmt.Sprintf("provider %s has all its %d effective lanes busy (of %d configured: the backend was seen to take fewer)",
				pv.Name, st.EffectiveLanes, st.Lanes), 0
		}
		return fmt.Sprintf("provider %s has all its lanes busy (%d of %d)", pv.Name, st.Running, st.Lanes), 0
	case policy.BlockedByModelLanes:
		ms := st.Models[c.route.m]
		if ms.EffectiveModelLanes < ms.ModelLanes {
			return fmt.Sprintf("model %s has all its %d effective model lanes busy (of %d configured: the backend was seen to take fewer)",
				c.route.id, ms.EffectiveModelLanes, ms.ModelLanes), 0
		}
		return fmt.Sprintf("model %s has all its model lanes busy (%d of %d)", c.route.id, ms.Running, ms.ModelLanes), 0
	case policy.BlockedByKeys:
		w := a.pol.Limiters().KeyWait(c.route.m, now)
		if w > 0 {
			return fmt.Sprintf("every key of %s is resting after the backend's rate limits (the first is ready in %s)", c.route.id, w.Round(time.Millisecond)), w
		}
		if pv.KeyRateLimit.RPM > 0 || pv.KeyRateLimit.TPM > 0 {
			return fmt.Sprintf("every key of %s has used its key_rate_limit (rpm %d, tpm %d) for now",
				c.route.id, pv.KeyRateLimit.RPM, pv.KeyRateLimit.TPM), a.g.RetryAfter()
		}
		return fmt.Sprintf("every key of %s was refused by the backend", c.route.id), 0
	case policy.BlockedByRateLimit:
		lim := a.pol.Limiters().Rate()
		w, dim := lim.Wait(c.tokens, now)
		limit := pv.RateLimit.RPM
		if dim == "tpm" {
			limit = pv.RateLimit.TPM
		}
		return fmt.Sprintf("provider %s's rate limit (%s %d) has no room for the request before %s", pv.Name, dim, limit, w.Round(time.Millisecond)), w
	}
	if cl := c.client; cl.MaxRunning > 0 && a.g.running.Held(cl.Name) {
		return fmt.Sprintf("the replicas sharing this gateway's limits run client key %q's max_running (%d) full", cl.Name, cl.MaxRunning), 0
	}
	return fmt.Sprintf("the gateway runs its limit of %d requests at once across all providers (max_running)", a.g.caps.Load().limits.MaxRunning), 0
}
