package actors

import (
	"github.com/tollgate/tollgate/actors/replicas"
)

// A client key's max_running across the replicas (SPEC §18, "Several replicas"). A call of
// a key with a cap claims a slot of the key's scope (replicas.ClientScope, limit the cap)
// with its other leases, so the replicas together never run more of the key's calls than
// its cap, and the outage rule gives each replica its share of it as of any scope. When the
// replicas run the key at its cap, the call goes back to its place in its queue and the key
// is held on this replica (policy.Slots.Hold): every provider skips its calls, as for a key
// at its cap here, while other keys' calls start. A notice that the key's scope freed (or
// any notice without scopes: a poll, a phase change) ends the hold, and every provider
// offers again.
//
// A batch's members claim a slot of their key's scope too, but uncapped: the batch rule
// admits a batch whole, past its key's cap (as in this replica's slots, policy.Slots.Take's
// force), and a cap smaller than the batch would otherwise refuse it forever; counted
// there, they hold the key's other calls back on every replica while they run.

// clientScopes is the scope call c claims for its key's max_running, if it has one.
func clientScopes(c *call) []replicas.Scope {
	cl := c.client
	if cl.Name == "" || cl.MaxRunning <= 0 {
		return nil
	}
	limit := cl.MaxRunning
	if c.batch {
		limit = replicas.Uncapped
	}
	return []replicas.Scope{{Name: replicas.ClientScope(cl.Name), Limit: limit}}
}

// clientRefused reports whether the replicas refused call c because they run its key at
// its max_running.
func clientRefused(b *replicas.Busy, c *call) bool {
	return c.client.Name != "" && b.Scope == replicas.ClientScope(c.client.Name)
}

// holdClient holds call c's key on this replica until its scope frees somewhere.
func (rl replicaLink) holdClient(c *call) {
	a := rl.a
	a.g.running.Hold(c.client.Name)
	a.g.log.Debug().Str("provider", a.name).Str("client", c.client.Name).Int("max_running", c.client.MaxRunning).
		Msg("client key at its max_running across the replicas: its calls wait until one of them ends")
}

// unholdClients ends the holds of the keys whose scope is in scopes (nil: every key's),
// and has every provider offer again if it ended one (the slots tell them: Changed). Each
// provider actor that hears the
// notice calls it; the first ends the holds. A hold is set only while no notice came since
// its call's acquire left (unleased), and the notice's message to the holding provider
// comes after, so no hold outlives the notice of its scope.
func (rl replicaLink) unholdClients(scopes []string) {
	a := rl.a
	if a.g.opts.Shared == nil {
		return
	}
	freed := func(name string) bool {
		for _, s := range scopes {
			if s == replicas.ClientScope(name) {
				return true
			}
		}
		return false
	}
	if scopes == nil {
		freed = nil
	}
	a.g.running.Unhold(freed)
}
