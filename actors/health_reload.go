package actors

import (
	"slices"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
	"github.com/tollgate/tollgate/providers/llm"
)

// reconfigure takes a reload's settings. What the backend showed is kept where the new
// settings still describe the same thing: a key that stays (by name) keeps its cooldown, the
// breaker keeps its state unless its settings changed, learned lanes stay learned (cut to
// the new lanes), the retry budget keeps its history unless its share changed. Keys and
// (key, model) pairs set aside come back (SPEC §10: a reload restores them); it returns how
// many of each.
func (h *health) reconfigure(pv Provider, models []Model, now time.Time) (whole, pairs int) {
	old := h.cfg
	h.cfg = pv
	if pv.Breaker != old.Breaker {
		h.breaker, h.probing = breaker.New(pv.Breaker), false
	}
	if pv.RetryBudget != old.RetryBudget {
		h.budget = retry.NewBudget(pv.RetryBudget)
	}
	h.retry = retry.Policy{Retries: pv.Retries, MaxWait: pv.MaxRetryWait}
	if pv.Retries == 0 {
		h.retry.Retries = -1 // the policy's zero is its default; ours is none
	}
	h.lanes.Reconfigure(capacity.Config{Lanes: pv.Lanes, Probe: pv.LanesProbe, Disabled: pv.FixedLanes}, now)
	cfg := keys.Config{Cooldown: pv.KeyCooldown, MaxCooldown: pv.MaxKeyCooldown}
	same := cfg == keys.Config{Cooldown: old.KeyCooldown, MaxCooldown: old.MaxKeyCooldown}
	restored := func(w, p int) { whole, pairs = whole+w, pairs+p }
	restored(h.rekey(0, keyNames(pv.KeyIDs, pv.Keys), pv.Keys > 0, cfg, same))
	for m, mv := range models {
		pl, has := h.pool[m]
		switch {
		case !mv.OwnKeys:
			// A model that lost its own keys keeps its pool's slot unused; it uses the
			// provider's keys from now on (spec gives it pool 0).
			if has {
				delete(h.pool, m)
				delete(h.models, m)
			}
		case !has:
			h.addModel(pv, m, mv, now)
		default:
			n := 1
			if kb, ok := pv.Backend.(llm.KeyedBackend); ok {
				n = kb.Keys(mv.Name)
			}
			restored(h.rekey(pl, keyNames(mv.KeyIDs, n), true, cfg, same))
			h.models[m].Reconfigure(capacity.Config{Lanes: mv.Lanes, Probe: pv.LanesProbe, Disabled: pv.FixedLanes}, now)
		}
	}
	return whole, pairs
}

// rekey gives pool pl the keys named ids: a new ring, carrying the cooldowns of the keys
// that stay. An unchanged pool (same keys, same cooldown rule: sameCfg) with nothing set
// aside keeps its ring as it is. It returns what the old ring had set aside: keys, pairs.
func (h *health) rekey(pl int, ids []string, keyed bool, cfg keys.Config, sameCfg bool) (whole, pairs int) {
	old := h.rings[pl]
	if slices.Equal(ids, h.ids[pl]) && sameCfg && !old.AnySetAside() {
		return 0, 0
	}
	whole, pairs = old.SetAsides()
	ring := keys.New(len(ids), cfg)
	from := make([]int, len(ids))
	for i, id := range ids {
		from[i] = slices.Index(h.ids[pl], id)
	}
	ring.Carry(old, from)
	h.rings[pl], h.keyed[pl], h.ids[pl] = ring, keyed, ids
	delete(h.refused, pl)
	return whole, pairs
}

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
