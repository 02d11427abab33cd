package actors

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/providers/llm"
)

// The effects of a key the backend refused (SPEC §10): the decision is the key ring's
// (keys.Ring.Refused, Began, ProbeSucceeded, ProbeEnded); the provider actor tells it what
// happened to the call's key, logs what changed, counts it (Observer) and answers the
// waiting calls that no key can serve any more.

// keyRefused sets aside c's key (or the key for c's model: keys.ScopeOf) after the backend
// refused it with e, or sets it aside again for longer when c was its probe.
func (a *providerActor) keyRefused(c *call, key int, e *llm.Error, now time.Time) {
	pl, ring := a.pol.Keys(c.route.m)
	scope, reason := keys.WholeKey, "refused by the backend"
	if e != nil {
		scope, reason = keys.ScopeOf(e.UpstreamStatus, e.KeyInvalid), refusalReason(e)
		a.health.refused[pl] = e.Message
	}
	probe := c.keyProbe && c.probeKey == key
	c.keyProbe = false
	ch := ring.Refused(key, c.route.m, scope, reason, probe, now)
	a.keyChange(c, key, ch, now)
	a.keysChanged(pl, now)
}

// refusalReason is what /admin/state shows of a refusal: the backend's status, code and
// message (the adapters keep keys out of it), cut short.
func refusalReason(e *llm.Error) string {
	msg := e.Message
	if r := []rune(msg); len(r) > 200 {
		msg = string(r[:200]) + "…"
	}
	if e.UpstreamCode != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.UpstreamStatus, e.UpstreamCode, msg)
	}
	return fmt.Sprintf("HTTP %d: %s", e.UpstreamStatus, msg)
}

// probeBegan marks c, starting on key at now, as the probe of a set-aside key or pair when
// its re-probe is due.
func (a *providerActor) probeBegan(c *call, key int, now time.Time) {
	c.keyProbe = false
	if pl, ring := a.pol.Keys(c.route.m); a.health.keyed[pl] && key >= 0 && key < ring.Len() {
		c.keyProbe, c.probeKey = ring.Began(key, c.route.m, now), key
	}
}

// probeSucceeded restores what c probed when its answer on key came (SPEC §10: a success
// restores it).
func (a *providerActor) probeSucceeded(c *call, key int) {
	if !c.keyProbe || c.probeKey != key || a.staleKeys(c) {
		return
	}
	c.keyProbe = false
	_, ring := a.pol.Keys(c.route.m)
	a.keyChange(c, key, ring.ProbeSucceeded(key, c.route.m), a.g.now())
}

// probeEnded lets the next call probe when c, a probe, ended saying nothing of its key.
func (a *providerActor) probeEnded(c *call) {
	if !c.keyProbe {
		return
	}
	c.keyProbe = false
	if !a.staleKeys(c) { // a reload's new ring has no probe out
		_, ring := a.pol.Keys(c.route.m)
		ring.ProbeEnded(c.probeKey, c.route.m)
	}
}

// keyChange logs and counts what a refusal or a probe changed of key.
func (a *providerActor) keyChange(c *call, key int, ch keys.Change, now time.Time) {
	o := a.g.opts.Observer
	log := func() *zerolog.Event {
		return a.g.log.Warn().Str("provider", a.name).Str("model", c.route.id).Int("key", key).
			Str("scope", ch.Scope.String()).Time("reprobe_at", ch.Until).Dur("wait", ch.Until.Sub(now))
	}
	switch {
	case ch.SetAside:
		log().Msg("key refused by the backend: set aside until its re-probe")
	case ch.Again:
		log().Msg("a set-aside key's probe was refused: set aside again, for twice as long")
	}
	if ch.SetAside && o != nil {
		o.KeySetAside(a.name, ch.Scope.String())
	}
	for _, r := range []struct {
		done  bool
		scope keys.Scope
	}{{ch.RestoredKey, keys.WholeKey}, {ch.RestoredModel, keys.OneModel}} {
		if !r.done {
			continue
		}
		a.g.log.Info().Str("provider", a.name).Str("model", c.route.id).Int("key", key).Str("scope", r.scope.String()).
			Msg("a set-aside key's probe was accepted: the key is restored")
		if o != nil {
			o.KeyRestored(a.name, r.scope.String(), "probe")
		}
	}
}

// restoredByReload counts the keys and pairs a reload brought back.
func (a *providerActor) restoredByReload(whole, pairs int) {
	if whole+pairs == 0 {
		return
	}
	a.g.log.Info().Str("provider", a.name).Int("keys", whole).Int("pairs", pairs).
		Msg("the reload restored the keys the backend had refused")
	o := a.g.opts.Observer
	for range whole {
		if o != nil {
			o.KeyRestored(a.name, keys.WholeKey.String(), "reload")
		}
	}
	for range pairs {
		if o != nil {
			o.KeyRestored(a.name, keys.OneModel.String(), "reload")
		}
	}
}

// keyStates is ring's /admin/state view, the models a key is set aside for named.
func (a *providerActor) keyStates(ring *keys.Ring, now time.Time) []keys.KeyState {
	st := ring.Snapshot(now)
	names := a.pol.Snapshot().Models
	for i := range st {
		for j := range st[i].Models {
			if m := st[i].Models[j].Model; m >= 0 && m < len(names) {
				st[i].Models[j].Name = a.name + "/" + names[m].Name
			}
		}
	}
	return st
}
