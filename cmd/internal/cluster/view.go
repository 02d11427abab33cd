package cluster

import (
	"fmt"
	"slices"
	"time"
)

// The view is what a replica last saw of the cluster's occupancy: per scope, the live
// lease entries of every replica. Every heartbeat refreshes it (at least every
// lease_ttl/5 while Redis answers), and when Redis goes, the outage rule starts from it:
// what the others held beyond their shares is counted until those calls may have ended.

// shareOf is the share of limit of the replica named self among alive (the names seen
// alive at the last heartbeat, self included): limit divided by their number, the
// remainder going one each to the first names in byte order, so the shares of all add
// up to exactly the limit, even with more replicas than the limit (then some get 0:
// never a stall of the whole cluster, never beyond the cap). A replica not in alive gets
// 0; with alive empty, self alone has the whole limit.
func shareOf(limit int, alive []string, self string) int {
	if len(alive) == 0 {
		return limit
	}
	order := slices.Sorted(slices.Values(alive))
	i := slices.Index(order, self)
	if i < 0 {
		return 0
	}
	share := limit / len(order)
	if i < limit%len(order) {
		share++
	}
	return share
}

// viewAllowed is how many calls the replica self may run in a scope of the configured
// limit at now, by the outage rule's view: its share (shareOf) less what the view showed
// the other replicas holding beyond their own shares, each entry counted until its
// deadline (the latest moment its call can still run). others maps each other replica to
// its entries' deadlines in the scope; entries past their deadline count for nothing. The
// answer is never below 0: a replica whose peers held the whole scope starts nothing
// until their calls' deadlines, and what every replica runs adds up to at most the limit
// (TestViewAllowedAddsUp).
func viewAllowed(limit int, alive []string, self string, others map[string][]time.Time, now time.Time) int {
	beyond := 0
	for r, deadlines := range others {
		n := 0
		for _, d := range deadlines {
			if now.Before(d) {
				n++
			}
		}
		beyond += max(0, n-shareOf(limit, alive, r))
	}
	return max(0, shareOf(limit, alive, self)-beyond)
}

// possibleExcess is what one replica's calls in a scope may take beyond the limit once
// every replica runs on the outage rule: its calls beyond its share that started so
// recently (at or after since) that a peer's last view may not show them. Only those can
// push the scope over its limit (a peer counts what its view showed).
func possibleExcess(running, share int, starts []time.Time, since time.Time) int {
	recent := 0
	for _, s := range starts {
		if !s.Before(since) {
			recent++
		}
	}
	return min(recent, max(0, running-share))
}

// seenEntries is a view as the heartbeat answered it: per scope, per replica, its members.
type seenEntries map[string]map[string][]string

// parseView decodes the heartbeat's view: {n, (name, count, member...)...}, from res[i].
func parseView(res []any, i int) (seenEntries, error) {
	bad := fmt.Errorf("cluster: heartbeat: bad view in %v", res)
	if i >= len(res) {
		return nil, bad
	}
	n, ok := res[i].(int64)
	if !ok || n < 0 {
		return nil, bad
	}
	i++
	out := seenEntries{}
	for range n {
		if i+1 >= len(res) {
			return nil, bad
		}
		name, ok1 := res[i].(string)
		count, ok2 := res[i+1].(int64)
		if !ok1 || !ok2 || count < 0 || i+2+int(count) > len(res) {
			return nil, bad
		}
		by := map[string][]string{}
		for _, m := range res[i+2 : i+2+int(count)] {
			s, ok := m.(string)
			if r := memberReplica(s); ok && r != "" {
				by[r] = append(by[r], s)
			}
		}
		out[name] = by
		i += 2 + int(count)
	}
	if i != len(res) {
		return nil, bad
	}
	return out, nil
}

// seeViewLocked takes a fresh view at now: each entry's deadline is MaxRun after this
// replica first saw it (its call began no later), so an entry seen on every refresh keeps
// the deadline of its first sighting. This replica's own entries are left out: its own
// calls are counted locally.
func (e *Engine) seeViewLocked(occ seenEntries, now time.Time) {
	seen := make(map[string]time.Time, len(e.firstSeen))
	view := map[string]map[string][]time.Time{}
	for scope, by := range occ {
		for replica, members := range by {
			if replica == e.o.Replica {
				continue
			}
			for _, m := range members {
				first, ok := e.firstSeen[m]
				if !ok {
					first = now
				}
				seen[m] = first
				if view[scope] == nil {
					view[scope] = map[string][]time.Time{}
				}
				view[scope][replica] = append(view[scope][replica], first.Add(e.o.MaxRun))
			}
		}
	}
	e.firstSeen, e.view, e.viewAt = seen, view, now
}
