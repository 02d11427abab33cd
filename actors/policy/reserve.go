package policy

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/providers/llm"
)

// Member is one request of a batch (or a running request restored, Resume): its id, model
// and class, its estimated tokens for the tpm buckets, and its client.
type Member struct {
	ID     ID
	Model  int
	Class  llm.Priority
	Tokens int
	Client llm.Client // who it is for
}

// Reservation is what Reserve started: the batch's members and the key each one's call uses
// (Keys[i] for Members[i]), and the start cap and the limiters before and after the members
// took their starts and tokens, so that Release can give them back.
type Reservation struct {
	Members             []ID
	Keys                []int
	capBefore, capAfter int
	before, after       limiterState
	released            bool
}

// limiterState is a copy of the provider's rate limiter, and of the per-key limiters and the
// key turn of the pools a batch used.
type limiterState struct {
	rate  tokens.Limiter
	keys  map[int][]tokens.Limiter // by pool
	turns map[int]int              // by pool
}

// Reserve starts every member of a batch at once, or none (SPEC §5): they start only if the
// start cap, the provider's free (effective) lanes, each model's free (effective) model lanes,
// the rate limiter and the keys cover them all, and no waiting request of the provider could
// start (a batch never passes a queue). When they started it returns their Reservation and
// ok true: they are then running, as Finish, Lookup and Snapshot see them. Otherwise it
// returns what held them back and ok false, changing nothing but its count of the batch's
// refusals: retryAfter is the wait the refused batch is told, and a second refusal for lanes
// after it keeps the lanes for the batch (batchhold.go). A member id already known, or an
// unknown model or class, refuses the whole batch with BlockedElsewhere.
func (p *Provider) Reserve(members []Member, retryAfter time.Duration, now time.Time) (res Reservation, b Blocker, ok bool) {
	defer func() {
		if !ok {
			p.batchHold.refused(members, len(p.models), b, retryAfter, now) // a second try may keep the lanes
		}
	}()
	need := make(map[int]int, len(members))
	for _, mb := range members {
		if !p.restorable(mb.ID, mb.Model, mb.Class) {
			return Reservation{}, BlockedElsewhere, false
		}
		need[mb.Model]++
	}
	// Lanes kept for another batch are not theirs; the batch they are kept for passes the
	// waiting requests of its class and below, which may take only the lanes beyond it.
	keptLanes, keptModels, mine := p.batchHold.keptFrom(members, len(p.models), now)
	if b := p.lanes.batchBlocker(len(members), need, keptLanes, keptModels); b != BlockedElsewhere {
		return Reservation{}, b, false
	}
	if b := p.limits.batchBlocker(members, now); b != BlockedElsewhere {
		return Reservation{}, b, false
	}
	if p.sim.play(p, now, -1); p.sim.waitsAbove(p.batchHold.passes(mine)) {
		return Reservation{}, BlockedByQueue, false
	}
	if mine {
		p.batchHold = batchHold{} // it starts now: nothing is kept any more
	}
	r := Reservation{Members: make([]ID, len(members)), Keys: make([]int, len(members)),
		capBefore: p.lanes.startCap, before: p.limits.state(members)}
	for i, mb := range members {
		e := p.q.add(entry{id: mb.ID, m: int32(mb.Model), client: p.q.clientFor(mb.Client), class: uint8(mb.Class),
			state: running, arrived: now, started: now, deadline: now.Add(p.timeout), cost: max(mb.Tokens, 0)})
		p.lanes.take(mb.Model)
		p.q.running(e, p.slots)
		en := &p.q.entries[e]
		key, _ := p.limits.pick(en, now, nil) // batchBlocker found one for each, in this order
		en.key = int32(key)
		p.limits.charge(mb.Model, key, en.cost, now)
		r.Members[i], r.Keys[i] = mb.ID, key
	}
	r.capAfter, r.after = p.lanes.startCap, p.limits.state(members)
	return r, BlockedElsewhere, true
}

// batchBlocker says what of the limiters holds back a batch of members at now: the rate
// limiter, short of their tokens together, or the keys, when the picks members would make
// one after another (as pool.pick, each charging its key's bucket) do not find a key for
// every member; BlockedElsewhere: neither.
func (l *Limiters) batchBlocker(members []Member, now time.Time) Blocker {
	lim := l.rate
	for _, mb := range members {
		if !lim.Allow(mb.Tokens, now) {
			return BlockedByRateLimit
		}
		lim.Take(mb.Tokens, now)
	}
	turns := map[int]int{}
	lims := map[int][]tokens.Limiter{}
	for _, mb := range members {
		pi := l.poolOf[mb.Model]
		pl := &l.pools[pi]
		if _, seen := turns[pi]; !seen {
			turns[pi] = pl.ring.Turn()
			if pl.lims != nil {
				lims[pi] = append([]tokens.Limiter(nil), pl.lims...)
			}
		}
		n, found := pl.ring.Len(), false
		for k := range n {
			j := (turns[pi] + k) % n
			if pl.ring.State(j, mb.Model, now) != keys.Ready {
				continue
			}
			if kl := lims[pi]; kl != nil {
				if !kl[j].Allow(mb.Tokens, now) {
					continue
				}
				kl[j].Take(mb.Tokens, now)
			}
			turns[pi], found = (j+1)%n, true
			break
		}
		if !found {
			return BlockedByKeys
		}
	}
	return BlockedElsewhere
}

// state copies the rate limiter and the per-key limiters and turns of members' pools.
func (l *Limiters) state(members []Member) limiterState {
	st := limiterState{rate: l.rate, keys: map[int][]tokens.Limiter{}, turns: map[int]int{}}
	for _, mb := range members {
		pi := l.poolOf[mb.Model]
		if _, seen := st.turns[pi]; seen {
			continue
		}
		st.turns[pi] = l.pools[pi].ring.Turn()
		if l.pools[pi].lims != nil {
			st.keys[pi] = append([]tokens.Limiter(nil), l.pools[pi].lims...)
		}
	}
	return st
}

// restore gives each limiter and ring that is still as after left it its before state.
func (l *Limiters) restore(before, after limiterState) {
	if l.rate == after.rate {
		l.rate = before.rate
	}
	for pi, a := range after.keys {
		lims := l.pools[pi].lims
		for k := range lims {
			if k < len(a) && lims[k] == a[k] {
				lims[k] = before.keys[pi][k]
			}
		}
	}
	for pi, a := range after.turns {
		if ring := l.pools[pi].ring; ring.Turn() == a {
			ring.SetTurn(before.turns[pi])
		}
	}
}

// Release frees the members of an aborted batch that still run, and gives their tokens
// back to each limiter that took none since, their keys' turn back to each ring that picked
// none since, and their starts back to the start cap if it is where they left it: then the
// batch leaves no trace there. If one did (the provider started other requests meanwhile, or
// was rebuilt), its tokens stay spent: the limiter cannot tell which of its takes to undo,
// and spending them errs on the side of the backend's limit. Releasing r again does nothing.
func (p *Provider) Release(r *Reservation, now time.Time) {
	if r.released {
		return
	}
	r.released = true
	for _, id := range r.Members {
		p.Finish(id, now)
	}
	p.limits.restore(r.before, r.after)
	if p.lanes.startCap == r.capAfter {
		p.lanes.startCap = r.capBefore
	}
}
