package policy

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/providers/llm"
)

// simulation is the scratch space of play, kept on the Provider so that offers and
// grants do not allocate once it has grown to the provider's model count. After simulate it
// also says what held the simulated starts back, for NextWake.
type simulation struct {
	avail [llm.NumPriorities]int
	run   []int // per model, running plus simulated starts
	// cursor, per client k and model m at k*models+m: the client's next queued entry of the
	// model in the class being simulated; tag, per client: its service in that class, as
	// the simulated starts charge it.
	cursor []int32
	tag    []int64
	// clientRoom, per client: how many more calls it may start gateway-wide (Slots) less the
	// simulated starts; -1 for a client without a cap of its own.
	clientRoom []int

	// The provider's limiter, charged with the simulated starts: starts and tokens are what
	// they took; stop is the cost of the request it held back (-1: none did).
	lim            tokens.Limiter
	starts, tokens int
	stop           int
	pools          []simPool
	// held, per model: its request (heldCost) found no key it may use in a pool that has
	// one for other models (its keys set aside for it alone); it and the model's requests
	// behind it wait, the pool's other models do not.
	held     []bool
	heldCost []int
	// keep, per model: the model lanes kept for a batch from the class being simulated
	// (batchhold.go); nil: none.
	keep []int
	// served is whom the simulated starts serve, in their order, for Offer.Heads.
	served []Head
}

// simPool is one key pool in the simulation.
type simPool struct {
	ready   int8 // pools without key limits: 0 not looked at yet, 1 a key is ready, -1 none
	turn    int  // pools with key limits: the ring's turn as the simulated picks move it
	lims    []tokens.Limiter
	starts  []int // per key: simulated starts charged to its limiter
	toks    []int // per key: their tokens
	blocked bool  // it held back a request (cost): every request on it waits behind that one
	cost    int
}

// play plays the provider's own dispatch forward at now without changing anything: it
// starts, in thought, what the provider could start if every start were granted, class by
// class (highest first), each class as SPEC §2 and §18 order it within a provider (the
// client with the least service for its weight among those with a request that can start
// and room under their max_running gateway-wide;
// within it, the model with the fewest running among those with a free model lane and a
// request of the class; tie: the model whose oldest such request waited longest; then first
// come, first served), charging the provider's free lanes, its start cap, the keys, the rate
// limiter and the clients' service as it goes.
//
// A limiter holds back everything behind the request it cannot serve (no barging): when the
// chosen request finds no key in its pool, that pool's other requests wait too while other
// pools' go on, except when its pool has a key for other models, not for it (a key set aside
// for its model alone): then only its model's requests wait; when it finds the provider's
// rate limiter short, the provider starts nothing more. So a request needing many tokens is
// never starved by smaller ones behind it.
//
// With want < 0 it fills avail for Offer and returns none. With a class, it stops at the
// first request of that class it would start and returns it (none if the class gets no
// start): that is the request a grant of the class starts, after the higher classes' own
// possible starts have taken their lanes, as the dispatcher (which grants higher classes
// first) expects.
func (s *simulation) play(p *Provider, now time.Time, want int) int32 {
	free := s.reset(p, now)
	if free <= 0 || p.q.n == 0 {
		return none
	}
	s.rooms(p)
	if !p.limits.limited(now) && !p.q.capped(p.slots) {
		return s.lanes(p, free, want, now)
	}
	for c := range llm.NumPriorities {
		if free = s.keepLanes(&p.batchHold, c, free, now); free <= 0 {
			return none
		}
		if p.q.byClass[c] == 0 {
			if c == want {
				return none
			}
			continue
		}
		e, left := s.class(p, c, want, free, now)
		if c == want || s.stop >= 0 {
			return e
		}
		free = left
	}
	return none
}

// reset starts a simulation afresh and returns the starts the provider's free lanes and
// start cap allow.
func (s *simulation) reset(p *Provider, now time.Time) int {
	s.avail = [llm.NumPriorities]int{}
	s.served = s.served[:0]
	s.lim, s.starts, s.tokens, s.stop = p.limits.rate, 0, 0, -1
	s.resetPools(p)
	n := len(p.models)
	if cap(s.held) < n {
		s.held, s.heldCost = make([]bool, n), make([]int, n)
	}
	s.held, s.heldCost = s.held[:n], s.heldCost[:n]
	clear(s.held)
	s.keep = nil
	s.run = s.run[:0]
	for i := range p.lanes.models {
		s.run = append(s.run, p.lanes.models[i].running)
	}
	return p.lanes.free()
}

// class simulates the starts of class c that free lanes allow, charging every limiter, and
// returns what is left of free. With want c it returns the first request it would start
// instead (none if it starts nothing); otherwise it returns none.
func (s *simulation) class(p *Provider, c, want, free int, now time.Time) (int32, int) {
	s.heads(p, c)
	nm := len(p.models)
	for free > 0 && s.stop < 0 {
		k, m := s.pick(p)
		if k < 0 {
			break
		}
		at := k*nm + m
		e := s.cursor[at]
		cost, pl := p.q.entries[e].cost, p.limits.poolOf[m]
		key, ok := s.key(p, pl, m, cost, int(p.q.entries[e].bound)-1, now)
		if !ok {
			s.hold(p, pl, m, cost, now)
			continue
		}
		if !s.lim.Allow(cost, now) {
			s.stop = cost
			break
		}
		if c == want {
			return e, free
		}
		s.lim.Take(cost, now)
		s.starts++
		s.tokens += cost
		s.take(pl, key, cost, now)
		s.avail[c]++
		s.note(p, c, k, 1)
		free--
		s.run[m]++
		s.tag[k] += startCost(p.q.clients[k].share)
		if s.clientRoom[k] > 0 {
			s.clientRoom[k]--
		}
		s.cursor[at] = p.q.entries[e].links[byModel].next
	}
	return none, free
}

// heads points the cursors at every client's oldest request of class c per model, and
// copies the clients' service in that class.
func (s *simulation) heads(p *Provider, c int) {
	nk, nm := len(p.q.clients), len(p.models)
	if cap(s.cursor) < nk*nm {
		s.cursor = make([]int32, nk*nm)
	}
	if cap(s.tag) < nk {
		s.tag = make([]int64, nk)
	}
	s.cursor, s.tag = s.cursor[:nk*nm], s.tag[:nk]
	for k := range p.q.clients {
		cl := &p.q.clients[k]
		s.tag[k] = cl.tag[c]
		for m := range nm {
			s.cursor[k*nm+m] = none
			if cl.byClass[c] > 0 {
				s.cursor[k*nm+m] = p.q.head(int32(k), c, m)
			}
		}
	}
}

// rooms copies every client's room under its cap (see simulation.clientRoom).
func (s *simulation) rooms(p *Provider) {
	s.clientRoom = s.clientRoom[:0]
	for k := range p.q.clients {
		s.clientRoom = append(s.clientRoom, p.q.room(k, p.slots))
	}
}

// pick returns the client and model whose request (at its cursor) starts next, or -1: the
// client with the least service among those with a request that can start (tie: the one
// whose request arrived first), and that client's model as pickModel chooses.
func (s *simulation) pick(p *Provider) (k, m int) {
	k, m = -1, -1
	nm := len(p.models)
	for i := range p.q.clients {
		if s.clientRoom[i] == 0 {
			continue // at its max_running gateway-wide: its calls wait, others' go on
		}
		j := s.pickModel(p, i)
		if j < 0 {
			continue
		}
		if k < 0 || s.tag[i] < s.tag[k] ||
			(s.tag[i] == s.tag[k] && p.q.before(byModel, s.cursor[i*nm+j], s.cursor[k*nm+m])) {
			k, m = i, j
		}
	}
	return k, m
}

// lanes is play when only lanes can hold a request back (no rate limit, no key limits, a
// key ready in every pool), in time linear in the models, not the queue: class by class,
// each model starts as many of its queued requests of the class as its free model lanes
// take, until the provider's free lanes run out. Which client and model start first matters
// only when the free lanes run out within a class, and then only to a grant of that class,
// which picks as play does. The walk of the queue that play makes otherwise cost O(queue)
// per offer, and offers come with every arrival.
func (s *simulation) lanes(p *Provider, free, want int, now time.Time) int32 {
	for c := range llm.NumPriorities {
		if free = s.keepLanes(&p.batchHold, c, free, now); free <= 0 {
			return none
		}
		if c == want {
			if p.q.byClass[c] == 0 {
				return none
			}
			s.heads(p, c)
			if k, m := s.pick(p); k >= 0 {
				return s.cursor[k*len(p.models)+m]
			}
			return none
		}
		if p.q.byClass[c] == 0 {
			continue
		}
		if free = s.laneClass(p, c, free, now); free == 0 {
			return none
		}
	}
	return none
}

// laneClass is lanes for class c, given free lanes, and returns what is left of them. With
// one client waiting in the class, each model starts as many of its requests as its free
// model lanes take, all for that client; with several, the order of the starts decides
// whom they serve (Offer.Heads), so they are played one at a time as class does, which
// costs O(clients × models) a start, never a walk of the queue.
func (s *simulation) laneClass(p *Provider, c, free int, now time.Time) int {
	k := p.q.soleClient(c)
	if k < 0 {
		_, free = s.class(p, c, -1, free, now)
		return free
	}
	n := 0
	for i := range p.lanes.models {
		md := &p.lanes.models[i]
		if md.blocked {
			continue
		}
		x := min(p.q.byModel[i][c], md.eff-s.run[i]-kept(s.keep, i), free)
		if x <= 0 {
			continue
		}
		s.run[i] += x
		n += x
		if free -= x; free == 0 {
			break
		}
	}
	s.avail[c] += n
	if cl := &p.q.clients[k]; cl.name != "" || cl.share != 1 || cl.maxRun != 0 {
		s.note(p, c, k, n) // a class without runs is the anonymous client's (offerHeads)
	}
	return free
}

// note records n simulated starts of class c for client k, as a run of Offer.Heads.
func (s *simulation) note(p *Provider, c, k, n int) {
	if n <= 0 {
		return
	}
	cl := &p.q.clients[k]
	if h := len(s.served) - 1; h >= 0 && s.served[h].Class == llm.Priority(c) && s.served[h].Client == cl.name {
		s.served[h].N += n
		return
	}
	s.served = append(s.served, Head{Client: cl.name, Share: max(cl.share, 1), MaxRunning: cl.maxRun, Class: llm.Priority(c), N: n})
}

// keepLanes is the free lanes of class c, given free for the classes above it: from the
// class lanes are kept for a batch on (h, batchhold.go), those lanes and its model lanes
// (s.keep) are taken out, once.
func (s *simulation) keepLanes(h *batchHold, c, free int, now time.Time) int {
	if s.keep != nil {
		return free
	}
	if lanes, models := h.keptFor(c, now); models != nil {
		s.keep = models
		return free - lanes
	}
	return free
}

// resetPools starts the simulation's view of the key pools afresh.
func (s *simulation) resetPools(p *Provider) {
	if len(s.pools) != len(p.limits.pools) {
		s.pools = make([]simPool, len(p.limits.pools))
	}
	for i := range p.limits.pools {
		sp, pp := &s.pools[i], &p.limits.pools[i]
		sp.ready, sp.blocked, sp.cost = 0, false, 0
		if pp.lims == nil {
			continue
		}
		n := len(pp.lims)
		sp.turn = pp.ring.Turn()
		sp.lims = append(sp.lims[:0], pp.lims...)
		if cap(sp.starts) < n {
			sp.starts, sp.toks = make([]int, n), make([]int, n)
		}
		sp.starts, sp.toks = sp.starts[:n], sp.toks[:n]
		clear(sp.starts)
		clear(sp.toks)
	}
}

// key finds, in thought, the key a request of model m (negative: of any model, keys set
// aside for one model alone not counted) costing cost would start on in pool pl: -1 stands
// for "some ready key" in a pool without key limits, where which one does not matter. bound
// is the key the request's conversation prefers (-1: none), which pick takes first when it
// can, so the simulation charges it too.
func (s *simulation) key(p *Provider, pl, m, cost, bound int, now time.Time) (int, bool) {
	sp, pp := &s.pools[pl], &p.limits.pools[pl]
	if pp.lims == nil {
		if pp.ring.HasPairs() {
			return -1, pp.ring.NextFree(m, now).Equal(now)
		}
		if sp.ready == 0 {
			sp.ready = -1
			if pp.ring.NextFree(-1, now).Equal(now) {
				sp.ready = 1
			}
		}
		return -1, sp.ready > 0
	}
	n := pp.ring.Len()
	if bound >= 0 && bound < n && pp.ring.State(bound, m, now) == keys.Ready && sp.lims[bound].Allow(cost, now) {
		return bound, true
	}
	for k := range n {
		i := (sp.turn + k) % n
		if pp.ring.State(i, m, now) == keys.Ready && sp.lims[i].Allow(cost, now) {
			return i, true
		}
	}
	return 0, false
}

// hold records that model m's request costing cost found no key in pool pl: only the
// model waits when the pool has a key for others (its own are set aside for it alone), else
// the whole pool does.
func (s *simulation) hold(p *Provider, pl, m, cost int, now time.Time) {
	if p.limits.pools[pl].ring.HasPairs() {
		if _, ok := s.key(p, pl, -1, cost, -1, now); ok {
			s.held[m], s.heldCost[m] = true, cost
			return
		}
	}
	s.pools[pl].blocked, s.pools[pl].cost = true, cost
}

// take charges key (found by key) with a simulated start.
func (s *simulation) take(pl, key, cost int, now time.Time) {
	sp := &s.pools[pl]
	if key < 0 {
		return
	}
	sp.turn = (key + 1) % len(sp.lims)
	sp.lims[key].Take(cost, now)
	sp.starts[key]++
	sp.toks[key] += cost
}

// pickModel returns client k's model whose next request (at its cursor) starts next, or
// -1: the fewest running among models with a free model lane, a request of k left and a
// pool that holds nothing back; tie: the one whose request arrived first (then entered
// first, so a further tie is impossible).
func (s *simulation) pickModel(p *Provider, k int) int {
	best, nm := -1, len(p.models)
	cur := s.cursor[k*nm : (k+1)*nm]
	for i := range p.lanes.models {
		md := &p.lanes.models[i]
		h := cur[i]
		if h == none || s.run[i]+kept(s.keep, i) >= md.eff || s.pools[p.limits.poolOf[i]].blocked || md.blocked || s.held[i] {
			continue
		}
		if best < 0 || s.run[i] < s.run[best] || (s.run[i] == s.run[best] && p.q.before(byModel, h, cur[best])) {
			best = i
		}
	}
	return best
}

// poolWake is when pool pl could serve the request of model m costing cost it held back if
// nothing else happened: the first key that is ready for m then and whose bucket has room. A
// blocked pool asks for any model (m negative): once a key is ready for others, the request
// that blocked it holds back its own model only.
// ok is false when only another call can change it (every key's probe out, or buckets that
// the simulated starts alone overfill).
func (s *simulation) poolWake(p *Provider, pl, m, cost int, now time.Time) (t time.Time, ok bool) {
	sp, pp := &s.pools[pl], &p.limits.pools[pl]
	for i := range pp.ring.Len() {
		at, valid := pp.ring.ReadyAt(i, m)
		if !valid {
			continue
		}
		if at.Before(now) {
			at = now
		}
		if pp.lims != nil {
			if !pp.lims[i].Fits(sp.starts[i], sp.toks[i], cost) {
				continue
			}
			if w, _ := sp.lims[i].Wait(cost, now); now.Add(w).After(at) {
				at = now.Add(w)
			}
		}
		if !ok || at.Before(t) {
			t, ok = at, true
		}
	}
	return t, ok
}
