package actors

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/providers/llm"
)

// batchRefusal says why the provider cannot start its members of a batch now: 429
// batch_capacity_unavailable, with what held them back. A batch that fits the configured
// lanes (batchCall.fits let it through) but not the lanes learned from the backend is told so:
// which provider or model, its learned lanes of the configured ones, and why they were
// learned (SPEC §11): waiting may help, as the learned lanes grow back.
func (bp batchPart) batchRefusal(b policy.Blocker, calls []*call, now time.Time) *llm.Error {
	a := bp.a
	pv := &a.pv
	st := a.pol.Snapshot()
	tokens := batchTokens(calls)
	wait := max(a.g.RetryAfter(), a.pol.Limiters().RetryAfter(tokens, now))
	n := len(calls)
	var why string
	switch b {
	case policy.BlockedByStartCap:
		switch h := a.health; {
		case h.BreakerState(now) != breaker.HalfOpen:
			w := h.RetryAfter(now)
			wait = max(wait, w)
			why = fmt.Sprintf("provider %s's circuit breaker is open after repeated failures (its probe goes in %s)", pv.Name, w.Round(time.Millisecond))
		case h.Probing():
			why = fmt.Sprintf("provider %s's circuit breaker is half-open: its probe call is out, and nothing else starts until it answers", pv.Name)
		default:
			why = fmt.Sprintf("provider %s's circuit breaker is half-open: one probe call may start, and the batch has %d members of it", pv.Name, n)
		}
	case policy.BlockedByLanes:
		if st.EffectiveLanes < st.Lanes && n > st.EffectiveLanes {
			why = fmt.Sprintf("provider %s takes only %d of its %d configured lanes now, %s: the batch's %d members fit the configuration but not what the backend takes now",
				pv.Name, st.EffectiveLanes, st.Lanes, learned(a.health.LanesSnapshot(-1, now), now), n)
		} else {
			why = fmt.Sprintf("provider %s has %d of its lanes free now; the batch needs %d at once",
				pv.Name, max(st.EffectiveLanes-st.Running, 0), n)
		}
	case policy.BlockedByModelLanes:
		why = bp.modelLanesRefusal(st, calls, now)
	case policy.BlockedByKeys:
		w := a.pol.Limiters().KeyWait(calls[0].route.m, now)
		wait = max(wait, w)
		why = fmt.Sprintf("the keys of provider %s have no room now for the batch's members (every key resting after the backend's rate limits, or at its key_rate_limit; the first is ready in %s)",
			pv.Name, w.Round(time.Millisecond))
	case policy.BlockedByRateLimit:
		why = fmt.Sprintf("provider %s's rate limit (rpm %d, tpm %d) has no room now for the batch's %d members (estimated at %d tokens)",
			pv.Name, pv.RateLimit.RPM, pv.RateLimit.TPM, n, tokens)
	case policy.BlockedByQueue:
		why = fmt.Sprintf("provider %s has requests waiting for its lanes; a batch never passes them", pv.Name)
	default:
		why = fmt.Sprintf("provider %s could not reserve the batch's members", pv.Name)
	}
	return &llm.Error{Kind: llm.KindBatchCapacity, Provider: pv.Name, RetryAfter: wait, Message: why + "; try again shortly"}
}

// modelLanesRefusal names the first model of the batch without enough free model lanes,
// and whether learned lanes are the reason.
func (bp batchPart) modelLanesRefusal(st policy.ProviderState, calls []*call, now time.Time) string {
	a := bp.a
	need := map[int]int{}
	for _, c := range calls {
		need[c.route.m]++
	}
	for _, c := range calls {
		m, n := c.route.m, need[c.route.m]
		ms := st.Models[m]
		if ms.EffectiveModelLanes-ms.Running >= n {
			continue
		}
		if _, own := a.health.Lanes(m); own && ms.EffectiveModelLanes < ms.ModelLanes && n > ms.EffectiveModelLanes {
			return fmt.Sprintf("model %s takes only %d of its %d configured model_lanes now, %s: the batch's %d members of it fit the configuration but not what the backend takes now",
				c.route.id, ms.EffectiveModelLanes, ms.ModelLanes, learned(a.health.LanesSnapshot(m, now), now), n)
		}
		return fmt.Sprintf("model %s has %d of its %d model lanes free now; the batch needs %d of them at once",
			c.route.id, max(ms.EffectiveModelLanes-ms.Running, 0), ms.EffectiveModelLanes, n)
	}
	return fmt.Sprintf("a model of provider %s has too few model lanes free now for the batch's members", a.name)
}

// learned says why lanes were learned lower, and since when.
func learned(s capacity.Snapshot, now time.Time) string {
	how := "learned from the backend's answers"
	switch s.Reason {
	case capacity.StatedLimit:
		how = "learned from the limit the backend stated in a refusal"
	case capacity.RateLimited:
		how = "learned by halving after the backend refused calls for capacity"
	case capacity.Probed:
		how = "growing back one lane at a time after the backend refused calls for capacity"
	case capacity.Shared:
		how = "learned by another replica sharing this gateway's limits"
	}
	return fmt.Sprintf("%s (%s, %s ago)", how, s.Reason, now.Sub(s.Since).Round(time.Second))
}

// batchTokens is what the batch's members are estimated to cost in all.
func batchTokens(calls []*call) int {
	n := 0
	for _, c := range calls {
		n += c.tokens
	}
	return n
}
