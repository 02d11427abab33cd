package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// health is what a provider actor knows of its backend beyond its queue (SPEC §10, §11):
// its keys, its circuit breaker, its retry budget and its learned lanes. All of it is a fact
// the backend stated or the history of its answers, which no rebuild can re-derive, so it is
// kept across a crash of the provider actor as it is (docs/architecture.md, "Supervision");
// the policy.Provider, which is rebuilt, is given the same key rings and told the lanes and
// the start cap again.
type health struct {
	rings []*keys.Ring // per key pool: 0 the provider's keys, then models' own
	keyed []bool       // per pool: real keys (a pool without is one "key" that never rests)
	pool  map[int]int  // model index → its own pool; absent: pool 0
	// refused is, per pool, what the backend said when it last refused a key as invalid
	// (the adapters' message, keys already cut out), for the answer once all are refused.
	refused map[int]string

	breaker *breaker.Breaker
	probing bool // the half-open probe is out
	budget  *retry.Budget
	retry   retry.Policy

	lanes  *capacity.Lanes         // the provider's effective lanes
	models map[int]*capacity.Lanes // models with keys of their own learn their model lanes

	// ids are, per pool, the names of its keys (Provider.KeyIDs), and cfg the settings the
	// health was made for: a reload compares against them (health_reload.go).
	ids [][]string
	cfg Provider
}

// maxRequeues bounds how often one request goes back to its queue after the backend refused
// it for capacity: each time is the backend's doing, not the client's, but a backend shared
// with others may keep refusing.
const maxRequeues = 3

func newHealth(pv Provider, models []Model, now time.Time) *health {
	h := &health{pool: map[int]int{}, models: map[int]*capacity.Lanes{}, refused: map[int]string{},
		breaker: breaker.New(pv.Breaker), budget: retry.NewBudget(pv.RetryBudget),
		retry: retry.Policy{Retries: pv.Retries, MaxWait: pv.MaxRetryWait},
		lanes: capacity.New(capacity.Config{Lanes: pv.Lanes, Probe: pv.LanesProbe, Disabled: pv.FixedLanes}, now),
		cfg:   pv}
	if pv.Retries == 0 {
		h.retry.Retries = -1 // the policy's zero is its default; ours is none
	}
	cfg := keys.Config{Cooldown: pv.KeyCooldown, MaxCooldown: pv.MaxKeyCooldown}
	h.rings = append(h.rings, keys.New(pv.Keys, cfg))
	h.keyed = append(h.keyed, pv.Keys > 0)
	h.ids = append(h.ids, keyNames(pv.KeyIDs, pv.Keys))
	for m, mv := range models {
		h.addModel(pv, m, mv, now)
	}
	return h
}

// addModel gives a model with keys of its own its pool and its own learned model lanes.
func (h *health) addModel(pv Provider, m int, mv Model, now time.Time) {
	if !mv.OwnKeys {
		return
	}
	n := 1
	if kb, ok := pv.Backend.(llm.KeyedBackend); ok {
		n = kb.Keys(mv.Name)
	}
	h.pool[m] = len(h.rings)
	h.rings = append(h.rings, keys.New(n, keys.Config{Cooldown: pv.KeyCooldown, MaxCooldown: pv.MaxKeyCooldown}))
	h.keyed = append(h.keyed, true)
	h.ids = append(h.ids, keyNames(mv.KeyIDs, n))
	h.models[m] = capacity.New(capacity.Config{Lanes: mv.Lanes, Probe: pv.LanesProbe, Disabled: pv.FixedLanes}, now)
}

// startCap is what the breaker lets start: anything closed, nothing open, one probe half-open.
func (h *health) startCap(now time.Time) int {
	switch h.breaker.State(now) {
	case breaker.Closed:
		return -1
	case breaker.HalfOpen:
		if !h.probing {
			return 1
		}
	}
	return 0
}

// applyHealth tells a (new or rebuilt) policy what health decided: lanes and the start cap.
func (a *providerActor) applyHealth(now time.Time) {
	h := a.health
	a.pol.SetEffectiveLanes(h.lanes.Effective())
	for m, l := range h.models {
		a.pol.SetModelLanes(m, l.Effective())
	}
	a.pol.SetStartCap(h.startCap(now))
}

// refusal is the answer to a call its provider cannot take at all now, before it queues: an
// open circuit, keys all refused, or keys all cooling past the call's queue deadline. Nil
// when it may queue.
func (a *providerActor) refusal(c *call, now time.Time) error {
	h := a.health
	switch h.breaker.State(now) {
	case breaker.Open:
		return a.circuitOpen(now)
	case breaker.HalfOpen:
		a.pol.SetStartCap(h.startCap(now))
	}
	return a.keysRefusal(c, now)
}

// keysRefusal is what the keys say of a call that would wait until deadline: every key
// refused (502 upstream_auth_failed), or every key cooling until after it (429
// upstream_rate_limited, Retry-After the first key's end); nil when the keys let it wait.
func (a *providerActor) keysRefusal(c *call, now time.Time) error {
	pl, ring := a.pol.Keys(c.route.m)
	if !a.health.keyed[pl] {
		return nil
	}
	if ring.AllRefused(c.route.m, now) {
		return &llm.Error{Kind: llm.KindUpstreamAuth, Provider: a.name, Message: a.allRefused(c, pl, now)}
	}
	if w := a.pol.KeyWait(c.route.m, now); w > 0 && now.Add(w).After(c.deadline) {
		return &llm.Error{Kind: llm.KindUpstreamRateLimited, Provider: a.name, RetryAfter: w,
			Message: fmt.Sprintf("every key of %s is cooling after the backend's rate limits%s; the first is ready in %s, later than this request could wait (queue_timeout %s)",
				c.route.id, a.sharedKeyLimit(), w.Round(time.Millisecond), a.pv.QueueTimeout)}
	}
	return nil
}

// keysChanged answers the waiting calls of pool pl that its keys can no longer serve in
// time (see keysRefusal). The caller offers afterwards.
func (a *providerActor) keysChanged(pl int, now time.Time) {
	for id, c := range a.waiting {
		if p, _ := a.pol.Keys(c.route.m); p != pl {
			continue
		}
		if err := a.keysRefusal(c, now); err != nil {
			a.answerWaiting(id, err, now)
		}
	}
}

// circuitOpen is the answer while the breaker is open: 503 provider_unavailable, Retry-After
// the time until its probe.
func (a *providerActor) circuitOpen(now time.Time) *llm.Error {
	wait := a.health.breaker.RetryAfter(now)
	return &llm.Error{Kind: llm.KindProviderUnavailable, Provider: a.name, RetryAfter: max(wait, time.Second),
		Message: fmt.Sprintf("provider %s's circuit breaker is open after repeated failures; one probe call goes through in %s",
			a.name, wait.Round(time.Millisecond))}
}

// started records what health needs of a call a grant just started on key. The policy's
// start cap let it start, so the breaker allows it; while half-open it is the probe.
func (a *providerActor) started(c *call, key int, now time.Time) {
	a.allow(c, now)
	a.began(c, key, now)
}

// allow asks the breaker whether c may start at now and, when it is the half-open probe,
// marks it and the provider's health so (its ending must report it: success, failure or
// neutral).
func (a *providerActor) allow(c *call, now time.Time) bool {
	ok, probe := a.health.breaker.Allow(now)
	if probe {
		c.probe, a.health.probing = true, true
		a.g.log.Info().Str("provider", a.name).Str("model", c.route.id).Msg("circuit breaker half-open: one probe call goes through")
	}
	return ok
}

// began records the rest of what health needs of a call that starts on key at now, once
// the breaker has allowed it: whether it took the last lane, the retry budget's call, and
// the start cap that follows.
func (a *providerActor) began(c *call, key int, now time.Time) {
	h := a.health
	c.key, c.started = key, now
	c.keyName = a.keyName(c, key)
	a.probeBegan(c, key, now)
	a.chargeKey(c) // a batch member, leased before its key was chosen
	if l, own := h.models[c.route.m]; own {
		ms := a.pol.Snapshot().Models[c.route.m]
		c.busy = ms.Running >= l.Effective()
	} else {
		c.busy = a.pol.Running() >= a.pol.EffectiveLanes()
	}
	if c.requeues == 0 {
		h.budget.Call(now)
	}
	a.pol.SetStartCap(h.startCap(now))
}

// retryAsk records a failed attempt and answers whether and how the call tries again.
func (a *providerActor) retryAsk(m *retryAsk, now time.Time) retryAnswer {
	c := m.c
	c.recorded = m.n
	if a.record(c, m.key, m.err, now) && !c.batch {
		return retryAnswer{requeue: true}
	}
	h := a.health
	class := retry.ClassOf(m.err)
	e, _ := errors.AsType[*llm.Error](m.err)
	pl, ring := a.pol.Keys(c.route.m)
	at := retry.Attempt{Class: class, Made: m.attempts, Backoffs: m.backoffs}
	if e != nil {
		at.Hint = e.RetryAfter
	}
	if class == retry.RateLimited && !h.keyed[pl] {
		at.Class = retry.Down // no key to rest or move from: back off, honouring the hint
	}
	tried := func(i int) bool { return i < 64 && m.tried&(1<<i) != 0 }
	key, free := a.pol.RetryKey(c.id, now, tried)
	at.KeyFree = free
	if !free {
		at.KeyWait = a.pol.KeyWait(c.route.m, now)
	}
	d := h.retry.Decide(at, rand.Float64())
	switch {
	case !d.Retry:
		return retryAnswer{err: a.finalError(c, m.err, d, ring, now)}
	case h.breaker.State(now) != breaker.Closed:
		return retryAnswer{} // the circuit opened: nothing starts here, the call moves on
	case !h.budget.Retry(now):
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
	a.probeBegan(c, key, now)
	a.chargeRetry(c, key)
	if o := a.g.opts.Observer; o != nil {
		o.Retried(a.name)
	}
	return retryAnswer{retry: true, backoff: d.Backoff, key: key, wait: d.Wait}
}

// finalError is what a call whose attempt is not retried answers: the attempt's error, told
// more exactly when every key was refused or the retry would have waited too long.
func (a *providerActor) finalError(c *call, err error, d retry.Decision, ring *keys.Ring, now time.Time) error {
	e, ok := errors.AsType[*llm.Error](err)
	if !ok {
		return err
	}
	switch {
	case e.Kind == llm.KindUpstreamAuth && ring.AllRefused(c.route.m, now):
		out := *e
		pl, _ := a.pol.Keys(c.route.m)
		out.Message = a.allRefused(c, pl, now)
		return &out
	case e.Kind == llm.KindUpstreamRateLimited && d.Wait > e.RetryAfter:
		out := *e
		out.RetryAfter = d.Wait // when a key is free again: the honest wait
		return &out
	}
	return err
}

// allRefused is the message of a call whose pool has every key set aside for its model.
func (a *providerActor) allRefused(c *call, pl int, now time.Time) string {
	_, ring := a.pol.Keys(c.route.m)
	next := "when its probe call ends"
	if t := ring.NextFree(c.route.m, now); !t.IsZero() {
		next = "in " + t.Sub(now).Round(time.Second).String()
	}
	msg := fmt.Sprintf("every key of %s is set aside after the backend refused it (401/403); the first is tried again %s, and a reload of the configuration restores them",
		c.route.id, next)
	if last := a.health.refused[pl]; last != "" {
		msg += " (the backend said: " + last + ")"
	}
	return msg
}

// record applies what a failed attempt on key says to the provider's health: a rate limit
// cools the key (or, stating a limit, sets the learned lanes), a refused key is set aside, a
// provider-down answer counts against the breaker. It reports whether the call goes back to
// its queue: the backend refused it for capacity, which is not the client's fault.
func (a *providerActor) record(c *call, key int, err error, now time.Time) (requeue bool) {
	h := a.health
	e, _ := errors.AsType[*llm.Error](err)
	pl, ring := a.pol.Keys(c.route.m)
	keyed := h.keyed[pl] && !a.staleKeys(c) // a key of before a reload names no key of now
	switch retry.ClassOf(err) {
	case retry.RateLimited:
		a.neutral(c, now)
		if e != nil {
			a.quota(c, e.Quota, now)
		}
		if e != nil && e.StatedLimit > 0 && !a.fixed() {
			// A capacity refusal: the lanes learn the limit; no key rests (it was not the
			// key's rate), and the call waits for a lane again at the head of its queue.
			a.learn(c, now, fmt.Sprintf("the backend stated a limit of %d concurrent calls", e.StatedLimit),
				func(l *capacity.Lanes) (capacity.Change, bool) { return l.Stated(e.StatedLimit, now) })
			return !a.draining && c.requeues < maxRequeues
		}
		if keyed {
			var hint time.Duration
			if e != nil {
				hint = e.RetryAfter
			}
			end := ring.RateLimited(key, hint, now)
			a.shareCooldown(pl, key, end.Sub(now))
			a.g.log.Info().Str("provider", a.name).Str("model", c.route.id).Int("key", key).
				Dur("cooldown", end.Sub(now)).Msg("key rate-limited: it rests for the backend's hint")
			a.keysChanged(pl, now)
		}
		if !explained(e) {
			running := a.running(c)
			a.learn(c, now, fmt.Sprintf("an unexplained rate limit while %d calls ran", running),
				func(l *capacity.Lanes) (capacity.Change, bool) { return l.RateLimited(running, c.started, now) })
		}
	case retry.BadKey:
		a.neutral(c, now)
		if keyed {
			a.keyRefused(c, key, e, now)
		}
	case retry.Down:
		a.failure(c, now)
	default:
		a.neutral(c, now)
	}
	a.probeEnded(c) // a refusal took the verdict; anything else says nothing of the key
	return false
}

// explained reports whether a rate limit came with the bucket it hit (a remaining count of
// 0): a rate, not the backend's concurrency, so learned lanes do not halve for it.
func explained(e *llm.Error) bool {
	return e != nil && e.Quota != nil && (e.Quota.RequestsRemaining == 0 || e.Quota.TokensRemaining == 0)
}

// settle applies how a call that started ended, once its lanes are free (freed).
func (a *providerActor) settle(c *call, now time.Time) {
	switch end := &c.end; {
	case c.recorded > 0 && c.recorded == end.attempts && !end.opened:
		// Its last attempt failed and was recorded when its stream asked (retryAsk).
	case end.err != nil:
		a.record(c, end.key, end.err, now)
	case end.opened:
		a.probeSucceeded(c, end.key)
		a.success(c, now)
		a.quota(c, end.quota, now)
	default:
		a.neutral(c, now)
	}
	a.probeEnded(c)
}

// success is a backend that answered: a probe's success closes the breaker; a busy one may
// earn a lane back.
func (a *providerActor) success(c *call, now time.Time) {
	h := a.health
	probe := c.probe
	h.breaker.Success(now, probe)
	if probe {
		c.probe, h.probing = false, false
		a.pol.SetStartCap(h.startCap(now))
	}
	// A probe's success closes the breaker, unless another replica's opened it again
	// meanwhile (sharedhealth.go): then it probes anew.
	if probe && h.breaker.State(now) == breaker.Closed {
		a.g.log.Info().Str("provider", a.name).Str("model", c.route.id).Msg("circuit breaker closed: the probe call succeeded")
		if o := a.g.opts.Observer; o != nil {
			o.BreakerChanged(a.name, false)
		}
	}
	a.learn(c, now, "successes with every lane busy", func(l *capacity.Lanes) (capacity.Change, bool) {
		return l.Succeeded(c.busy, now)
	})
}

// failure is a provider-down answer: it counts against the breaker, which may open.
func (a *providerActor) failure(c *call, now time.Time) {
	h := a.health
	was := h.breaker.State(now)
	h.breaker.Failure(now, c.probe)
	if c.probe {
		c.probe, h.probing = false, false
	}
	if was == breaker.Open || h.breaker.State(now) != breaker.Open {
		a.pol.SetStartCap(h.startCap(now))
		return
	}
	a.shareBreaker(h.breaker.RetryAfter(now))
	a.opened(now, "repeated failures")
}

// opened applies a breaker that just opened, for why: nothing starts until its probe, and
// the waiting calls go to their fallbacks or are answered 503 with the time to the probe.
func (a *providerActor) opened(now time.Time, why string) {
	h := a.health
	a.pol.SetStartCap(0)
	err := a.circuitOpen(now)
	a.g.log.Warn().Str("provider", a.name).Dur("open_for", h.breaker.RetryAfter(now)).Str("why", why).
		Msg("circuit breaker open: nothing starts on this provider until its probe")
	for id := range a.waiting {
		a.answerWaiting(id, err, now) // to their fallbacks, or 503 with the time to the probe
	}
	if o := a.g.opts.Observer; o != nil {
		o.BreakerChanged(a.name, true)
	}
}

// neutral is an ending that says nothing of the provider's health; a probe's lets the next
// probe go.
func (a *providerActor) neutral(c *call, now time.Time) {
	if c.probe {
		h := a.health
		h.breaker.Neutral(true)
		c.probe, h.probing = false, false
		a.pol.SetStartCap(h.startCap(now))
	}
}

// quota applies the backend's remaining-requests count: 0 holds learned lanes.
func (a *providerActor) quota(c *call, q *llm.Quota, now time.Time) {
	if q == nil || q.RequestsRemaining < 0 {
		return
	}
	l := a.health.lanes
	if ml, own := a.health.models[c.route.m]; own {
		l = ml
	}
	l.Remaining(q.RequestsRemaining, q.RequestsReset, now)
}

// fixed reports whether learned lanes are turned off (adaptive_lanes: false).
func (a *providerActor) fixed() bool { return a.pv.FixedLanes }

// running is how many calls run in the call's scope of learned lanes.
func (a *providerActor) running(c *call) int {
	if _, own := a.health.models[c.route.m]; own {
		return a.pol.Snapshot().Models[c.route.m].Running
	}
	return a.pol.Running()
}

// learn applies f to the call's learned lanes (its model's, with keys of its own, else its
// provider's) and, when they change, tells the policy, the log and the observer. It reports
// whether they changed.
func (a *providerActor) learn(c *call, now time.Time, signal string, f func(*capacity.Lanes) (capacity.Change, bool)) bool {
	l, model := a.health.lanes, ""
	if ml, own := a.health.models[c.route.m]; own {
		l, model = ml, c.route.id
	}
	ch, changed := f(l)
	if !changed {
		return false
	}
	scope := replicas.ProviderScope(a.name)
	if model != "" {
		a.pol.SetModelLanes(c.route.m, ch.To)
		scope = replicas.ModelScope(a.name, c.route.model)
	} else {
		a.pol.SetEffectiveLanes(ch.To)
	}
	a.shareLanes(scope)
	a.g.log.Info().Str("provider", a.name).Str("model", model).Int("from", ch.From).Int("to", ch.To).
		Str("reason", string(ch.Reason)).Str("signal", signal).Msg("effective lanes changed")
	if o := a.g.opts.Observer; o != nil && model == "" {
		o.LanesLearned(a.name, ch.To, string(ch.Reason))
	}
	return true
}
