package actors

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy/keys"
)

// The effects of a key the backend refused (SPEC §10): the decision is the provider's
// health's (health.State.Record, keys.Ring); the provider actor logs what changed, counts it
// (Observer) and answers the waiting calls that no key can serve any more (keysChanged).

// keyChange logs and counts what a refusal or a probe changed of key.
func (ph providerHealth) keyChange(c *call, key int, ch keys.Change, now time.Time) {
	a := ph.a
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
func (ph providerHealth) restoredByReload(whole, pairs int) {
	a := ph.a
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
func (ph providerHealth) keyStates(ring *keys.Ring, now time.Time) []keys.KeyState {
	a := ph.a
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
