package policy

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
)

// pool is one set of keys: their ring and, with key_rate_limit, each key's limiter.
type pool struct {
	ring  *keys.Ring
	limit tokens.Limit
	lims  []tokens.Limiter // per key; nil when key_rate_limit limits nothing
}

func newPool(kp KeyPool) pool {
	pl := pool{ring: kp.Ring, limit: kp.Limit}
	if pl.ring == nil {
		pl.ring = keys.New(1, keys.Config{})
	}
	if l := tokens.NewLimiter(kp.Limit); l.Limited() {
		pl.lims = make([]tokens.Limiter, pl.ring.Len())
		for i := range pl.lims {
			pl.lims[i] = l
		}
	}
	return pl
}

// pick picks a ready key for en that skip does not exclude and whose limiter has room for
// en's tokens: the key en's conversation is bound to when it is such a key (the turn moves
// past it, as for any pick), else the next in the ring's turn.
func (pl *pool) pick(en *entry, now time.Time, skip func(int) bool) (int, bool) {
	if k := int(en.bound) - 1; k >= 0 && pl.usable(k, en, now, skip) {
		pl.ring.SetTurn((k + 1) % pl.ring.Len())
		return k, true
	}
	if pl.lims == nil && skip == nil {
		return pl.ring.Pick(int(en.m), now, nil)
	}
	return pl.ring.Pick(int(en.m), now, func(i int) bool {
		return skip != nil && skip(i) || pl.lims != nil && !pl.lims[i].Allow(en.cost, now)
	})
}

// usable reports whether key k may carry en now: it is in the pool, ready for en's model,
// not excluded by skip and its limiter has room.
func (pl *pool) usable(k int, en *entry, now time.Time, skip func(int) bool) bool {
	return k < pl.ring.Len() && pl.ring.State(k, int(en.m), now) == keys.Ready &&
		(skip == nil || !skip(k)) && (pl.lims == nil || pl.lims[k].Allow(en.cost, now))
}

// some reports whether a key would do for en, as pick without moving the ring's turn.
func (pl *pool) some(en *entry, now time.Time) bool {
	for i := range pl.ring.Len() {
		if pl.ring.State(i, int(en.m), now) == keys.Ready && (pl.lims == nil || pl.lims[i].Allow(en.cost, now)) {
			return true
		}
	}
	return false
}

// drain empties the pool's per-key buckets at now.
func (pl *pool) drain(now time.Time) {
	for k := range pl.lims {
		pl.lims[k].Drain(now)
	}
}
