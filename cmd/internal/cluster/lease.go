package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/actors/replicas"
)

// capacity is bucket b's capacity, as tokens reads Burst.
func capacity(b *replicas.Bucket) int {
	if b.Burst > 0 {
		return b.Burst
	}
	return tokens.DefaultBurst(b.PerMinute)
}

// maxCost bounds one charge, as tokens does.
const maxCost = 1 << 27

// checkClaim says what is wrong with claim c, if anything.
func checkClaim(c *replicas.Claim) error {
	if len(c.Scopes) == 0 && len(c.Buckets) == 0 {
		return errors.New("cluster: a claim needs a scope or a bucket")
	}
	seen := map[string]bool{}
	for _, s := range c.Scopes {
		if err := checkName("scope", s.Name); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		if s.Limit < 1 {
			return fmt.Errorf("cluster: scope %s: limit must be at least 1, got %d", s.Name, s.Limit)
		}
		if seen[s.Name] {
			return fmt.Errorf("cluster: scope %s claimed twice", s.Name)
		}
		seen[s.Name] = true
	}
	for _, b := range c.Buckets {
		if err := checkBucket(&b); err != nil {
			return err
		}
	}
	return nil
}

// checkBucket says what is wrong with bucket b, if anything.
func checkBucket(b *replicas.Bucket) error {
	if err := checkName("bucket", b.Name); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if b.PerMinute < 1 || b.Burst < 0 || b.Cost < 0 || b.Cost > maxCost {
		return fmt.Errorf("cluster: bucket %s: per minute must be ≥ 1, burst ≥ 0, cost in [0, %d]; got %d, %d, %d",
			b.Name, maxCost, b.PerMinute, b.Burst, b.Cost)
	}
	return nil
}

// scopesOf is claim c's scopes' names and limits.
func scopesOf(c *replicas.Claim) (names []string, limits []int) {
	for _, s := range c.Scopes {
		names, limits = append(names, s.Name), append(limits, s.Limit)
	}
	return names, limits
}

// The answer to a claim with no room is a *replicas.Busy: the call keeps its place in its
// queue and tries again on the next Freed (or Poll) event; nothing was taken. Its Phase is
// the rule that refused (Shared when Redis did). With neither Scope nor Bucket set, Redis
// did not answer (Err says how) and nothing could be decided: the heartbeat decides at
// once whether Redis is away, and the next event (Changed, or Poll) is the time to try
// again.

// Lease is one call's hold on its scopes, renewed by the engine while it is held.
type Lease struct {
	e *Engine
	entry
	limits   []int     // per scope, the limit claimed (for the outage's excess count)
	started  time.Time // when it was taken (local clock)
	released atomic.Bool
}

// Acquire takes every scope and bucket of every claim, all or none: one lease per claim
// (a batch's members start together or not at all), every claim's slots and tokens taken in
// one atomic step. Claims naming one scope must give it one limit. It answers a
// *replicas.Busy when some scope or bucket has no room (nothing taken), ctx's error when
// ctx ends first, ErrClosed after Close, or an error naming what is wrong with a claim.
// With Redis away it decides by the outage rule alone, at once; a Redis that stops
// answering during the call costs at most one round trip's bound.
func (e *Engine) Acquire(ctx context.Context, cs []replicas.Claim) ([]replicas.Lease, error) {
	ls, err := e.acquireAll(ctx, cs)
	if err != nil {
		return nil, err
	}
	out := make([]replicas.Lease, len(ls))
	for i, l := range ls {
		out[i] = l
	}
	return out, nil
}

// acquireAll is Acquire, answering the engine's own leases.
func (e *Engine) acquireAll(ctx context.Context, cs []replicas.Claim) ([]*Lease, error) {
	t, err := newTally(cs)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	// Counted as running (and charged to the outage shares) before Redis answers, so the
	// outage rule of concurrent calls sees them; undone if Redis refuses.
	charged := e.out != nil
	if charged {
		ls, busy, decided := e.outageAcquireLocked(t)
		if decided {
			e.unlock()
			if busy != nil {
				return nil, busy
			}
			return ls, nil
		}
	} else {
		t.count(e, 1)
	}
	members := make([]string, len(cs))
	for i := range cs {
		e.seq++
		members[i] = member(e.o.Replica, e.incarnation, e.seq)
	}
	e.unlock()
	sent := e.now()
	busy, err := e.acquire(ctx, members, t)
	e.mu.Lock()
	defer e.unlock()
	if err != nil {
		return nil, e.failedLocked(ctx, t, members, charged, err)
	}
	if busy != nil {
		e.undoLocked(t, charged)
		return nil, busy
	}
	ls := make([]*Lease, len(cs))
	for i := range cs {
		names, limits := scopesOf(&cs[i])
		ls[i] = &Lease{e: e, entry: entry{member: members[i], scopes: names, valid: sent.Add(e.t.ttl - e.t.margin)},
			limits: limits, started: sent}
		e.leases[members[i]] = ls[i]
	}
	return ls, nil
}

// outageAcquireLocked decides t by the outage rule, counting and charging what it takes:
// while Redis is away that decides (decided, with the leases or what was full); while this
// replica rejoins, a call the rule lets through still takes its leases in Redis.
func (e *Engine) outageAcquireLocked(t *tally) (ls []*Lease, busy *replicas.Busy, decided bool) {
	if busy := e.outageTakeLocked(t, e.now()); busy != nil {
		return nil, busy, true
	}
	if !e.rejoined.IsZero() {
		return nil, nil, false
	}
	ls = make([]*Lease, len(t.claims))
	for i := range t.claims {
		ls[i] = e.addLeaseLocked(&t.claims[i], time.Time{})
	}
	return ls, nil, true
}

// failedLocked undoes what acquireAll counted when its round trip failed with err, and
// says why: ctx's end, or a Busy that leaves the verdict to the heartbeat.
func (e *Engine) failedLocked(ctx context.Context, t *tally, members []string, charged bool, err error) error {
	e.undoLocked(t, charged)
	// The script may have run: its entries are released with the pending ones (and
	// expire within lease_ttl if that never happens); they are not counted as held.
	for i := range t.claims {
		names, _ := scopesOf(&t.claims[i])
		e.pending = append(e.pending, entry{member: members[i], scopes: names})
	}
	if ended(ctx) {
		return cmp.Or(context.Cause(ctx), context.DeadlineExceeded)
	}
	// Whether Redis is away is the heartbeat's to decide, at once: this call waits for
	// the verdict like one refused.
	e.kickLoop()
	e.status.LastError = err.Error()
	return &replicas.Busy{Phase: e.phaseLocked(e.now()).String(), Err: err}
}

// tally is what claims taken together need: per scope, its limit and which claims (by
// index) take a slot in it; per bucket, the sum of their costs.
type tally struct {
	claims  []replicas.Claim
	scopes  []replicas.Scope // in first-seen order
	in      [][]int          // per scope: the claims in it
	buckets []replicas.Bucket
}

func newTally(cs []replicas.Claim) (*tally, error) {
	if len(cs) == 0 {
		return nil, errors.New("cluster: acquire needs a claim")
	}
	t := &tally{claims: cs}
	sx, bx := map[string]int{}, map[string]int{}
	for i := range cs {
		if err := checkClaim(&cs[i]); err != nil {
			return nil, err
		}
		for _, s := range cs[i].Scopes {
			x, ok := sx[s.Name]
			if !ok {
				x = len(t.scopes)
				sx[s.Name] = x
				t.scopes, t.in = append(t.scopes, s), append(t.in, nil)
			} else if t.scopes[x].Limit != s.Limit {
				return nil, fmt.Errorf("cluster: scope %s claimed with limits %d and %d", s.Name, t.scopes[x].Limit, s.Limit)
			}
			t.in[x] = append(t.in[x], i)
		}
		for _, b := range cs[i].Buckets {
			x, ok := bx[b.Name]
			switch {
			case !ok:
				bx[b.Name] = len(t.buckets)
				t.buckets = append(t.buckets, b)
			case t.buckets[x].PerMinute != b.PerMinute || capacity(&t.buckets[x]) != capacity(&b):
				return nil, fmt.Errorf("cluster: bucket %s claimed with two rates", b.Name)
			default:
				t.buckets[x].Cost = min(t.buckets[x].Cost+b.Cost, maxCost)
			}
		}
	}
	return t, nil
}

// count adds d to this replica's running count of every claim's scopes.
func (t *tally) count(e *Engine, d int) {
	for i := range t.claims {
		names, _ := scopesOf(&t.claims[i])
		e.countLocked(names, d)
	}
}

// errForgotten: the acquire script found no heartbeat of this replica in Redis.
var errForgotten = errors.New("cluster: acquire: this replica has no heartbeat in Redis (Redis lost its data?)")

// acquire runs the acquire script for the leases members, one per claim of t: nil, nil
// when everything was taken.
func (e *Engine) acquire(ctx context.Context, members []string, t *tally) (*replicas.Busy, error) {
	keys := make([]string, 0, len(t.scopes)+len(t.buckets)+1)
	args := []any{e.t.ttl.Milliseconds(), len(members), len(t.scopes), len(t.buckets), e.ks.events(), e.o.Replica,
		e.t.silent.Milliseconds(), e.t.horizon.Milliseconds()}
	for _, m := range members {
		args = append(args, m)
	}
	for x, s := range t.scopes {
		keys = append(keys, e.ks.scope(s.Name))
		args = append(args, s.Limit, s.Name, len(t.in[x]))
		for _, i := range t.in[x] {
			args = append(args, i+1)
		}
	}
	for _, b := range t.buckets {
		keys = append(keys, e.ks.bucket(b.Name))
		args = append(args, b.PerMinute, capacity(&b), b.Cost)
	}
	keys = append(keys, e.ks.replicas(), e.ks.scopes())
	ctx, cancel := context.WithTimeout(ctx, e.t.op)
	defer cancel()
	res, err := acquireScript.Run(ctx, e.rdb, keys, args...).Int64Slice()
	switch {
	case err != nil:
		return nil, fmt.Errorf("cluster: acquire: %w", err)
	case len(res) == 1 && res[0] == 1:
		return nil, nil
	case len(res) == 4 && res[1] == 1 && res[2] >= 1 && int(res[2]) <= len(t.scopes):
		return &replicas.Busy{Scope: t.scopes[res[2]-1].Name, Phase: Shared.String()}, nil
	case len(res) == 4 && res[1] == 2 && res[2] >= 1 && int(res[2]) <= len(t.buckets):
		return &replicas.Busy{Bucket: t.buckets[res[2]-1].Name, Wait: time.Duration(res[3]) * time.Millisecond, Phase: Shared.String()}, nil
	case len(res) == 4 && res[1] == 3:
		return nil, errForgotten
	}
	return nil, fmt.Errorf("cluster: acquire: unexpected answer %v", res)
}

func (e *Engine) countLocked(scopes []string, d int) {
	for _, s := range scopes {
		if e.running[s] += d; e.running[s] <= 0 {
			delete(e.running, s)
		}
	}
}

// undoLocked takes back what acquireAll counted, and what it charged to the outage shares
// (charged), before Redis refused.
func (e *Engine) undoLocked(t *tally, charged bool) {
	t.count(e, -1)
	if !charged || e.out == nil {
		return
	}
	now := e.now()
	for _, b := range t.buckets {
		if lb := e.local[b.Name]; lb != nil {
			lb.b.Adjust(-b.Cost, now)
		}
	}
}

// addLeaseLocked records a call started by the outage rule (already counted).
func (e *Engine) addLeaseLocked(c *replicas.Claim, valid time.Time) *Lease {
	e.seq++
	m := member(e.o.Replica, e.incarnation, e.seq)
	names, limits := scopesOf(c)
	l := &Lease{e: e, entry: entry{member: m, scopes: names, valid: valid}, limits: limits, started: e.now()}
	e.leases[m] = l
	return l
}

// outageTakeLocked applies the outage rule to t at now: when every scope and bucket has
// room for all its claims it counts them as running and charges their tokens; otherwise
// it takes nothing and says what is full.
func (e *Engine) outageTakeLocked(t *tally, now time.Time) *replicas.Busy {
	phase := e.phaseLocked(now).String()
	for x, s := range t.scopes {
		if e.running[s.Name]+len(t.in[x]) > e.out.allowed(s.Name, s.Limit, now) {
			return &replicas.Busy{Scope: s.Name, Phase: phase}
		}
	}
	if from := e.out.tokensFrom(); len(t.buckets) > 0 && now.Before(from) {
		return &replicas.Busy{Bucket: t.buckets[0].Name, Wait: from.Sub(now), Phase: phase}
	}
	for _, b := range t.buckets {
		if w := e.localBucketLocked(&b, now).b.Wait(b.Cost, now); w > 0 {
			return &replicas.Busy{Bucket: b.Name, Wait: w, Phase: phase}
		}
	}
	for _, b := range t.buckets {
		e.local[b.Name].b.Take(b.Cost, now)
	}
	t.count(e, 1)
	return nil
}

// localBucket is this replica's share of a shared bucket while Redis is away.
type localBucket struct {
	b         tokens.Bucket
	perMinute int // the shared bucket's rate, for folding what was taken back into it
}

// localBucketLocked is b's outage share: the rate and capacity divided by the replicas
// seen alive (at least 1 each), starting empty, since the shared bucket may have been.
func (e *Engine) localBucketLocked(b *replicas.Bucket, now time.Time) *localBucket {
	if lb := e.local[b.Name]; lb != nil {
		return lb
	}
	lb := &localBucket{b: tokens.New(Share(b.PerMinute, e.out.alive), Share(capacity(b), e.out.alive)), perMinute: b.PerMinute}
	lb.b.Take(lb.b.Capacity(), now)
	e.local[b.Name] = lb
	return lb
}

// Release gives the lease's slots back, cluster-wide, and tells waiting replicas (and this
// one's Notify) that its scopes have a free slot. Call it once the backend has stopped.
// It is idempotent, never blocks longer than one round trip's bound, and needs no
// context: a release must happen even when the call's own context has ended. When Redis
// is away the entries stay counted there until they are removed on its return or expire.
func (l *Lease) Release() {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	e := l.e
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	delete(e.leases, l.member)
	if len(l.scopes) == 0 { // a claim of buckets alone holds no slot: nothing frees
		e.unlock()
		return
	}
	e.countLocked(l.scopes, -1)
	e.queued = append(e.queued, Event{Kind: Freed, Replica: e.o.Replica, Scopes: l.scopes})
	en := l.entry
	if e.out != nil && e.rejoined.IsZero() || e.beating || en.valid.IsZero() {
		// Away, or a heartbeat in flight that could add the entries back after the release
		// removed them: released after it.
		e.pending = append(e.pending, en)
		e.unlock()
		return
	}
	e.unlock()
	ctx, cancel := context.WithTimeout(context.Background(), e.t.op)
	defer cancel()
	if err := e.release(ctx, []entry{en}); err != nil {
		e.mu.Lock()
		e.pending = append(e.pending, en)
		e.status.LastError = err.Error()
		e.mu.Unlock()
		e.kickLoop()
	}
}

// release removes entries from Redis in one script call.
func (e *Engine) release(ctx context.Context, entries []entry) error {
	var keys []string
	args := []any{e.ks.events(), e.o.Replica}
	for _, en := range entries {
		for _, s := range en.scopes {
			keys = append(keys, e.ks.scope(s))
			args = append(args, en.member, s)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := releaseScript.Run(ctx, e.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("cluster: release: %w", err)
	}
	return nil
}
