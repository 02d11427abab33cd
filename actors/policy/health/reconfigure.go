package health

import (
	"slices"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
)

// Reconfigure takes a reload's spec. What the backend showed is kept where the new spec
// still describes the same thing: a key that stays (by name) keeps its cooldown, the breaker
// keeps its state unless its settings changed, learned lanes stay learned (cut to the new
// lanes), the retry budget keeps its history unless its share changed. Keys and (key,
// model) pairs set aside come back (SPEC §10: a reload restores them); it returns how many
// of each. A pool whose keys change gets a new ring: the caller gives the queue's policy
// the rings anew (Ring).
func (h *State) Reconfigure(s Spec, now time.Time) (whole, pairs int) {
	old := h.spec
	h.spec = s
	if s.Breaker != old.Breaker {
		h.breaker, h.probing = breaker.New(s.Breaker), false
	}
	if s.RetryBudget != old.RetryBudget {
		h.budget = retry.NewBudget(s.RetryBudget)
	}
	h.retry = retryPolicy(s)
	h.lanes.Reconfigure(s.lanes(s.Lanes), now)
	same := s.Keys == old.Keys
	restored := func(w, p int) { whole, pairs = whole+w, pairs+p }
	restored(h.rekey(0, s.Pool, same))
	for m, mv := range s.Models {
		pl, has := h.pool[m]
		switch {
		case !mv.OwnKeys:
			// A model that lost its own keys keeps its pool's slot unused; it uses the
			// provider's keys from now on.
			if has {
				delete(h.pool, m)
				delete(h.models, m)
			}
		case !has:
			h.addModel(m, mv, now)
		default:
			restored(h.rekey(pl, mv.Pool, same))
			h.models[m].Reconfigure(s.lanes(mv.Lanes), now)
		}
	}
	return whole, pairs
}

// rekey gives pool pl the keys of p: a new ring, carrying the cooldowns of the keys that
// stay. An unchanged pool (same keys, same cooldown rule: sameCfg) with nothing set aside
// keeps its ring as it is. It returns what the old ring had set aside: keys, pairs.
func (h *State) rekey(pl int, p Pool, sameCfg bool) (whole, pairs int) {
	old := h.rings[pl]
	if slices.Equal(p.IDs, h.ids[pl]) && sameCfg && !old.AnySetAside() {
		return 0, 0
	}
	whole, pairs = old.SetAsides()
	ring := keys.New(len(p.IDs), h.spec.Keys)
	from := make([]int, len(p.IDs))
	for i, id := range p.IDs {
		from[i] = slices.Index(h.ids[pl], id)
	}
	ring.Carry(old, from)
	h.rings[pl], h.keyed[pl], h.ids[pl] = ring, p.Keyed, p.IDs
	delete(h.refused, pl)
	return whole, pairs
}
