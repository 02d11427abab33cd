package actors

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/health"
	"github.com/tollgate/tollgate/actors/replicas"
)

// recordHealth applies outcome o of run r's call to the provider's health and carries out
// what health returns: the call's probes (in r), the policy's start cap and lanes, the log, the
// observer, the other replicas, and the waiting calls an open breaker or a key's change
// sends on.
func (ph providerHealth) recordHealth(r *run, o health.Outcome, now time.Time) health.Effects {
	a := ph.a
	c := r.c
	eff := a.health.Record(o, now)
	if eff.ProbeOver {
		r.probe = false
	}
	if eff.KeyProbeOver {
		r.keyProbe = false
	}
	if eff.SetCap {
		a.pol.Lanes().SetStartCap(eff.StartCap)
	}
	if l := eff.Lanes; l != nil {
		ph.lanesLearned(c, l)
	}
	if k := eff.Cooled; k != nil {
		a.peers.shareCooldown(k.Pool, k.Key, k.For)
		a.g.log.Info().Str("provider", a.name).Str("model", c.route.id).Int("key", k.Key).
			Dur("cooldown", k.For).Msg("key rate-limited: it rests for the backend's hint")
	}
	if k := eff.Key; k != nil {
		ph.keyChange(c, k.Key, k.Change, now)
	}
	if eff.Recheck >= 0 {
		ph.keysChanged(eff.Recheck, now)
	}
	if eff.Closed {
		a.g.log.Info().Str("provider", a.name).Str("model", c.route.id).Msg("circuit breaker closed: the probe call succeeded")
		if obs := a.g.opts.Observer; obs != nil {
			obs.BreakerChanged(a.name, false)
		}
	}
	if eff.Opened {
		a.peers.shareBreaker(a.health.RetryAfter(now))
		ph.opened(now, "repeated failures")
	}
	return eff
}

// lanesLearned tells the policy, the other replicas, the log and the observer of learned
// lanes that changed for call c's scope.
func (ph providerHealth) lanesLearned(c *call, l *health.LanesChange) {
	a := ph.a
	ch, scope, model := l.Change, replicas.ProviderScope(a.name), ""
	if l.Model >= 0 {
		a.pol.Lanes().SetEffectiveModel(l.Model, ch.To)
		scope, model = replicas.ModelScope(a.name, c.route.model), c.route.id
	} else {
		a.pol.Lanes().SetEffective(ch.To)
	}
	a.peers.shareLanes(scope)
	a.g.log.Info().Str("provider", a.name).Str("model", model).Int("from", ch.From).Int("to", ch.To).
		Str("reason", string(ch.Reason)).Str("signal", l.Signal).Msg("effective lanes changed")
	if o := a.g.opts.Observer; o != nil && model == "" {
		o.LanesLearned(a.name, ch.To, string(ch.Reason))
	}
}

// opened applies a breaker that just opened, for why: nothing starts until its probe, and
// the waiting calls go to their fallbacks or are answered 503 with the time to the probe.
func (ph providerHealth) opened(now time.Time, why string) {
	a := ph.a
	a.pol.Lanes().SetStartCap(0)
	err := ph.circuitOpen(now)
	a.g.log.Warn().Str("provider", a.name).Dur("open_for", a.health.RetryAfter(now)).Str("why", why).
		Msg("circuit breaker open: nothing starts on this provider until its probe")
	for id := range a.waiting {
		a.answerWaiting(id, err, now) // to their fallbacks, or 503 with the time to the probe
	}
	if o := a.g.opts.Observer; o != nil {
		o.BreakerChanged(a.name, true)
	}
}
