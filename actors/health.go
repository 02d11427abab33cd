package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/health"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
	"github.com/tollgate/tollgate/providers/llm"
)

// The provider actor's shell over its health (SPEC §10, §11): the keys, the circuit breaker,
// the retry budget and the learned lanes are a health.State, pure code that decides; this
// file tells it how each call began and ended and carries out what it returns (the policy's
// lanes and start cap, the log, the observer, the other replicas, the waiting calls it
// answers). All of it is a fact the backend stated or the history of its answers, which no
// rebuild can re-derive, so it is kept across a crash of the provider actor as it is
// (docs/architecture.md, "Supervision"): Record applies an outcome whole or not at all. The
// policy.Provider, which is rebuilt, is given the same key rings and told the lanes and the
// start cap again.

// maxRequeues bounds how often one request goes back to its queue after the backend refused
// it for capacity: each time is the backend's doing, not the client's, but a backend shared
// with others may keep refusing.
const maxRequeues = 3

// healthSpec is what the provider's health is made for.
func healthSpec(pv Provider, models []Model) health.Spec {
	s := health.Spec{Breaker: pv.Breaker, RetryBudget: pv.RetryBudget, Retries: pv.Retries, MaxWait: pv.MaxRetryWait,
		Keys:  keys.Config{Cooldown: pv.KeyCooldown, MaxCooldown: pv.MaxKeyCooldown},
		Lanes: pv.Lanes, Probe: pv.LanesProbe, Fixed: pv.FixedLanes,
		Pool: health.Pool{IDs: keyNames(pv.KeyIDs, pv.Keys), Keyed: pv.Keys > 0}}
	for _, mv := range models {
		hm := health.Model{OwnKeys: mv.OwnKeys, Lanes: mv.Lanes}
		if mv.OwnKeys {
			n := 1
			if kb, ok := pv.Backend.(llm.KeyedBackend); ok {
				n = kb.Keys(mv.Name)
			}
			hm.Pool = health.Pool{IDs: keyNames(mv.KeyIDs, n), Keyed: true}
		}
		s.Models = append(s.Models, hm)
	}
	return s
}

// applyHealth tells a (new or rebuilt) policy what health decided: lanes and the start cap.
func (ph providerHealth) applyHealth(now time.Time) {
	a := ph.a
	h := a.health
	a.pol.Lanes().SetEffective(h.ProviderLanes())
	for _, m := range h.OwnKeys() {
		l, _ := h.Lanes(m)
		a.pol.Lanes().SetEffectiveModel(m, l)
	}
	a.pol.Lanes().SetStartCap(h.StartCap(now))
}

// refusal is the answer to a call its provider cannot take at all now, before it queues: an
// open circuit, keys all refused, or keys all cooling past the call's queue deadline. Nil
// when it may queue until deadline.
func (ph providerHealth) refusal(c *call, deadline, now time.Time) error {
	a := ph.a
	switch a.health.BreakerState(now) {
	case breaker.Open:
		return ph.circuitOpen(now)
	case breaker.HalfOpen:
		a.pol.Lanes().SetStartCap(a.health.StartCap(now))
	}
	return ph.keysRefusal(c, deadline, now)
}

// keysRefusal is what the keys say of a call that would wait until deadline: every key
// refused (502 upstream_auth_failed), or every key cooling until after it (429
// upstream_rate_limited, Retry-After the first key's end); nil when the keys let it wait.
func (ph providerHealth) keysRefusal(c *call, deadline, now time.Time) error {
	a := ph.a
	pl, ring := a.pol.Limiters().Keys(c.route.m)
	if !a.health.Keyed(pl) {
		return nil
	}
	if ring.AllRefused(c.route.m, now) {
		return &llm.Error{Kind: llm.KindUpstreamAuth, Provider: a.name, Message: ph.allRefused(c, pl, now)}
	}
	if w := a.pol.Limiters().KeyWait(c.route.m, now); w > 0 && now.Add(w).After(deadline) {
		return &llm.Error{Kind: llm.KindUpstreamRateLimited, Provider: a.name, RetryAfter: w,
			Message: fmt.Sprintf("every key of %s is cooling after the backend's rate limits%s; the first is ready in %s, later than this request could wait (queue_timeout %s)",
				c.route.id, a.peers.sharedKeyLimit(), w.Round(time.Millisecond), a.pv.QueueTimeout)}
	}
	return nil
}

// keysChanged answers the waiting calls of pool pl that its keys can no longer serve in
// time (see keysRefusal). The caller offers afterwards.
func (ph providerHealth) keysChanged(pl int, now time.Time) {
	a := ph.a
	for id, w := range a.waiting {
		if p, _ := a.pol.Limiters().Keys(w.c.route.m); p != pl {
			continue
		}
		if err := ph.keysRefusal(w.c, w.deadline, now); err != nil {
			a.answerWaiting(id, err, now)
		}
	}
}

// circuitOpen is the answer while the breaker is open: 503 provider_unavailable, Retry-After
// the time until its probe.
func (ph providerHealth) circuitOpen(now time.Time) *llm.Error {
	a := ph.a
	wait := a.health.RetryAfter(now)
	return &llm.Error{Kind: llm.KindProviderUnavailable, Provider: a.name, RetryAfter: max(wait, time.Second),
		Message: fmt.Sprintf("provider %s's circuit breaker is open after repeated failures; one probe call goes through in %s",
			a.name, wait.Round(time.Millisecond))}
}

// started records, in run record r, what health needs of a call a grant just started on
// key. The policy's start cap let it start, so the breaker allows it; while half-open it is
// the probe.
func (ph providerHealth) started(r *run, key int, now time.Time) {
	ph.allow(r, now)
	ph.began(r, key, now)
}

// allow asks the breaker whether r's call may start at now and, when it is the half-open
// probe, marks it so (its ending must report it: success, failure or neutral).
func (ph providerHealth) allow(r *run, now time.Time) bool {
	a := ph.a
	ok, probe := a.health.Allow(now)
	if probe {
		r.probe = true
		a.g.log.Info().Str("provider", a.name).Str("model", r.c.route.id).Msg("circuit breaker half-open: one probe call goes through")
	}
	return ok
}

// began records the rest of what health needs of a call that starts on key at now, once
// the breaker has allowed it: whether it probes a set-aside key, whether it took the last
// lane, the retry budget's call, and the start cap that follows.
func (ph providerHealth) began(r *run, key int, now time.Time) {
	a := ph.a
	c := r.c
	r.key, r.started = key, now
	r.keyName = a.peers.keyName(c, key)
	r.keyProbe, r.probeKey = a.health.Began(c.route.m, key, c.requeues == 0, now), key
	if l, own := a.health.Lanes(c.route.m); own {
		r.busy = a.pol.Snapshot().Models[c.route.m].Running >= l
	} else {
		r.busy = a.pol.Lanes().Running() >= a.pol.Lanes().Effective()
	}
	a.pol.Lanes().SetStartCap(a.health.StartCap(now))
}

// retryAsk records a failed attempt of run r's call and answers whether and how it tries
// again.
func (ph providerHealth) retryAsk(m *retryAsk, r *run, now time.Time) retryAnswer {
	a := ph.a
	c := m.c
	r.recorded = m.n
	if eff := ph.record(r, m.key, m.err, now); eff.CapacityRefused && !a.draining && c.requeues < maxRequeues && !c.batch {
		return retryAnswer{requeue: true}
	}
	_, ring := a.pol.Limiters().Keys(c.route.m)
	at := retry.Attempt{Class: retry.ClassOf(m.err), Made: m.attempts, Backoffs: m.backoffs}
	if e, ok := errors.AsType[*llm.Error](m.err); ok {
		at.Hint = e.RetryAfter
	}
	tried := func(i int) bool { return i < 64 && m.tried&(1<<i) != 0 }
	key, free := a.pol.RetryKey(c.id, now, tried)
	at.KeyFree = free
	if !free {
		at.KeyWait = a.pol.Limiters().KeyWait(c.route.m, now)
	}
	d, verdict := a.health.Retry(at, c.route.m, rand.Float64(), now)
	switch verdict {
	case health.Final:
		return retryAnswer{err: ph.finalError(c, m.err, d, ring, now)}
	case health.BreakerOpen:
		return retryAnswer{} // the circuit opened: nothing starts here, the call moves on
	case health.BudgetSpent:
		a.g.log.Debug().Str("provider", a.name).Str("model", c.route.id).Msg("retry budget spent: the failure is answered")
		return retryAnswer{}
	}
	if !free {
		// No key is ready now (SPEC §10: another key first, then backoff after the keys):
		// the retry waits, then takes the first key ready by then, else the call's own.
		key = m.key
		if k, ok := a.pol.RetryKey(c.id, now.Add(d.Wait), nil); ok {
			key = k
		}
	}
	a.pol.Retry(c.id, key, now)
	r.keyProbe, r.probeKey = a.health.KeyProbe(c.route.m, key, now), key
	charged := a.peers.chargeRetry(r, key, m)
	if o := a.g.opts.Observer; o != nil {
		o.Retried(a.name)
	}
	return retryAnswer{retry: true, backoff: d.Backoff, key: key, wait: d.Wait, charged: charged}
}

// finalError is what a call whose attempt is not retried answers: the attempt's error, told
// more exactly when every key was refused or the retry would have waited too long.
func (ph providerHealth) finalError(c *call, err error, d retry.Decision, ring *keys.Ring, now time.Time) error {
	a := ph.a
	e, ok := errors.AsType[*llm.Error](err)
	if !ok {
		return err
	}
	switch {
	case e.Kind == llm.KindUpstreamAuth && ring.AllRefused(c.route.m, now):
		out := *e
		pl, _ := a.pol.Limiters().Keys(c.route.m)
		out.Message = ph.allRefused(c, pl, now)
		return &out
	case e.Kind == llm.KindUpstreamRateLimited && d.Wait > e.RetryAfter:
		out := *e
		out.RetryAfter = d.Wait // when a key is free again: the honest wait
		return &out
	}
	return err
}

// allRefused is the message of a call whose pool has every key set aside for its model.
func (ph providerHealth) allRefused(c *call, pl int, now time.Time) string {
	a := ph.a
	_, ring := a.pol.Limiters().Keys(c.route.m)
	next := "when its probe call ends"
	if t := ring.NextFree(c.route.m, now); !t.IsZero() {
		next = "in " + t.Sub(now).Round(time.Second).String()
	}
	msg := fmt.Sprintf("every key of %s is set aside after the backend refused it (401/403); the first is tried again %s, and a reload of the configuration restores them",
		c.route.id, next)
	if last := a.health.Refused(pl); last != "" {
		msg += " (the backend said: " + last + ")"
	}
	return msg
}

// record applies a failed attempt of r's call on key to the provider's health
// (health.State.Record).
func (ph providerHealth) record(r *run, key int, err error, now time.Time) health.Effects {
	o := ph.outcome(r, health.Failed, key)
	o.Err, o.Running = err, ph.running(r.c)
	return ph.recordHealth(r, o, now)
}

// settle applies how r's call ended, once its lanes are free (freed).
func (ph providerHealth) settle(r *run, end *ending, now time.Time) {
	switch {
	case r.recorded > 0 && r.recorded == end.attempts && !end.opened:
		// Its last attempt failed and was recorded when its stream asked (retryAsk).
	case end.err != nil:
		ph.record(r, end.key, end.err, now)
	case end.opened:
		o := ph.outcome(r, health.Succeeded, end.key)
		o.Quota = end.quota
		ph.recordHealth(r, o, now)
		return
	default:
		ph.recordHealth(r, ph.outcome(r, health.Neutral, end.key), now)
		return
	}
	ph.recordHealth(r, ph.outcome(r, health.Settled, end.key), now) // a key probe it still holds ends
}

// neutral is a call that never ran (handed back before it did): a breaker probe it held
// lets the next probe go.
func (ph providerHealth) neutral(r *run, now time.Time) {
	ph.recordHealth(r, ph.outcome(r, health.NotRun, r.key), now)
}

// outcome is r's call's ending of kind on key, as health takes it.
func (ph providerHealth) outcome(r *run, kind health.Kind, key int) health.Outcome {
	a := ph.a
	return health.Outcome{Kind: kind, Model: r.c.route.m, Key: key, Probe: r.probe, KeyProbe: r.keyProbe,
		ProbeKey: r.probeKey, StaleKeys: a.reloads.staleKeys(r.started), Busy: r.busy, Started: r.started}
}

// running is how many calls run in the call's scope of learned lanes.
func (ph providerHealth) running(c *call) int {
	a := ph.a
	if _, own := a.health.Lanes(c.route.m); own {
		return a.pol.Snapshot().Models[c.route.m].Running
	}
	return a.pol.Lanes().Running()
}

// fixed reports whether learned lanes are turned off (adaptive_lanes: false).
func (ph providerHealth) fixed() bool { return ph.a.pv.FixedLanes }

// providerHealth is the provider actor's shell over its health: it tells the health.State
// how calls began and ended and carries out the effects it returns on the actor's policy,
// waiting calls, log, observer and replicas.
type providerHealth struct{ a *providerActor }

// keyNames are the names of n keys: ids when it names them all, else their positions.
func keyNames(ids []string, n int) []string {
	if len(ids) == n {
		return ids
	}
	names := make([]string, max(n, 1))
	for i := range names {
		names[i] = "#" + strconv.Itoa(i)
	}
	return names
}
