package policy

import (
	"slices"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// A batch starts only when all its members fit at once (Reserve), so a batch that needs a
// provider's whole lanes would never start while single calls keep any lane busy. It gets a
// bounded chance instead: a batch refused for lanes (the provider's, a model's, or a waiting
// request that takes them first) that comes back after its Retry-After and is refused again
// has its lanes kept for it. From then on, single calls of its class and below start only on
// lanes beyond what it needs (higher classes still pass it), so the lanes the batch needs
// fill with nothing new as the running calls end, and its next try starts. The hold lasts
// twice the last Retry-After past the last refusal: a batch that does not come back gives
// the lanes back to single calls, and one provider keeps lanes for one batch at a time.

// batchHold is the batch a provider keeps lanes for, or is counting the refusals of.
type batchHold struct {
	class    llm.Priority
	need     []int // per model: the model lanes it needs
	lanes    int   // the provider lanes it needs
	refusals int   // counted refusals, each after the Retry-After of the one before
	retryAt  time.Time
	until    time.Time // while holding (refusals ≥ 2): when the hold lapses
}

// holdAfter is how many counted refusals make a provider keep lanes for a batch.
const holdAfter = 2

// holdingFor reports whether the hold is in force at now.
func (h *batchHold) holdingFor(now time.Time) bool {
	return h.refusals >= holdAfter && now.Before(h.until)
}

// batchShape is what a batch of members needs: its class (its highest member's), provider
// lanes and model lanes per model (of n models).
func batchShape(members []Member, n int) batchHold {
	h := batchHold{class: llm.NumPriorities - 1, need: make([]int, n), lanes: len(members)}
	for _, mb := range members {
		h.class = min(h.class, mb.Class)
		if mb.Model >= 0 && mb.Model < n {
			h.need[mb.Model]++
		}
	}
	return h
}

// same reports whether h is a batch of o's shape.
func (h *batchHold) same(o *batchHold) bool {
	return h.class == o.class && h.lanes == o.lanes && slices.Equal(h.need, o.need)
}

// refused records that Reserve refused members (of a provider of n models) for b, and that
// they are told to try again after retryAfter. Refusals for lanes (BlockedByLanes, BlockedByModelLanes,
// BlockedByQueue) count when the batch came back no sooner than the last one's Retry-After;
// the second makes the provider keep lanes for it, for twice retryAfter from now (renewed by
// each later refusal). Other blockers, and another batch while one is held for, change
// nothing.
func (cur *batchHold) refused(members []Member, n int, b Blocker, retryAfter time.Duration, now time.Time) {
	switch b {
	case BlockedByLanes, BlockedByModelLanes, BlockedByQueue:
	default:
		return
	}
	h := batchShape(members, n)
	switch {
	case cur.holdingFor(now) && !cur.same(&h):
		return // lanes are kept for another batch
	case cur.refusals == 0 || !cur.same(&h) || cur.refusals < holdAfter && now.After(cur.retryAt.Add(2*retryAfter)):
		h.refusals = 1 // a new batch, or one that did not come back in time: counting starts again
	case now.Before(cur.retryAt):
		h.refusals = cur.refusals // back before its Retry-After: not counted
	default:
		h.refusals = cur.refusals + 1
	}
	h.retryAt, h.until = now.Add(retryAfter), now.Add(2*retryAfter)
	*cur = h
}

// keptFor is what calls of class c may not take at now: the provider lanes and, per model,
// the model lanes kept for a batch (0 and nil when nothing is kept from class c).
func (h *batchHold) keptFor(c int, now time.Time) (lanes int, models []int) {
	if c < int(h.class) || !h.holdingFor(now) {
		return 0, nil
	}
	return h.lanes, h.need
}

// keptFrom is what a batch of members (of a provider of n models) may not take at now
// because lanes are kept for another (0 and nil for the batch they are kept for), and
// whether they are kept for it.
func (h *batchHold) keptFrom(members []Member, n int, now time.Time) (lanes int, models []int, mine bool) {
	if !h.holdingFor(now) {
		return 0, nil, false
	}
	b := batchShape(members, n)
	if h.same(&b) {
		return 0, nil, true
	}
	lanes, models = h.keptFor(int(b.class), now)
	return lanes, models, false
}

// kept is models[m], or 0 beyond models (nil, or a model added since the batch's shape).
func kept(models []int, m int) int {
	if m >= len(models) {
		return 0
	}
	return models[m]
}

// passes is how many classes, from the highest, a batch may not pass the waiting requests
// of: all, unless lanes are kept for it (mine), then those above its class.
func (h *batchHold) passes(mine bool) int {
	if mine {
		return int(h.class)
	}
	return llm.NumPriorities
}

// waitsAbove reports whether the simulation started a waiting request of one of the first
// classes classes.
func (s *simulation) waitsAbove(classes int) bool {
	for c := range classes {
		if s.avail[c] != 0 {
			return true
		}
	}
	return false
}
