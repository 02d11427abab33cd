package actors

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
)

// What the replicas share of a provider's health (SPEC §17): key cooldowns (shared.go),
// learned effective lanes and the circuit breaker. Each replica still decides from its own
// backend's answers, as a single gateway does; what it decides is published, and the
// other replicas take it on the path their own decision would take, so /admin/state, the
// log and /metrics show it the same way (the lanes with reason "shared"):
//
//   - Learned lanes: every change a replica's learning makes (lower or higher) is
//     recorded and announced; the others adopt the value, clamped to their configured
//     lanes. Recording is a compare-and-set for growth (Shared.Learn): a cut always
//     lands, a rise only over the value this replica last saw stored, else the replica
//     adopts the stored, lower one; one Learn per scope is in flight (sharedlanes.go), so
//     a replica's values land in its order. Two replicas learning at once may differ
//     until the next notice, and each caps the whole cluster at its own value (claim),
//     so the lower one holds.
//   - The breaker: a replica whose breaker opens publishes it as a shared cooldown lasting
//     until its probe time, and every replica opens until that same time. Half-open
//     probing stays per replica: at most one probe per replica goes through at the reopen
//     time; a probe that fails reopens the breaker on every replica, for its doubled
//     period; one that succeeds closes it on its own replica, and each other one closes on
//     its own probe's success. One probe cluster-wide would need a lease taken on the
//     start path and the outcome told back to every replica, for a saving of at most one
//     call per replica per open period.
//
// A replica that starts, or whose shared state answers again after an outage (ReadShared),
// reads what is in force: every key's cooldown, the breaker's, and the learned lanes. A
// learned value read is taken only when lower than this replica's own: while Redis was
// away this replica may have learned from its own backend's answers what the stored value,
// older, does not say, and a read must never loosen a cap (growth is heard from the next
// notice, or learned again by probing). While Redis is away nothing is published: each
// replica keeps its own rule; before each read it pushes what it decided meanwhile (its
// breaker's open period, its keys' cooldowns, a learned cut: sharedrejoin.go).

// breakerShared, from Cooled to a provider actor: another replica's breaker opened for d.
type breakerShared struct{ d time.Duration }

// lanesShared, to a provider actor: scope (replicas.ProviderScope, replicas.ModelScope) takes lanes, as
// another replica learned (from names it, for the log). lower: taken only if lower than
// what this replica has (a read, not a notice: see readShared); a read that found nothing
// stored has lanes 0.
type lanesShared struct {
	scope string
	lanes int
	from  string
	lower bool
}

// readShared asks a provider actor to read the shared state in force (ReadShared).
type readShared struct{}

// LanesLearned tells the gateway that replica from learned that scope takes lanes lanes;
// unknown scopes are ignored. It never blocks; the shared state's events call it.
func (g *Gateway) LanesLearned(scope string, lanes int, from string) {
	rest, ok := strings.CutPrefix(scope, "provider/")
	if !ok {
		if rest, ok = strings.CutPrefix(scope, "model/"); !ok {
			return
		}
		rest, _, _ = strings.Cut(rest, "/")
	}
	if lanes >= 1 {
		g.sendProvider(rest, &lanesShared{scope: scope, lanes: lanes, from: from})
	}
}

// ReadShared has every provider read the cooldowns, breaker state and learned lanes in
// force in the shared state: its replica's shared state answers again after an outage,
// and whatever was announced meanwhile was not heard. It never blocks.
func (g *Gateway) ReadShared() {
	for _, s := range g.slots.all() {
		if pid := s.pid.Load(); pid != nil && !s.retired.Load() {
			send(g.system.Root, pid, &readShared{})
		}
	}
}

// readSharedAtStart has the providers New spawned read the shared state, once New's
// fields are all set (an answer makes a provider offer to the supervisor); providers
// spawned later read it as they start.
func (g *Gateway) readSharedAtStart() {
	g.started.Store(true)
	if g.opts.Shared != nil {
		g.ReadShared()
	}
}

// readShared reads, off the actor's goroutine, what the replicas share of this provider's
// health; the answers come back as the messages the events would have sent.
func (rl replicaLink) readShared() {
	a := rl.a
	sh := a.g.opts.Shared
	if sh == nil {
		return
	}
	names := []string{replicas.BreakerScope(a.name)}
	for pl := range a.health.Pools() {
		for k := range a.health.Ring(pl).Len() {
			if a.health.Keyed(pl) {
				names = append(names, replicas.KeyScope(a.name, pl, k))
			}
		}
	}
	var scopes []string
	if !a.vitals.fixed() {
		scopes = append(scopes, replicas.ProviderScope(a.name))
		for _, m := range a.health.OwnKeys() {
			scopes = append(scopes, replicas.ModelScope(a.name, a.models[m].Name))
		}
	}
	g, self, name, push := a.g, a.self, a.name, rl.rejoinCools(a.g.now())
	go func() { // exits after len(push)+2 round trips, bounded by sharedTimeout together
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		for n, d := range push { // before the read: what this replica decided unheard (sharedrejoin.go)
			if _, err := sh.Cool(ctx, n, d); err != nil {
				g.log.Debug().Err(err).Str("name", n).Msg("cooldown not pushed: the replicas' shared state did not take it")
			}
		}
		cool, err := sh.Cooldowns(ctx, names)
		if err != nil {
			g.log.Debug().Err(err).Str("provider", name).Msg("shared cooldowns not read: the replicas' shared state did not answer")
			return
		}
		for n, d := range cool {
			g.Cooled(n, d)
		}
		if len(scopes) == 0 {
			return
		}
		lanes, err := sh.Learned(ctx, scopes)
		if err != nil {
			g.log.Debug().Err(err).Str("provider", name).Msg("shared learned lanes not read: the replicas' shared state did not answer")
			return
		}
		for _, s := range scopes { // absent: none stored (lanes 0), which a cut of this replica's fills
			send(g.system.Root, self, &lanesShared{scope: s, lanes: lanes[s], from: "the shared state", lower: true})
		}
	}()
}

// shareBreaker publishes that this provider's breaker opened for d.
func (rl replicaLink) shareBreaker(d time.Duration) {
	a := rl.a
	name := replicas.BreakerScope(a.name)
	rl.share(func(ctx context.Context, sh replicas.Shared) error { _, err := sh.Cool(ctx, name, d); return err }, "breaker", name)
}

// share runs op against the shared state off the actor's goroutine; a failure (Redis
// away) leaves the other replicas to their own rule.
func (rl replicaLink) share(op func(context.Context, replicas.Shared) error, what, name string) {
	a := rl.a
	sh := a.g.opts.Shared
	if sh == nil {
		return
	}
	log := a.g.log
	go func() { // exits after one bounded round trip to the shared state
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		if err := op(ctx, sh); err != nil {
			log.Debug().Err(err).Str("name", name).Msg(what + " not shared: the replicas' shared state did not take it")
		}
	}()
}

// scopeLanes is the scope of learned lanes named scope: the provider's (m -1), or a model's
// with keys of its own (m its index); ok false for a scope this provider does not learn.
func (rl replicaLink) scopeLanes(scope string) (m int, ok bool) {
	a := rl.a
	if scope == replicas.ProviderScope(a.name) {
		return -1, true
	}
	for _, m := range a.health.OwnKeys() {
		if replicas.ModelScope(a.name, a.models[m].Name) == scope {
			return m, true
		}
	}
	return -1, false
}

// lanesShared adopts lanes another replica learned; during a rebuild only the health
// takes them (the rebuild tells its policy at its end).
func (rl replicaLink) lanesShared(m *lanesShared, now time.Time) {
	a := rl.a
	mi, ok := rl.scopeLanes(m.scope)
	if !ok {
		return
	}
	if a.g.opts.Shared != nil {
		rl.lanesPub(m.scope).known = m.lanes // what the shared state holds: a rise replaces it
	}
	if m.lower && (m.lanes == 0 || m.lanes >= a.health.LanesSnapshot(mi, now).Effective) { // 0: a read found none stored
		if sn := a.health.LanesSnapshot(mi, now); sn.Effective < sn.Lanes && (m.lanes == 0 || m.lanes > sn.Effective) {
			rl.shareLanes(m.scope) // a cut the shared state does not hold (sharedrejoin.go)
		}
		return
	}
	ch, changed := a.health.Adopt(mi, m.lanes, now)
	if !changed {
		return
	}
	if !a.rebuilding {
		if mi >= 0 {
			a.pol.Lanes().SetEffectiveModel(mi, ch.To)
		} else {
			a.pol.Lanes().SetEffective(ch.To)
		}
	}
	model := ""
	if mi >= 0 {
		model = a.name + "/" + a.models[mi].Name
	}
	a.g.log.Info().Str("provider", a.name).Str("model", model).Int("from", ch.From).Int("to", ch.To).
		Str("reason", string(ch.Reason)).Str("signal", "learned by "+m.from).Msg("effective lanes changed")
	if o := a.g.opts.Observer; o != nil && mi < 0 {
		o.LanesLearned(a.name, ch.To, string(ch.Reason))
	}
}

// breakerShared opens the breaker until the time another replica's opened one probes,
// unless it is open longer already; the waiting calls move on as when it opens here.
func (rl replicaLink) breakerShared(d time.Duration, now time.Time) {
	a := rl.a
	changed, wasOpen := a.health.OpenedElsewhere(d, now)
	if !changed {
		return
	}
	// During a rebuild too, as a failure here does: the calls waiting for it move to their
	// fallbacks or get their 503 now, and the observer hears of the open.
	if wasOpen {
		a.pol.Lanes().SetStartCap(0)
		return
	}
	a.vitals.opened(now, fmt.Sprintf("another replica's circuit breaker of provider %s opened", a.name))
}
