package actors

import (
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
)

// What a replica pushes to the shared state before it reads it (readShared): while Redis
// was away (or before this provider read it) its decisions were not published, and a read
// alone would leave the other replicas unaware of them.
//
//   - The breaker, while open: a shared cooldown for the rest of its open period.
//   - Every key still cooling: a shared cooldown for the rest of its rest.
//   - Learned lanes: the read itself (lanesShared) republishes this replica's value of a
//     scope when it is lower than the stored one and below its configured lanes: a cut
//     learned while away. A rise stored meanwhile by a replica that had seen this one's
//     older cut is then undone too: a cut always wins, as everywhere else here.
//
// Cool never shortens a cooldown in force, so pushing what another replica already
// published is harmless.

// rejoinCools is, by shared name, how long each cooldown this provider has in force still
// runs at now: its breaker's, if open, and its cooling keys'.
func (rl replicaLink) rejoinCools(now time.Time) map[string]time.Duration {
	a := rl.a
	h := a.health
	out := map[string]time.Duration{}
	if d := h.RetryAfter(now); d > 0 {
		out[replicas.BreakerScope(a.name)] = d
	}
	for pl := range h.Pools() {
		if !h.Keyed(pl) {
			continue
		}
		ring := h.Ring(pl)
		for k := range ring.Len() {
			if t, ok := ring.CoolsUntil(k); ok && t.After(now) {
				out[replicas.KeyScope(a.name, pl, k)] = t.Sub(now)
			}
		}
	}
	return out
}
