package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Dispatch starts queued requests until nothing more can start, in SPEC §2 order, and
// appends their ids to buf in the order they started; first come any that Arrive held.
// Call it after Finish, Cancel, Expire, SetEffectiveLanes and at NextWake. It does not look
// at queue deadlines: call Expire first when a timeout should win over a late start.
func (g *Gate) Dispatch(now time.Time, buf []ID) []ID {
	for _, e := range g.held {
		g.entries[e].state = running
		buf = append(buf, g.entries[e].id)
	}
	g.held = g.held[:0]
	for e := g.pick(now); e != none; e = g.pick(now) {
		g.start(e, now)
		buf = append(buf, g.entries[e].id)
	}
	return buf
}

// pick returns the queued entry that starts next at now, or none when nothing can: the
// highest class with an eligible request; in it, the first provider with one, searching
// round-robin from the one after the provider this class served last.
func (g *Gate) pick(now time.Time) int32 {
	if g.queued == 0 || g.running >= g.limits.MaxRunning {
		return none
	}
	np := len(g.providers)
	for c := range llm.NumPriorities {
		if g.queuedByClass[c] == 0 {
			continue
		}
		p := g.lastServed[c]
		for range np {
			if p++; p == np {
				p = 0
			}
			if e := g.pickIn(p, c, now); e != none {
				return e
			}
		}
	}
	return none
}

// pickIn returns the entry of class c that provider p would start now, or none: among the
// provider's models with a free model lane and a request of the class, the one with the
// fewest running; tie: the one whose oldest such request arrived first (then the lower
// index, which unique arrival numbers make moot); from it, the oldest request.
func (g *Gate) pickIn(p, c int, now time.Time) int32 {
	pr := &g.providers[p]
	if pr.queuedByClass[c] == 0 || pr.running >= pr.eff || !pr.bucket.ready(now) {
		return none
	}
	best := none
	bestRunning := 0
	var bestSeq uint64
	for i := pr.first; i < pr.first+pr.n; i++ {
		md := &g.models[i]
		h := md.fifo[c].head
		if h == none || md.running >= md.lanes {
			continue
		}
		seq := g.entries[h].seq
		if best == none || md.running < bestRunning || (md.running == bestRunning && seq < bestSeq) {
			best, bestRunning, bestSeq = h, md.running, seq
		}
	}
	return best
}

// eligibleSoon reports whether provider p has a queued request that only its rate limiter
// holds back: the request would be eligible at once if a token were there.
func (g *Gate) eligibleSoon(p int) bool {
	pr := &g.providers[p]
	if pr.queued == 0 || pr.running >= pr.eff || g.running >= g.limits.MaxRunning {
		return false
	}
	for i := pr.first; i < pr.first+pr.n; i++ {
		if md := &g.models[i]; md.queued > 0 && md.running < md.lanes {
			return true
		}
	}
	return false
}
