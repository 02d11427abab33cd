package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// simulation is the scratch space of simulate, kept on the Provider so that offers and
// grants do not allocate once it has grown to the provider's model count.
type simulation struct {
	avail   [llm.NumPriorities]int
	running []int   // per model, running plus simulated starts
	cursor  []int32 // per model: the next queued entry of the class being simulated
}

// simulate plays the provider's own dispatch forward at now without changing anything: it
// starts, in thought, what the provider could start if every start were granted, class by
// class (highest first), each class as SPEC §2 orders it within a provider (the model with
// the fewest running among those with a free model lane and a request of the class; tie:
// the model whose oldest such request waited longest; then first come, first served),
// charging the provider's free lanes and the rate limiter's tokens as it goes.
//
// With want < 0 it fills p.sim.avail for Offer and returns none. With a class, it stops at
// the first request of that class it would start and returns it (none if the class gets no
// start): that is the request a grant of the class starts, after the higher classes' own
// possible starts have taken their lanes, as the dispatcher (which grants higher classes
// first) expects.
func (p *Provider) simulate(now time.Time, want int) int32 {
	free := p.eff - p.running
	return p.simulateWith(free, p.bucket.tokens(now, max(free, 1)), want)
}

// demand is how many requests the provider would start now if its rate limiter had tokens
// to spare: what lanes and model lanes allow.
func (p *Provider) demand() int {
	free := p.eff - p.running
	p.simulateWith(free, free, -1)
	n := 0
	for _, a := range p.sim.avail {
		n += a
	}
	return n
}

// simulateWith is simulate with the provider's free lanes and the tokens to spend given.
func (p *Provider) simulateWith(free, tokens, want int) int32 {
	s := &p.sim
	s.avail = [llm.NumPriorities]int{}
	if free <= 0 || tokens <= 0 || p.queued == 0 {
		return none
	}
	n := len(p.models)
	s.running = s.running[:0]
	for i := range p.models {
		s.running = append(s.running, p.models[i].running)
	}
	if cap(s.cursor) < n {
		s.cursor = make([]int32, n)
	}
	s.cursor = s.cursor[:n]
	for c := range llm.NumPriorities {
		if p.queuedByClass[c] == 0 {
			if c == want {
				return none
			}
			continue
		}
		for i := range p.models {
			s.cursor[i] = p.models[i].fifo[c].head
		}
		for free > 0 && tokens > 0 {
			best := p.pickModel(s)
			if best < 0 {
				break
			}
			e := s.cursor[best]
			if c == want {
				return e
			}
			s.avail[c]++
			free--
			tokens--
			s.running[best]++
			s.cursor[best] = p.entries[e].links[byModel].next
		}
		if c == want {
			return none
		}
	}
	return none
}

// pickModel returns the model whose next request (at its cursor) starts next, or -1: the
// fewest running among models with a free model lane and a request left; tie: the one whose
// request arrived first (unique arrival numbers make a further tie impossible).
func (p *Provider) pickModel(s *simulation) int {
	best := -1
	var bestSeq uint64
	for i := range p.models {
		h := s.cursor[i]
		if h == none || s.running[i] >= p.models[i].lanes {
			continue
		}
		seq := p.entries[h].seq
		if best < 0 || s.running[i] < s.running[best] || (s.running[i] == s.running[best] && seq < bestSeq) {
			best, bestSeq = i, seq
		}
	}
	return best
}
