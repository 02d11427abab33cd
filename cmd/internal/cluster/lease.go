package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/actors/policy/tokens"
)

// Scope is one limit a call needs a slot of: a provider's lanes, a model's lanes, the
// gateway's max_running. Names are the caller's ("gateway", "provider/codex", ...); Limit
// is the configured (or learned) number of slots, at least 1. Replicas that pass
// different limits for one scope each enforce their own.
type Scope struct {
	Name  string
	Limit int
}

// Bucket is one rate limit a call is charged on: a provider's or a key's rpm or tpm
// bucket, as actors/policy/tokens defines it (capacity Burst, zero meaning
// tokens.DefaultBurst; a charge above the capacity waits for a full bucket and leaves it
// in debt). Cost is the call's charge; 0 charges nothing.
type Bucket struct {
	Name      string
	PerMinute int
	Burst     int
	Cost      int
}

func (b *Bucket) capacity() int {
	if b.Burst > 0 {
		return b.Burst
	}
	return tokens.DefaultBurst(b.PerMinute)
}

// maxCost bounds one charge, as tokens does.
const maxCost = 1 << 27

// Claim is everything one call needs to start: a slot in every scope and its tokens in
// every bucket, taken all at once or not at all.
type Claim struct {
	Scopes  []Scope
	Buckets []Bucket
}

func (c *Claim) check() error {
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
		switch err := checkName("bucket", b.Name); {
		case err != nil:
			return fmt.Errorf("cluster: %w", err)
		case b.PerMinute < 1 || b.Burst < 0 || b.Cost < 0 || b.Cost > maxCost:
			return fmt.Errorf("cluster: bucket %s: per minute must be ≥ 1, burst ≥ 0, cost in [0, %d]; got %d, %d, %d",
				b.Name, maxCost, b.PerMinute, b.Burst, b.Cost)
		}
	}
	return nil
}

func (c *Claim) limits() []int {
	out := make([]int, len(c.Scopes))
	for i, s := range c.Scopes {
		out[i] = s.Limit
	}
	return out
}

func (c *Claim) names() []string {
	out := make([]string, len(c.Scopes))
	for i, s := range c.Scopes {
		out[i] = s.Name
	}
	return out
}

// Busy is Acquire's answer when a scope has no free slot or a bucket not the tokens yet.
// The call should keep its place in its queue and try again on the next Freed (or Poll)
// event; nothing was taken.
//
// With neither Scope nor Bucket set, Redis did not answer (Err says how) and nothing could
// be decided: the heartbeat decides at once whether Redis is away, and the next event
// (Changed, or Poll) is the time to try again.
type Busy struct {
	Scope  string        // the full scope, or ""
	Bucket string        // the bucket short of tokens, or ""
	Wait   time.Duration // for a bucket: until it has the tokens, if nothing else takes them
	Phase  Phase         // the rule that refused: Shared when Redis did
	Err    error         // why nothing could be decided, when Scope and Bucket are ""
}

func (b *Busy) Error() string {
	switch {
	case b.Scope != "":
		return fmt.Sprintf("cluster: scope %s full (%s)", b.Scope, b.Phase)
	case b.Bucket != "":
		return fmt.Sprintf("cluster: bucket %s short of tokens for %s (%s)", b.Bucket, b.Wait, b.Phase)
	}
	return fmt.Sprintf("cluster: undecided, Redis did not answer (%s): %v", b.Phase, b.Err)
}

func (b *Busy) Unwrap() error { return b.Err }

// Lease is one call's hold on its scopes, renewed by the engine while it is held.
type Lease struct {
	e *Engine
	entry
	limits   []int     // per scope, the limit claimed (for the outage's excess count)
	started  time.Time // when it was taken (local clock)
	released atomic.Bool
}

// Acquire takes every scope and bucket of c for one call, all or none. It answers a
// *Busy error when some scope or bucket has no room (nothing taken), ctx's error when ctx
// ends first, ErrClosed after Close, or an error naming what is wrong with c. With Redis
// away it decides by the outage rule alone, at once; a Redis that stops answering during
// the call costs at most one round trip's bound.
func (e *Engine) Acquire(ctx context.Context, c Claim) (*Lease, error) {
	ls, err := e.AcquireAll(ctx, []Claim{c})
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// AcquireAll is Acquire for several calls that start together or not at all (a batch's
// members): one lease per claim, every claim's slots and tokens taken in one atomic step
// or none. Claims naming one scope must give it one limit.
func (e *Engine) AcquireAll(ctx context.Context, cs []Claim) ([]*Lease, error) {
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
		if busy := e.outageTakeLocked(t, e.now()); busy != nil {
			e.unlock()
			return nil, busy
		}
		if e.rejoined.IsZero() { // away: the outage rule alone
			ls := make([]*Lease, len(cs))
			for i := range cs {
				ls[i] = e.addLeaseLocked(&cs[i], time.Time{})
			}
			e.unlock()
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
	switch {
	case err == nil && busy == nil:
		ls := make([]*Lease, len(cs))
		for i := range cs {
			ls[i] = &Lease{e: e, entry: entry{member: members[i], scopes: cs[i].names(), valid: sent.Add(e.t.ttl - e.t.margin)},
				limits: cs[i].limits(), started: sent}
			e.leases[members[i]] = ls[i]
		}
		return ls, nil
	case err == nil:
		e.undoLocked(t, charged)
		return nil, busy
	}
	e.undoLocked(t, charged)
	// The script may have run: its entries are released with the pending ones (and
	// expire within lease_ttl if that never happens); they are not counted as held.
	for i := range cs {
		e.pending = append(e.pending, entry{member: members[i], scopes: cs[i].names()})
	}
	if ended(ctx) {
		return nil, cmp.Or(context.Cause(ctx), context.DeadlineExceeded)
	}
	// Whether Redis is away is the heartbeat's to decide, at once: this call waits for
	// the verdict like one refused.
	e.kickLoop()
	e.health.LastError = err.Error()
	return nil, &Busy{Phase: e.phaseLocked(e.now()), Err: err}
}

// tally is what claims taken together need: per scope, its limit and which claims (by
// index) take a slot in it; per bucket, the sum of their costs.
type tally struct {
	claims  []Claim
	scopes  []Scope // in first-seen order
	in      [][]int // per scope: the claims in it
	buckets []Bucket
}

func newTally(cs []Claim) (*tally, error) {
	if len(cs) == 0 {
		return nil, errors.New("cluster: acquire needs a claim")
	}
	t := &tally{claims: cs}
	sx, bx := map[string]int{}, map[string]int{}
	for i := range cs {
		if err := cs[i].check(); err != nil {
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
			case t.buckets[x].PerMinute != b.PerMinute || t.buckets[x].capacity() != b.capacity():
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
		e.countLocked(t.claims[i].names(), d)
	}
}

// errForgotten: the acquire script found no heartbeat of this replica in Redis.
var errForgotten = errors.New("cluster: acquire: this replica has no heartbeat in Redis (Redis lost its data?)")

// acquire runs the acquire script for the leases members, one per claim of t: nil, nil
// when everything was taken.
func (e *Engine) acquire(ctx context.Context, members []string, t *tally) (*Busy, error) {
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
		args = append(args, b.PerMinute, b.capacity(), b.Cost)
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
		return &Busy{Scope: t.scopes[res[2]-1].Name, Phase: Shared}, nil
	case len(res) == 4 && res[1] == 2 && res[2] >= 1 && int(res[2]) <= len(t.buckets):
		return &Busy{Bucket: t.buckets[res[2]-1].Name, Wait: time.Duration(res[3]) * time.Millisecond, Phase: Shared}, nil
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

// undoLocked takes back what AcquireAll counted, and what it charged to the outage shares
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
func (e *Engine) addLeaseLocked(c *Claim, valid time.Time) *Lease {
	e.seq++
	m := member(e.o.Replica, e.incarnation, e.seq)
	l := &Lease{e: e, entry: entry{member: m, scopes: c.names(), valid: valid}, limits: c.limits(), started: e.now()}
	e.leases[m] = l
	return l
}

// outageTakeLocked applies the outage rule to t at now: when every scope and bucket has
// room for all its claims it counts them as running and charges their tokens; otherwise
// it takes nothing and says what is full.
func (e *Engine) outageTakeLocked(t *tally, now time.Time) *Busy {
	phase := e.phaseLocked(now)
	for x, s := range t.scopes {
		if e.running[s.Name]+len(t.in[x]) > e.out.allowed(s.Name, s.Limit, now) {
			return &Busy{Scope: s.Name, Phase: phase}
		}
	}
	if from := e.out.tokensFrom(); len(t.buckets) > 0 && now.Before(from) {
		return &Busy{Bucket: t.buckets[0].Name, Wait: from.Sub(now), Phase: phase}
	}
	for _, b := range t.buckets {
		if w := e.localBucketLocked(&b, now).b.Wait(b.Cost, now); w > 0 {
			return &Busy{Bucket: b.Name, Wait: w, Phase: phase}
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
func (e *Engine) localBucketLocked(b *Bucket, now time.Time) *localBucket {
	if lb := e.local[b.Name]; lb != nil {
		return lb
	}
	lb := &localBucket{b: tokens.New(Share(b.PerMinute, e.out.alive), Share(b.capacity(), e.out.alive)), perMinute: b.PerMinute}
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
		e.health.LastError = err.Error()
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
