package policy

import (
	"slices"

	"github.com/tollgate/tollgate/providers/llm"
)

// The dispatcher's side of the clients' fair share of max_running (SPEC §18, Shares):
// which provider a start goes to, whom it serves, and the caps of the clients it serves.

// pendingGrant is a grant its provider has not handled yet: its class and, when the client
// it serves has a max_running of its own, that client, for whom it counts in flight.
type pendingGrant struct {
	class  llm.Priority
	capped bool
	client string
}

// next is the provider to grant a start of class c, which some provider could start: of
// those that could, the one whose next start serves the client with the least service at
// max_running; on a tie, the first after the one class c was granted last. A provider that
// alone could start class c needs no look at the shares. It is -1 when some provider's next
// start of the class serves a client at its max_running gateway-wide: that provider would
// start another client's request instead, and its offer does not say whose, so nothing is
// granted until its next offer, which the client's slots filling asks of it (Slots).
func (d *Dispatcher) next(c int) int {
	np := len(d.provs)
	best, least := -1, int64(0)
	for i, p := 0, d.lastServed[c]; i < np; i++ {
		if p++; p == np {
			p = 0
		}
		dp := &d.provs[p]
		if dp.avail[c] == 0 {
			continue
		}
		h := dp.head(c)
		if h.MaxRunning > 0 && d.full(h) {
			return -1
		}
		if best < 0 && dp.avail[c] == d.avail[c] {
			return p
		}
		if t := d.shares.tag(h.Client, c); best < 0 || t < least {
			best, least = p, t
		}
	}
	return best
}

// grant counts a grant of class c to dp: it is charged to the client it serves, whose name
// it returns, and, if that client has a cap, counted in flight until dp has handled it.
func (d *Dispatcher) grant(dp *dprov, c int) string {
	h := dp.head(c)
	d.shares.chargeName(h.Client, c, h.Share)
	dp.used[c]++
	dp.issued++
	g := pendingGrant{class: llm.Priority(c)}
	if h.MaxRunning > 0 {
		g.capped, g.client = true, h.Client
		d.inflight[h.Client]++
	}
	dp.pending = append(dp.pending, g)
	return h.Client
}

// handled drops the first n of dp's pending grants: the provider has handled them (or,
// at a new epoch, never will), so its slots count whatever they started.
func (d *Dispatcher) handled(dp *dprov, n int) {
	for _, g := range dp.pending[:n] {
		if g.capped {
			if d.inflight[g.client]--; d.inflight[g.client] <= 0 {
				delete(d.inflight, g.client)
			}
		}
	}
	dp.pending = dp.pending[:copy(dp.pending, dp.pending[n:])]
}

// full reports whether client h, which has a max_running of its own, has no room left
// under it, counting the grants for it in flight.
func (d *Dispatcher) full(h *Head) bool {
	return d.slots != nil && d.slots.Room(h.Client, h.MaxRunning)-d.inflight[h.Client] <= 0
}

// head is whom dp's next start of class c serves: the offer's first start of the class that
// the pending grants leave. An offer that names nobody for it (one without Heads) serves the
// anonymous client.
func (dp *dprov) head(c int) *Head {
	skip := dp.used[c]
	for i := range dp.offer.Heads {
		h := &dp.offer.Heads[i]
		if int(h.Class) != c {
			continue
		}
		if skip < h.N {
			return h
		}
		skip -= h.N
	}
	return &anonymous
}

// anonymous is the start of an offer without Heads: the anonymous client's, of weight 1.
var anonymous = Head{Share: 1, N: 1}

// offerHeads is the Heads of an offer whose simulated starts served these: none when every
// start serves the anonymous client (how the dispatcher reads an offer without Heads), as
// every start does without client keys; else *last, the provider's last offer's, when they
// are the same (a sent offer's Heads never change), the usual case of an offer after a start
// or a finish of the same clients. So such offers allocate nothing.
func offerHeads(served []Head, last *[]Head) []Head {
	if len(served) == 0 {
		return nil
	}
	named := false
	for i := range served {
		named = named || served[i].Client != "" || served[i].Share != 1 || served[i].MaxRunning != 0
	}
	if !named {
		return nil
	}
	if !slices.Equal(served, *last) {
		*last = slices.Clone(served)
	}
	return *last
}
