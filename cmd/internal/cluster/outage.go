package cluster

import "time"

// Share is one replica's part of limit while Redis is away: limit divided by the replicas
// seen alive, rounded down, at least 1 (SPEC §17: never unlimited, never nothing). alive
// below 1 counts as 1. When alive ≤ limit the shares of all replicas add up to at most
// limit; with more replicas than the limit, each still gets 1 and together they exceed it
// (the failure table in docs/architecture.md says so).
func Share(limit, alive int) int {
	return max(1, limit/max(1, alive))
}

// Phase is where a replica is in its rule for running without Redis.
type Phase int

const (
	// Shared: Redis answers; every call holds a lease in Redis.
	Shared Phase = iota
	// Holding: Redis stopped answering a moment ago (by the strict rule: less than
	// lease_ttl ago; by the default one, until every peer's acquire keeps this replica's
	// shares free, at most timings.silent after its last heartbeat could have run). The
	// replica starts a call only in a slot it still holds a valid lease on (one a call of
	// its own has finished with): those are still counted in Redis. So an outage, or a
	// partition of this replica alone, exceeds no cap while holding. Calls already running
	// are never stopped for an outage: past its leases' expiry, a cut-off replica's calls
	// beyond its share run uncounted (docs/architecture.md, the failure table).
	Holding
	// Settling (the strict rule only): Redis has been away for lease_ttl or more, but calls started before the
	// outage may still run on any replica (for up to MaxRun). Each scope allows
	// min(share, what this replica held when it lost Redis): what every replica held adds
	// up to at most the cap, so replicas that held more than their share and replicas that
	// held less cannot add up to more than the cap together.
	Settling
	// Alone: each scope allows the share, less (by the default rule) what the last view
	// showed the other replicas holding beyond theirs, until those calls' deadlines. By
	// the strict rule only once every call started before the outage has ended.
	Alone
	// Rejoining: Redis answers again and this replica's calls are all registered in it,
	// but a peer seen alive before the outage may still run on its own rule. A call must
	// pass both the outage rule and Redis, until every such peer has a fresh heartbeat or
	// lease_ttl has passed since the rejoin.
	Rejoining
)

func (p Phase) String() string {
	switch p {
	case Shared:
		return "shared"
	case Holding:
		return "holding"
	case Settling:
		return "settling"
	case Alone:
		return "fallback"
	case Rejoining:
		return "rejoining"
	}
	return "unknown"
}

// outage is what one replica knows from the moment it lost Redis, and the pure rule of
// how many calls it may run in each scope from then on. It has no clock: every method
// takes now, from the local monotonic clock. It is not safe for concurrent use.
type outage struct {
	since  time.Time // when the loss was detected
	ttl    time.Duration
	maxRun time.Duration // the longest any call can hold a lease (run_timeout + kill grace)
	alive  int           // replicas seen alive at the last heartbeat, this one included
	known  []string      // their names, for the rejoin
	// held is, per scope, the local validity of the lease entries this replica certainly
	// had in Redis when it lost it (those of its running calls). Each is counted in Redis
	// until it expires there, which is never before its local validity, whatever call of
	// this replica now uses the slot.
	held map[string][]time.Time
	// blind: this replica never reached Redis, so it knows no peer and no earlier call:
	// it runs on its shares (alive is 1) from the start.
	blind bool
	// strict: the rule of Options.Strict (Holding, Settling, Alone). Otherwise Holding
	// lasts until servesFrom, when every peer's acquire keeps this replica's shares free
	// (its heartbeat is older than timings.silent), and from then each scope allows
	// viewAllowed of others, the view taken at the last heartbeat.
	strict     bool
	self       string // this replica's name, for its place among known (shareOf)
	servesFrom time.Time
	others     map[string]map[string][]time.Time
}

// phase is the rule in force at now.
func (o *outage) phase(now time.Time) Phase {
	switch {
	case o.blind:
		return Alone
	case !o.strict && now.Before(o.servesFrom):
		return Holding
	case !o.strict:
		return Alone
	case now.Before(o.since.Add(o.ttl)):
		return Holding
	case now.Before(o.since.Add(o.ttl + o.maxRun)):
		return Settling
	}
	return Alone
}

// allowed is how many calls this replica may run at now in scope, whose configured
// limit is limit.
func (o *outage) allowed(scope string, limit int, now time.Time) int {
	share := Share(limit, o.alive)
	switch o.phase(now) {
	case Holding:
		n := 0
		for _, until := range o.held[scope] {
			if now.Before(until) {
				n++
			}
		}
		if !o.strict && !o.blind {
			// Never beyond what the share rule allows: once those entries expire, only
			// the share is kept free for a replica cut off alone.
			n = min(n, viewAllowed(limit, o.known, o.self, o.others[scope], now))
		}
		return n
	case Settling:
		return min(share, len(o.held[scope]))
	}
	if o.strict || o.blind {
		return share
	}
	return viewAllowed(limit, o.known, o.self, o.others[scope], now)
}

// share is this replica's share of a scope's limit by the rule in force: shareOf among
// the replicas it knew by default, Share by the strict rule (and for a replica that
// never reached Redis, which knows none).
func (o *outage) share(limit int) int {
	if o.strict || o.blind {
		return Share(limit, o.alive)
	}
	return shareOf(limit, o.known, o.self)
}

// tokensFrom is when the outage rule starts lending rate-limit tokens: not while Holding,
// since a peer that still reaches Redis may be using the whole shared bucket.
func (o *outage) tokensFrom() time.Time {
	switch {
	case o.blind:
		return o.since
	case !o.strict:
		return o.servesFrom
	}
	return o.since.Add(o.ttl)
}
