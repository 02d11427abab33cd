package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// Several replicas (SPEC §17). With Options.Shared set, the local policy stays the first
// gate and the replicas' shared state the second: a call the supervisor granted takes its
// leases — max_running, its provider's lanes, its model's lanes, its provider's rpm and
// tpm and its key's key_rate_limit, all in one atomic step — before its backend is
// opened. The lane actor asks for them off its goroutine and hears the answer as a
// message, so no actor ever waits on Redis. When
// the replicas run a scope full, the call goes back to its place in its provider's queue
// and the scope's models stop being offered (policy.Provider.Block), so the supervisor
// grants other models, providers and classes meanwhile; a lane freed on any replica
// (LeaseNotice) has them offered again. The wait counts against the call's queue_timeout,
// as any wait for a lane does. The leases are released once the backend has stopped, as
// the local lanes are.

// Shared is the replicas' shared state. Its methods are called off the actors' goroutines.
type Shared interface {
	// Acquire takes every claim's scopes and buckets, all claims or none, in one atomic
	// step: one claim per call, a batch's members together. It answers *LeaseBusy when
	// something has no room (nothing was taken), or ctx's error when ctx ends first.
	Acquire(ctx context.Context, claims []LeaseClaim) ([]Lease, error)
	// Health is this replica's view of the cluster now; it never waits for Redis.
	Health() SharedHealth
	// Occupancy is, per scope, how many calls each replica runs in it, cluster-wide.
	Occupancy(ctx context.Context, scopes []string) (map[string]map[string]int, error)
	// Cool makes the shared cooldown name (KeyScope, BreakerScope) last at least d from
	// now, never shorter, and tells every other replica (Gateway.Cooled). An error (Redis
	// away) leaves each replica to its own rule.
	Cool(ctx context.Context, name string, d time.Duration) error
	// Cooldowns is how long each of names still cools; a name absent is not cooling.
	Cooldowns(ctx context.Context, names []string) (map[string]time.Duration, error)
	// Adjust corrects an earlier charge of bucket b by delta tokens: a tpm estimate
	// replaced by the usage, or a retry's request counted (b.Cost is ignored).
	Adjust(ctx context.Context, b LeaseBucket, delta int) error
	// Learn records that scope (ProviderScope, ModelScope) takes lanes lanes and tells every
	// other replica (Gateway.LanesLearned); Learned reads what is recorded. A value lower
	// than the stored one always replaces it; a higher one only while the stored value is
	// still was (what this replica last saw stored; 0: none). It returns the value stored
	// after: lanes, or the stored one that refused it.
	Learn(ctx context.Context, scope string, lanes, was int) (stored int, err error)
	Learned(ctx context.Context, scopes []string) (map[string]int, error)
}

// Lease is one call's hold on its scopes, renewed while held.
type Lease interface {
	// Release gives the slots back cluster-wide. It is idempotent and bounded by one
	// round trip to the shared state.
	Release()
}

// LeaseClaim is what one call needs: a slot in every scope and its tokens in every bucket.
type LeaseClaim struct {
	Scopes  []LeaseScope
	Buckets []LeaseBucket
}

// LeaseScope is one limit shared by the replicas: its name (GatewayScope, ProviderScope,
// ModelScope) and the configured number of slots.
type LeaseScope struct {
	Name  string
	Limit int
}

// LeaseBucket is one shared rate limit: the rule of actors/policy/tokens (capacity Burst,
// 0 meaning tokens.DefaultBurst), charged Cost.
type LeaseBucket struct {
	Name                   string
	PerMinute, Burst, Cost int
}

// LeaseBusy is Acquire's answer when the replicas have no room now: Scope is full, or
// Bucket lacks tokens for Wait. With neither set the shared state could not decide (Redis
// did not answer, Err says why); a later notice says when to try again.
type LeaseBusy struct {
	Scope, Bucket string
	Wait          time.Duration
	Err           error
}

func (b *LeaseBusy) Error() string {
	switch {
	case b.Scope != "":
		return "the replicas run " + b.Scope + " full"
	case b.Bucket != "":
		return fmt.Sprintf("the replicas' rate limit %s has no tokens for %s", b.Bucket, b.Wait)
	}
	return fmt.Sprintf("the replicas' shared state did not answer: %v", b.Err)
}

func (b *LeaseBusy) Unwrap() error { return b.Err }

// SharedHealth is /admin/state's "cluster" object.
type SharedHealth struct {
	Replica       string `json:"replica"`
	ReplicasAlive int    `json:"replicas_alive"`
	// Redis is "ok" while the shared state answers, "down" while this replica runs on
	// its share of every limit.
	Redis string `json:"redis"`
	// Phase is the rule in force: shared, holding, settling, fallback or rejoining
	// (docs/architecture.md, "Without Redis").
	Phase string `json:"phase"`
	// RunningCluster is what every replica runs (the max_running scope), and
	// RunningByReplica who runs it; both absent when the shared state did not answer.
	RunningCluster   *int           `json:"running_cluster,omitempty"`
	RunningByReplica map[string]int `json:"running_by_replica,omitempty"`
}

// The scopes' names, as every replica must spell them.
const GatewayScope = "gateway"

// ProviderScope is the scope of provider p's lanes.
func ProviderScope(p string) string { return "provider/" + p }

// ModelScope is the scope of model m's model lanes on provider p.
func ModelScope(p, m string) string { return "model/" + p + "/" + m }

// RateScope is the bucket of provider p's rpm, TokenScope of its tpm.
func RateScope(p string) string { return "rpm/" + p }

// TokenScope: see RateScope.
func TokenScope(p string) string { return "tpm/" + p }

// KeyRateScope is the bucket of key key's rpm (key a KeyScope), KeyTokenScope of its tpm:
// the key's key_rate_limit, shared by the replicas.
func KeyRateScope(key string) string { return "rpm/" + key }

// KeyTokenScope: see KeyRateScope.
func KeyTokenScope(key string) string { return "tpm/" + key }

// BreakerScope is the shared cooldown that says provider p's circuit breaker is open.
func BreakerScope(p string) string { return "breaker/" + p }

// KeyScope is the shared cooldown of key k (its index in the configuration) of key pool pl
// (0: the provider's keys, then the models' own, in model order) of provider p. Replicas
// share a key's cooldown only if they list the provider's keys in the same order.
func KeyScope(p string, pl, k int) string { return fmt.Sprintf("key/%s/%d/%d", p, pl, k) }

// Cooled tells the gateway that another replica rested something for d more: a key its
// backend rate-limited (KeyScope), which cools here too, or a provider whose circuit
// breaker opened (BreakerScope), which opens here too until the same time. Unknown names
// are ignored. It never blocks; the shared state's events, and the reads a provider makes
// when it starts or its replica rejoins, call it.
func (g *Gateway) Cooled(name string, d time.Duration) {
	if d <= 0 {
		return
	}
	if p, ok := strings.CutPrefix(name, "breaker/"); ok {
		g.sendProvider(p, &breakerShared{d: d})
		return
	}
	rest, ok := strings.CutPrefix(name, "key/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 {
		return
	}
	pl, err1 := strconv.Atoi(parts[1])
	k, err2 := strconv.Atoi(parts[2])
	if err1 == nil && err2 == nil {
		g.sendProvider(parts[0], &keyCooled{pool: pl, key: k, d: d})
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
	name := KeyScope(a.name, pl, k)
	rl.share(func(ctx context.Context, sh Shared) error { return sh.Cool(ctx, name, d) }, "key cooldown", name)
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
// provider's lanes and of its model's lanes (as this replica learned them, when lower:
// each replica's learning caps the whole cluster), and its provider's rate_limit (a
// request of rpm, its estimated tokens of tpm), and its key's key_rate_limit alike.
func (g *Gateway) claim(c *call) LeaseClaim {
	r := c.route
	pv := &g.table.Load().provs[r.p].Provider
	lanes, modelLanes := pv.Lanes, g.table.Load().model(r.p, r.m).Lanes
	if n := c.lanes[0]; n >= 1 && n < lanes { // learned lower: a cap across the replicas too
		lanes = n
	}
	if n := c.lanes[1]; n >= 1 && n < modelLanes {
		modelLanes = n
	}
	cl := LeaseClaim{Scopes: []LeaseScope{{Name: GatewayScope, Limit: g.caps.Load().limits.MaxRunning},
		{Name: ProviderScope(pv.Name), Limit: lanes}, {Name: ModelScope(pv.Name, r.model), Limit: modelLanes}}}
	if rl := pv.RateLimit; rl.RPM > 0 {
		cl.Buckets = append(cl.Buckets, LeaseBucket{Name: RateScope(pv.Name), PerMinute: rl.RPM, Burst: rl.Burst, Cost: 1})
	}
	if rl := pv.RateLimit; rl.TPM > 0 && c.tokens > 0 {
		cl.Buckets = append(cl.Buckets, LeaseBucket{Name: TokenScope(pv.Name), PerMinute: rl.TPM, Cost: c.tokens})
	}
	cl.Buckets = append(cl.Buckets, keyBuckets(pv.KeyRateLimit, c.keyName, c.tokens)...)
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
	claims := make([]LeaseClaim, len(b.members))
	for i, c := range b.members {
		claims[i] = g.claim(c)
	}
	ls, err := sh.Acquire(ctx, claims)
	var busy *LeaseBusy
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
	for i, c := range b.members {
		c.lease, c.charged = ls[i], claims[i].Buckets
	}
	return nil
}

// unleaseBatch gives back the leases of a batch that did not start.
func unleaseBatch(b *batchCall) {
	for _, c := range b.members {
		if l := c.lease; l != nil {
			c.lease = nil
			go l.Release() // exits after one bounded round trip to the shared state
		}
	}
}

// leased, from a lane's acquire goroutine to the lane: what the shared state answered.
type leased struct {
	c     *call
	lease Lease
	err   error
	cause error // why the acquire's context ended, if it did
	gen   uint64
	// charged are the buckets the lease charged, kept by the call once it starts.
	charged []LeaseBucket
}

// unleased, from a lane to its provider: the replicas have no room for call c now; put it
// back in its place and block what was full, unless a notice came since gen.
type unleased struct {
	c    *call
	busy *LeaseBusy
	gen  uint64
}

// leaseFreed, from LeaseNotice to every provider actor.
type leaseFreed struct{ scopes []string }

// acquire asks the shared state for call c's leases; the lane holds c as running (its
// provider's policy does) until the answer.
func (a *laneActor) acquire(ctx actor.Context, c *call) {
	if c.answered.Load() {
		send(ctx, ctx.Parent(), &freed{c: c}) // answered while it was on its way: nobody runs it
		return
	}
	a.running[c.id] = c
	lctx, cancel := context.WithCancelCause(c.ctx)
	c.leasing = cancel
	gen := a.g.leaseGen.Load()
	claims := []LeaseClaim{a.g.claim(c)}
	root, self, sh := a.g.system.Root, ctx.Self(), a.g.opts.Shared
	go func() { // exits when Acquire returns: one bounded round trip, or lctx's end
		m := &leased{c: c, gen: gen, charged: claims[0].Buckets}
		var ls []Lease
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
	if c.leasing == nil { // handled already: sent again after a crash in the middle of it
		if m.lease != nil && m.lease != c.lease {
			go m.lease.Release() // exits after one bounded round trip
		}
		if lostCall(c, "lane for "+c.route.model, a.g.now()) { // the crash stopped it before it ran
			a.drop(ctx, c)
		}
		return
	}
	c.leasing(context.Canceled) // frees the context; a no-op after a cancellation
	c.leasing = nil
	_, mine := a.running[c.id]
	var busy *LeaseBusy
	switch {
	case mine && m.err == nil && m.cause == nil && !c.answered.Load():
		c.lease, c.charged = m.lease, m.charged
		delete(a.running, c.id)
		a.start(ctx, c)
		return
	case m.lease != nil:
		go m.lease.Release() // nobody runs it; exits after one bounded round trip
	case mine && m.cause == nil && errors.As(m.err, &busy):
		delete(a.running, c.id)
		send(ctx, ctx.Parent(), &unleased{c: c, busy: busy, gen: m.gen})
		return
	}
	if !mine {
		return // dropped meanwhile (its start was lost in a crash and answered)
	}
	c.answer(admitResult{err: a.leaseFailure(c, m), queueWait: c.queueWait(a.g.now())})
	a.release(ctx, c)
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
	a.vitals.neutral(c, now) // it never ran: nothing to say of the provider's health (a probe lets the next go)
	c.started, c.confirmed = time.Time{}, true
	if !a.pol.Unstart(c.id, now) {
		// Not running in the policy (a rebuild that did not see it meanwhile): it enters
		// again at its arrival's place, kept.
		if o, _ := a.pol.Enter(c.id, a.arrival(c), now); o == policy.Rejected {
			lostCall(c, "actor", now) // neither running nor new to the policy: never so
			return
		}
	}
	a.waiting[c.id] = c
	switch {
	case c.answered.Load():
		a.pol.Cancel(c.id)
		delete(a.waiting, c.id)
	case c.ctx.Err() != nil: // the client left while it asked; its withdraw came already
		a.answerWaiting(c.id, c.ctx.Err(), now)
	case a.draining:
		a.answerWaiting(c.id, &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}, now)
	case keyRefused(m.busy, c):
		rl.restKey(c, m.busy.Wait, now) // the next grant takes another key, if one is ready
	case a.g.leaseGen.Load() == m.gen:
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
func (rl replicaLink) block(b *LeaseBusy, c *call) {
	a := rl.a
	bl := block{scope: b.Scope}
	if b.Scope == "" {
		bl.scope = b.Bucket
	}
	if b.Bucket != "" && b.Wait > 0 {
		bl.until = a.g.now().Add(b.Wait)
	}
	for m := range a.models {
		if bl.scope != ModelScope(a.name, c.route.model) || m == c.route.m {
			a.pol.Block(m)
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
	n := len(a.blocks)
	for m, bl := range a.blocks {
		if scopes == nil || slices.Contains(scopes, bl.scope) {
			a.pol.Unblock(m)
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
	case s == GatewayScope:
		return fmt.Sprintf("the replicas sharing this gateway's limits run its max_running (%d) full", a.g.caps.Load().limits.MaxRunning)
	case s == ProviderScope(a.name):
		return fmt.Sprintf("the replicas sharing this gateway's limits run all of provider %s's %d lanes", a.name, a.pv.Lanes)
	case strings.HasPrefix(s, "model/"):
		return fmt.Sprintf("the replicas sharing this gateway's limits run all of model %s/%s's model lanes", a.name, a.g.table.Load().model(a.p, m).Name)
	case s == RateScope(a.name):
		return fmt.Sprintf("provider %s's rate limit (rpm %d), shared by the replicas, holds requests back until its next token", a.name, a.pv.RateLimit.RPM)
	case s == TokenScope(a.name):
		return fmt.Sprintf("provider %s's rate limit (tpm %d), shared by the replicas, holds requests back until it has their tokens", a.name, a.pv.RateLimit.TPM)
	}
	return "the replicas' shared state (Redis) did not answer in time"
}

// replicaLink is the provider actor's part with the other replicas (SPEC §17): its calls'
// leases and the models blocked while the replicas have no room, the shared rpm/tpm buckets
// of its keys, and the health it shares and takes (cooldowns, the breaker, learned lanes).
type replicaLink struct{ a *providerActor }
