package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// Several replicas (SPEC §17). The contract with the other replicas (the Shared interface,
// claims, scope names) is actors/replicas. With Options.Shared set, the local policy stays
// the first gate and the replicas' shared state the second: a call the supervisor granted
// takes its leases — max_running, its provider's lanes, its model's lanes, its provider's rpm and
// tpm and its key's key_rate_limit, all in one atomic step — before its backend is
// opened. The lane actor asks for them off its goroutine and hears the answer as a
// message, so no actor ever waits on Redis. When
// the replicas run a scope full, the call goes back to its place in its provider's queue
// and the scope's models stop being offered (policy.Lanes.Block), so the supervisor
// grants other models, providers and classes meanwhile; a lane freed on any replica
// (LeaseNotice) has them offered again. The wait counts against the call's queue_timeout,
// as any wait for a lane does. The leases are released once the backend has stopped, as
// the local lanes are.

// Cooled tells the gateway that another replica rested something for d more: a key its
// backend rate-limited (replicas.KeyScope), which cools here too, or a provider whose
// circuit breaker opened (replicas.BreakerScope), which opens here too until the same time.
// Unknown names are ignored. It never blocks; the shared state's events, and the reads a provider makes
// when it starts or its replica rejoins, call it.
func (g *Gateway) Cooled(name string, d time.Duration) {
	cd, ok := replicas.ParseCooldown(name)
	switch {
	case d <= 0 || !ok:
	case cd.Breaker:
		g.sendProvider(cd.Provider, &breakerShared{d: d})
	default:
		g.sendProvider(cd.Provider, &keyCooled{pool: cd.Pool, key: cd.Key, d: d})
	}
}

// sendProvider sends msg to provider name's actor, if there is one.
func (g *Gateway) sendProvider(name string, msg message) {
	if p := g.table.Load().providerIndex(name); p >= 0 {
		if pid := g.slots.at(p).pid.Load(); pid != nil {
			send(g.system.Root, pid, msg)
		}
	}
}

// keyCooled, from Cooled to a provider actor: key key of pool pool cools for d.
type keyCooled struct {
	pool, key int
	d         time.Duration
}

// shareCooldown tells the other replicas that key k of pool pl cools for d from now.
func (rl replicaLink) shareCooldown(pl, k int, d time.Duration) {
	a := rl.a
	if d <= 0 {
		return
	}
	name := replicas.KeyScope(a.name, pl, k)
	rl.share(func(ctx context.Context, sh replicas.Shared) error { _, err := sh.Cool(ctx, name, d); return err }, "key cooldown", name)
}

// sharedTimeout bounds one call the actors make to the shared state beside a call's leases
// (a cooldown to share); the engine bounds each round trip more tightly itself.
const sharedTimeout = 5 * time.Second

// keyCooled applies a cooldown another replica gave a key, as if this replica's backend
// had answered the key with that hint, and reports whether it knew the key.
func (rl replicaLink) keyCooled(m *keyCooled, now time.Time) bool {
	a := rl.a
	return a.health.Cooled(m.pool, m.key, m.d, now)
}

// LeaseNotice tells the gateway that slots may have freed on some replica: in scopes, or
// anywhere when scopes is nil (a periodic poll, the shared state's phase changed). Every
// provider with a model blocked on one of them offers it again. It never blocks; the
// shared state's events call it.
func (g *Gateway) LeaseNotice(scopes []string) {
	g.leaseGen.Add(1)
	for _, s := range g.slots.all() {
		if pid := s.pid.Load(); pid != nil && !s.retired.Load() {
			send(g.system.Root, pid, &leaseFreed{scopes: scopes})
		}
	}
}

// claim is what call c needs of the replicas' shared state: a slot of max_running, of its
// provider's lanes and of its model's lanes (as this replica learned them, learned, when
// lower: each replica's learning caps the whole cluster), of its client key's max_running
// (clientScopes), and its provider's rate_limit (a request of rpm, its estimated tokens of
// tpm), and its key's key_rate_limit alike (keyName, a replicas.KeyScope; "": none).
func (g *Gateway) claim(c *call, learned [2]int, keyName string) replicas.Claim {
	r := c.route
	pv := &g.table.Load().provs[r.p].Provider
	lanes, modelLanes := pv.Lanes, g.table.Load().model(r.p, r.m).Lanes
	if n := learned[0]; n >= 1 && n < lanes { // learned lower: a cap across the replicas too
		lanes = n
	}
	if n := learned[1]; n >= 1 && n < modelLanes {
		modelLanes = n
	}
	cl := replicas.Claim{Scopes: []replicas.Scope{{Name: replicas.GatewayScope, Limit: g.caps.Load().limits.MaxRunning},
		{Name: replicas.ProviderScope(pv.Name), Limit: lanes}, {Name: replicas.ModelScope(pv.Name, r.model), Limit: modelLanes}}}
	cl.Scopes = append(cl.Scopes, clientScopes(c)...)
	if rl := pv.RateLimit; rl.RPM > 0 {
		cl.Buckets = append(cl.Buckets, replicas.Bucket{Name: replicas.RateScope(pv.Name), PerMinute: rl.RPM, Burst: rl.Burst, Cost: 1})
	}
	if rl := pv.RateLimit; rl.TPM > 0 && c.tokens > 0 {
		cl.Buckets = append(cl.Buckets, replicas.Bucket{Name: replicas.TokenScope(pv.Name), PerMinute: rl.TPM, Cost: c.tokens})
	}
	cl.Buckets = append(cl.Buckets, keyBuckets(pv.KeyRateLimit, keyName, c.tokens)...)
	return cl
}

// leaseBatch takes the leases of every member of batch b in one atomic step, before the
// local two-phase step: with several replicas a batch starts only if the replicas' shared
// limits have room for all its members at once, or it is refused 429
// batch_capacity_unavailable naming what was full. Each member's lease is released by its
// lane once its backend has stopped (unleaseBatch if the batch does not start).
func (g *Gateway) leaseBatch(ctx context.Context, b *batchCall) error {
	sh := g.opts.Shared
	if sh == nil {
		return nil
	}
	claims := make([]replicas.Claim, len(b.members))
	for i, c := range b.members {
		claims[i] = g.claim(c, [2]int{}, "") // configured lanes; its key is chosen as it starts
	}
	ls, err := sh.Acquire(ctx, claims)
	var busy *replicas.Busy
	switch {
	case errors.As(err, &busy):
		wait := max(g.caps.Load().retryAfter, busy.Wait)
		return &llm.Error{Kind: llm.KindBatchCapacity, RetryAfter: wait, Provider: strings.TrimPrefix(busy.Scope, "provider/"),
			Message: busy.Error() + fmt.Sprintf(" now; the batch needs room for all its %d members at once across the replicas; try again shortly", len(b.members))}
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return &llm.Error{Kind: llm.KindProviderUnavailable, RetryAfter: time.Second,
			Message: fmt.Sprintf("the replicas' shared state refused the batch's leases: %v", err)}
	}
	b.leases = make(map[policy.ID]memberLease, len(b.members))
	for i, c := range b.members {
		b.leases[c.id] = memberLease{lease: ls[i], charged: claims[i].Buckets}
	}
	return nil
}

// unleaseBatch gives back the leases of a batch that did not start (a lease is given back
// once however often it is released).
func unleaseBatch(b *batchCall) {
	for _, ml := range b.leases {
		if l := ml.lease; l != nil {
			go l.Release() // exits after one bounded round trip to the shared state
		}
	}
}

// leased, from a lane's acquire goroutine to the lane: what the shared state answered.
type leased struct {
	c     *call
	lease replicas.Lease
	err   error
	cause error // why the acquire's context ended, if it did
	gen   uint64
	// charged are the buckets the lease charged, kept by the call once it starts.
	charged []replicas.Bucket
}

// unleased, from a lane to its provider: the replicas have no room for call c, started as
// run says, now; put it back in its place and block what was full, unless a notice came
// since gen.
type unleased struct {
	c    *call
	run  start
	busy *replicas.Busy
	gen  uint64
}

// leaseFreed, from LeaseNotice to every provider actor.
type leaseFreed struct{ scopes []string }

// acquire asks the shared state for the leases of r's call; the lane holds it as running
// (its provider's policy does) until the answer.
func (a *laneActor) acquire(ctx actor.Context, r laneRun) {
	c := r.c
	if c.answered.Load() {
		send(ctx, ctx.Parent(), &freed{c: c}) // answered while it was on its way: nobody runs it
		return
	}
	lctx, cancel := context.WithCancelCause(c.ctx)
	r.leasing = cancel
	a.running[c.id] = r
	gen := a.g.leaseGen.Load()
	learned := r.run.leases()
	claims := []replicas.Claim{a.g.claim(c, learned.lanes, learned.keyName)}
	root, self, sh := a.g.system.Root, ctx.Self(), a.g.opts.Shared
	go func() { // exits when Acquire returns: one bounded round trip, or lctx's end
		m := &leased{c: c, gen: gen, charged: claims[0].Buckets}
		var ls []replicas.Lease
		if ls, m.err = sh.Acquire(lctx, claims); m.err == nil {
			m.lease = ls[0]
		}
		m.cause = context.Cause(lctx)
		send(root, self, m)
	}()
}

// leased starts the call once it holds its leases, hands it back to its provider when the
// replicas are full, and ends it when its client left or its lane was told to stop.
func (a *laneActor) leased(ctx actor.Context, m *leased) {
	c := m.c
	r, mine := a.running[c.id]
	if !mine || r.leasing == nil {
		// Handled already (sent again after a crash in the middle of it), or dropped
		// meanwhile (its start was lost in a crash and answered).
		if m.lease != nil && m.lease != r.lease {
			go m.lease.Release() // exits after one bounded round trip
		}
		if lostCall(c, "lane for "+c.route.model, r.queueWait()) { // the crash stopped it before it ran
			a.drop(ctx, c, nil)
		}
		return
	}
	r.leasing(context.Canceled) // frees the context; a no-op after a cancellation
	r.leasing = nil
	a.running[c.id] = r
	var busy *replicas.Busy
	switch {
	case m.err == nil && m.cause == nil && !c.answered.Load():
		r.lease, r.charged = m.lease, m.charged
		a.start(ctx, r)
		return
	case m.lease != nil:
		go m.lease.Release() // nobody runs it; exits after one bounded round trip
	case m.cause == nil && errors.As(m.err, &busy):
		delete(a.running, c.id)
		send(ctx, ctx.Parent(), &unleased{c: c, run: *r.run, busy: busy, gen: m.gen})
		return
	}
	c.answer(admitResult{err: a.leaseFailure(c, m), queueWait: r.run.queueWait()})
	a.free(ctx, c)
}

// leaseFailure is the answer to a call that could not take its leases for another reason
// than full scopes.
func (a *laneActor) leaseFailure(c *call, m *leased) error {
	switch {
	case errors.Is(m.cause, errDraining) || a.g.Draining():
		return &llm.Error{Kind: llm.KindDraining, Provider: c.route.provider, Message: "the gateway is shutting down"}
	case errors.Is(m.cause, errProviderFailed):
		return providerDown(c.route.provider)
	case c.ctx.Err() != nil:
		return c.ctx.Err() // the client left
	}
	return &llm.Error{Kind: llm.KindProviderUnavailable, Provider: c.route.provider, RetryAfter: time.Second,
		Message: fmt.Sprintf("the replicas' shared state refused the call's leases: %v", m.err)}
}

// unleased puts a call the replicas had no room for back in its place, and blocks the
// models of the scope that was full until a notice says a slot freed there.
func (rl replicaLink) unleased(ctx actor.Context, m *unleased) {
	a := rl.a
	now := a.g.now()
	c := m.c
	r, ok := a.runs[c.id]
	if !ok {
		r = run{c: c, started: m.run.started, key: m.run.key, keyName: m.run.leases().keyName}
	}
	delete(a.runs, c.id)
	a.vitals.neutral(&r, now) // it never ran: nothing to say of the provider's health (a probe lets the next go)
	w := wait{c: c, entered: m.run.entered(), deadline: m.run.deadline, confirmed: true, probe: r.probe}
	if !a.pol.Unstart(c.id, now) {
		// Not running in the policy (a rebuild that did not see it meanwhile): it enters
		// again at its arrival's place, kept.
		if o, _ := a.pol.Enter(c.id, a.arrival(&w), now); o == policy.Rejected {
			lostCall(c, "actor", w.queueWait(now)) // neither running nor new to the policy: never so
			return
		}
	}
	a.waiting[c.id] = w
	switch {
	case c.answered.Load():
		a.pol.Cancel(c.id)
		delete(a.waiting, c.id)
	case c.ctx.Err() != nil: // the client left while it asked; its withdraw came already
		a.answerWaiting(c.id, c.ctx.Err(), now)
	case a.draining:
		a.answerWaiting(c.id, &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}, now)
	case keyRefused(m.busy, r.keyName):
		rl.restKey(c, r.key, m.busy.Wait, now) // the next grant takes another key, if one is ready
	case a.g.leaseGen.Load() != m.gen: // a slot may have freed since: offer again
	case clientRefused(m.busy, c):
		rl.holdClient(c)
	default:
		rl.block(m.busy, c)
	}
	a.offer(ctx, now)
}

// block is what a blocked model waits for: a free slot in scope, or its rate bucket's
// tokens, due at until (zero: unknown).
type block struct {
	scope string
	until time.Time
}

// block stops offering the models that scope refused: the call's own model for a model
// scope, every model for the provider, the gateway or the provider's rate limit, and every
// model when the shared state did not answer.
func (rl replicaLink) block(b *replicas.Busy, c *call) {
	a := rl.a
	bl := block{scope: b.Scope}
	if b.Scope == "" {
		bl.scope = b.Bucket
	}
	if b.Bucket != "" && b.Wait > 0 {
		bl.until = a.g.now().Add(b.Wait)
	}
	for m := range a.models {
		if bl.scope != replicas.ModelScope(a.name, c.route.model) || m == c.route.m {
			a.pol.Lanes().Block(m)
			a.blocks[m] = bl
		}
	}
	if b.Bucket != "" && b.Wait > 0 {
		self, root := a.self, a.g.system.Root
		// The timer's goroutine only sends one message and exits.
		time.AfterFunc(b.Wait, func() { send(root, self, &leaseFreed{scopes: []string{b.Bucket}}) })
	}
}

// leaseFreed offers again the models blocked on a scope that has a free slot now.
func (rl replicaLink) leaseFreed(ctx actor.Context, scopes []string) {
	a := rl.a
	rl.unholdClients(scopes)
	n := len(a.blocks)
	for m, bl := range a.blocks {
		if scopes == nil || slices.Contains(scopes, bl.scope) {
			a.pol.Lanes().Unblock(m)
			delete(a.blocks, m)
		}
	}
	if len(a.blocks) < n {
		a.offer(ctx, a.g.now())
	}
}

// blockedFor is how long the replicas' shared rate limit holds model m back from now, when
// it is what does and its next tokens' time is known; 0 otherwise (a slot frees when some
// replica's backend ends, which nobody can foresee).
func (rl replicaLink) blockedFor(m int, now time.Time) time.Duration {
	a := rl.a
	if bl, ok := a.blocks[m]; ok && !bl.until.IsZero() {
		return max(bl.until.Sub(now), 0)
	}
	return 0
}

// blockedBy says in words what the replicas hold model m back with.
func (rl replicaLink) blockedBy(m int) string {
	a := rl.a
	s := a.blocks[m].scope
	switch {
	case s == replicas.GatewayScope:
		return fmt.Sprintf("the replicas sharing this gateway's limits run its max_running (%d) full", a.g.caps.Load().limits.MaxRunning)
	case s == replicas.ProviderScope(a.name):
		return fmt.Sprintf("the replicas sharing this gateway's limits run all of provider %s's %d lanes", a.name, a.pv.Lanes)
	case strings.HasPrefix(s, "model/"):
		return fmt.Sprintf("the replicas sharing this gateway's limits run all of model %s/%s's model lanes", a.name, a.g.table.Load().model(a.p, m).Name)
	case s == replicas.RateScope(a.name):
		return fmt.Sprintf("provider %s's rate limit (rpm %d), shared by the replicas, holds requests back until its next token", a.name, a.pv.RateLimit.RPM)
	case s == replicas.TokenScope(a.name):
		return fmt.Sprintf("provider %s's rate limit (tpm %d), shared by the replicas, holds requests back until it has their tokens", a.name, a.pv.RateLimit.TPM)
	}
	return "the replicas' shared state (Redis) did not answer in time"
}

// replicaLink is the provider actor's part with the other replicas (SPEC §17): its calls'
// leases and the models blocked while the replicas have no room, the shared rpm/tpm buckets
// of its keys, and the health it shares and takes (cooldowns, the breaker, learned lanes).
type replicaLink struct{ a *providerActor }
