package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// heartbeat says this replica is alive and renews every lease it holds; a failure puts
// the engine on the outage rule (the only place that decides it: a failed acquire or
// release only asks for a heartbeat at once). While Redis is away it is the probe, and
// when Redis answers it is the rejoin: first an adoption registers every call the outage
// rule started, repeated for calls started during its round trip; once all are
// registered, new calls go through Redis (Rejoining), and only then does the heartbeat
// that tells peers Redis counts all this replica runs go out. The engine is Shared once
// every peer seen before the outage has such a fresh heartbeat. Entries released
// meanwhile are removed after a heartbeat, never before (one in flight would add them
// back), and never before the rejoin (their slots may serve the outage rule's calls).
func (e *Engine) heartbeat(ctx context.Context) error {
	for range 4 {
		again, err := e.beatOnce(ctx)
		if err != nil || !again {
			return err
		}
	}
	return nil // calls keep starting on the outage rule: the next tick adopts them
}

// beatOnce is one heartbeat or adoption; again reports that another must follow at once.
func (e *Engine) beatOnce(ctx context.Context) (again bool, err error) {
	e.mu.Lock()
	if e.beating || e.closed {
		e.mu.Unlock()
		return false, nil
	}
	e.beating = true
	p := e.planBeatLocked()
	e.mu.Unlock()

	res, err := e.beat(ctx, p)

	e.mu.Lock()
	e.beating = false
	if err != nil {
		e.beatFailedLocked(ctx, p, err)
		e.unlock()
		return false, err
	}
	again = e.beatAnsweredLocked(p, res)
	// What ended is removed from Redis only once Redis counts every call this replica
	// runs: until the rejoin, the outage rule lets new calls reuse the slots of ended ones
	// (Holding), which their entries still cover.
	var pending []entry
	var folds []fold
	if e.out == nil || !e.rejoined.IsZero() {
		pending, folds = e.pending, e.folds
		e.pending, e.folds = nil, nil
	}
	e.unlock()
	e.flush(ctx, pending, folds)
	return again, nil
}

// beatPlan is what one heartbeat sends: this replica's leases at the time, by scope.
type beatPlan struct {
	adopt    bool     // away: register the calls the outage rule started, say nothing of being alive
	renew    bool     // said alive before: if Redis lost that, register the calls only (mode 2)
	snap     []*Lease // the leases the heartbeat renews
	groups   map[string][]string
	sent     time.Time
	notAfter int64 // the server-clock deadline (notAfterLocked)
}

// planBeatLocked takes the snapshot one heartbeat sends.
func (e *Engine) planBeatLocked() beatPlan {
	p := beatPlan{adopt: e.out != nil && e.rejoined.IsZero(), renew: e.announced,
		snap: make([]*Lease, 0, len(e.leases)), groups: map[string][]string{}}
	for _, l := range e.leases {
		p.snap = append(p.snap, l)
		for _, s := range l.scopes {
			p.groups[s] = append(p.groups[s], l.member)
		}
	}
	p.sent = e.now()
	p.notAfter = e.notAfterLocked(p.sent)
	return p
}

// beatFailedLocked records a heartbeat that got no answer: Redis is lost, unless the
// caller's ctx ended first.
func (e *Engine) beatFailedLocked(ctx context.Context, p beatPlan, err error) {
	if !p.adopt && !unsent(err) {
		// It may have run in Redis until it was given up (not after its deadline).
		e.execBound = laterOf(e.execBound, p.sent.Add(e.t.op+e.lateByLocked()))
	}
	if !ended(ctx) {
		e.lostLocked(err)
	}
}

// beatAnsweredLocked records what an answered heartbeat did: its leases renewed, and
// either the adoption's next step or the heartbeat's findings. again: another heartbeat
// must follow at once.
func (e *Engine) beatAnsweredLocked(p beatPlan, res beatResult) (again bool) {
	for _, l := range p.snap {
		if e.leases[l.member] == l {
			l.valid = p.sent.Add(e.t.ttl - e.t.margin)
		}
	}
	switch {
	case p.adopt && e.unregisteredLocked():
		again = true // calls started during the adoption: adopt them too
	case p.adopt:
		e.rejoined = e.now()
		e.foldLocked()
		e.announced = false
		again = true // now the heartbeat
	case !res.alive:
		e.forgottenLocked()
		again = true // now the heartbeat that says this replica is alive again
	default:
		e.beatenLocked(res, p.sent)
	}
	if !p.adopt || !again {
		e.setPhaseLocked(e.phaseLocked(e.now()), nil)
	}
	return again
}

// beatenLocked records a heartbeat sent at sent that Redis answered with res: when it
// ran, the view and the replicas it saw, and what it found (entries counted again); a
// rejoin whose peers are all fresh ends.
func (e *Engine) beatenLocked(res beatResult, sent time.Time) {
	e.lastBeat = sent
	now := e.now()
	e.execBound = laterOf(e.execBound, now)
	e.beatRedis, e.beatSent, e.beatRTT = res.redisNow, sent, now.Sub(sent)
	e.seeViewLocked(res.view, now)
	e.seenLocked(res)
	e.announced = true
	if res.added > 0 && e.out == nil {
		e.status.LostLeases += uint64(res.added)
		e.log.Warn().Int64("entries", res.added).Msg("cluster: leases had expired unrenewed and were counted again")
	}
	if !e.rejoined.IsZero() && e.rejoinDoneLocked() {
		e.out, e.rejoined, e.local = nil, time.Time{}, nil
	}
}

// notAfterLocked is the server-clock deadline (ms) of a heartbeat sent at sent: past
// one round trip's bound the engine gives it up, and Redis must not run it much later
// (see execBound). The server's clock is read off the last heartbeat's answer, counted
// from when that one was sent: so the deadline errs late, by at most that heartbeat's
// round trip (lateBy), never early (an early one would refuse every heartbeat of a
// replica whose answers are read late, and keep it off Redis); 0 (none) before the first.
func (e *Engine) notAfterLocked(sent time.Time) int64 {
	if e.beatRedis == 0 {
		return 0
	}
	return e.beatRedis + sent.Add(e.t.op).Sub(e.beatSent).Milliseconds()
}

// lateByLocked is how much later than its deadline a heartbeat sent now may still run in
// Redis (notAfterLocked): the last answered heartbeat's round trip, or, before the first,
// without a deadline, lease_ttl (by then the replica is alone anyway).
func (e *Engine) lateByLocked() time.Duration {
	if e.beatRedis == 0 {
		return e.t.ttl
	}
	return e.beatRTT
}

// unsent reports an error that certainly came before the command was written: no
// connection could be made (Redis stopped, a link refused).
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// forgottenLocked handles a heartbeat that found this replica's own heartbeat gone from
// Redis: Redis lost its data (a restart without persistence) so fast that this replica
// never saw it away. That heartbeat registered its calls again but did not say this
// replica is alive (heartbeat.lua, mode 2), so the acquire script still refuses it; its
// peers' calls may not be registered until their next. It rejoins, exactly as after an
// outage that began now, from the replicas and the view of its last heartbeat (the
// emptied Redis shows neither the peers nor their calls, and keeps no share free for
// them), and the next heartbeat says it is alive.
func (e *Engine) forgottenLocked() {
	e.log.Error().Msg("cluster: Redis lost its data (restarted?): calls registered again, waiting for the other replicas")
	e.status.LastError = "Redis lost this replica's heartbeat"
	e.newOutageLocked()
	e.rejoined = e.now()
	e.announced = false
}

// unregisteredLocked reports a running call whose entries are not known to be in Redis.
func (e *Engine) unregisteredLocked() bool {
	for _, l := range e.leases {
		if l.valid.IsZero() {
			return true
		}
	}
	return false
}

// seenLocked records what a heartbeat saw: the replicas alive and their heartbeats' ages,
// and whether another process uses this replica's name.
func (e *Engine) seenLocked(res beatResult) {
	e.silencedLocked(res.ages)
	e.known, e.ages = res.names, res.ages
	e.status.ReplicasAlive = len(res.names)
	dup := res.previous != "" && res.previous != e.incarnation && e.status.Beats > 0
	if dup && !e.status.DuplicateName {
		e.log.Error().Msg("cluster: another process heartbeats with this replica's name: " +
			"replicas are undercounted; give each its own cluster.replica")
	}
	e.status.DuplicateName = dup
	e.status.Beats++
	e.status.LastBeat = e.now()
}

// silencedLocked counts, for each peer whose heartbeat turned silent since the last
// heartbeat (ages, older than timings.silent now, younger before), this replica's calls
// beyond its share that the peer's last view may not show: that peer may be cut off and
// serving on its shares from that view, and Redis kept its share free only from now. They
// are counted as outage excess and logged, as this replica's own calls are when it loses
// Redis. On the outage rule itself this replica runs within its shares already.
func (e *Engine) silencedLocked(ages map[string]time.Duration) {
	if e.out != nil {
		return
	}
	now := e.now()
	for name, age := range ages {
		was, seen := e.ages[name]
		if name == e.o.Replica || !seen || was >= e.t.silent || age < e.t.silent {
			continue
		}
		// The peer's last heartbeat, on this replica's clock, less an acquire's round trip
		// (a call started a moment before may have reached Redis after it) and the drift.
		since := now.Add(-(age + e.beatRTT + e.t.op + e.t.margin))
		known, self := e.known, e.o.Replica
		total, by := e.beyondSharesLocked(since, func(limit int) int { return shareOf(limit, known, self) })
		if total == 0 {
			continue
		}
		e.status.OutageExcess += uint64(total)
		e.log.Warn().Str("peer", name).Dict("scopes", by).Int("calls", total).Msg("cluster: a replica's heartbeat " +
			"went silent (cut off?) while this one runs calls beyond its shares that its last view may not show: " +
			"a scope may run over its limit by these until they end")
	}
}

// rejoinDoneLocked reports whether every peer seen alive before the outage has a fresh
// heartbeat (younger than lease_ttl: it runs nothing Redis does not count, see Holding),
// or lease_ttl has passed since the rejoin (a peer still silent is dead or cut off).
func (e *Engine) rejoinDoneLocked() bool {
	if e.now().Sub(e.rejoined) >= e.t.ttl {
		return true
	}
	for _, name := range e.out.known {
		if age, ok := e.ages[name]; name != e.o.Replica && (!ok || age >= e.t.ttl-e.t.margin) {
			return false
		}
	}
	return true
}

// foldLocked queues, for every outage share of a bucket, what it has not refilled yet (the
// tokens it lent lately, and what is left of its empty start, which errs on the safe
// side), to be charged to the shared bucket by flush: the shared bucket then counts what
// this replica took while it could not, so the switch back adds no burst.
func (e *Engine) foldLocked() {
	now := e.now()
	for name, lb := range e.local {
		if taken := lb.b.Capacity() - lb.b.Level(now); taken > 0 {
			e.folds = append(e.folds, fold{name: name, perMinute: lb.perMinute, tokens: taken})
		}
	}
}

// fold is tokens lent by an outage share, to be charged to the shared bucket.
type fold struct {
	name      string
	perMinute int
	tokens    int
}

// flush removes pending entries from Redis and charges folded tokens. What fails stays
// pending; the failure is the next heartbeat's to notice.
func (e *Engine) flush(ctx context.Context, pending []entry, folds []fold) {
	ctx, cancel := context.WithTimeout(ctx, e.t.op)
	defer cancel()
	if err := e.release(ctx, pending); err != nil {
		e.mu.Lock()
		e.pending = append(e.pending, pending...)
		e.mu.Unlock()
	}
	for _, f := range folds {
		if err := adjustScript.Run(ctx, e.rdb, []string{e.ks.bucket(f.name)}, f.perMinute, f.tokens).Err(); err != nil {
			e.log.Warn().Err(err).Str("bucket", f.name).Msg("cluster: could not charge the shared bucket with the outage's tokens")
		}
	}
}

// beatResult is what the heartbeat script answered.
type beatResult struct {
	added    int64
	previous string // the incarnation that heartbeat with this name before
	alive    bool   // the heartbeat said this replica is alive (false: an adoption, or Redis lost it)
	names    []string
	ages     map[string]time.Duration
	redisNow int64       // the server's clock (ms) when it ran the heartbeat; 0 unless alive
	view     seenEntries // every replica's live entries; nil unless alive
}

// beat runs the heartbeat script for plan p: an adoption, a heartbeat that says this
// replica is alive (its first since it started or adopted), or one that says so only if
// Redis still knows it (see the script's modes).
func (e *Engine) beat(ctx context.Context, p beatPlan) (beatResult, error) {
	keys := []string{e.ks.replicas(), e.ks.incarnations(), e.ks.scopes()}
	mode := 1
	switch {
	case p.adopt:
		mode = 0
	case p.renew:
		mode = 2
	}
	args := []any{e.o.Replica, e.incarnation, e.t.ttl.Milliseconds(), mode, e.ks.scopePrefix(), p.notAfter}
	for scope, members := range p.groups {
		keys = append(keys, e.ks.scope(scope))
		args = append(args, len(members))
		for _, m := range members {
			args = append(args, m)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.t.op)
	defer cancel()
	res, err := heartbeatScript.Run(ctx, e.rdb, keys, args...).Slice()
	if err != nil {
		return beatResult{}, fmt.Errorf("cluster: heartbeat: %w", err)
	}
	return parseBeat(res)
}

// parseBeat decodes {added, previous, known} (not said alive) or {added, previous, known,
// now_ms, n, name1, age1, ..., view...} (a heartbeat: parseView has the view's shape).
func parseBeat(res []any) (beatResult, error) {
	bad := func() (beatResult, error) {
		return beatResult{}, fmt.Errorf("cluster: heartbeat: unexpected answer %v", res)
	}
	if len(res) < 3 {
		return bad()
	}
	added, ok1 := res[0].(int64)
	prev, ok2 := res[1].(string)
	_, ok3 := res[2].(int64) // known: the script acts on it (mode 2)
	if !ok1 || !ok2 || !ok3 {
		return bad()
	}
	out := beatResult{added: added, previous: prev, ages: map[string]time.Duration{}}
	if len(res) == 3 {
		return out, nil
	}
	out.alive = true
	if len(res) < 6 {
		return bad()
	}
	now, ok1 := res[3].(int64)
	n, ok2 := res[4].(int64)
	if !ok1 || !ok2 || n < 0 || 5+2*int(n) > len(res) {
		return bad()
	}
	out.redisNow = now
	i := 5
	for range n {
		name, ok1 := res[i].(string)
		age, ok2 := res[i+1].(int64)
		if !ok1 || !ok2 {
			return bad()
		}
		out.names = append(out.names, name)
		out.ages[name] = time.Duration(age) * time.Millisecond
		i += 2
	}
	view, err := parseView(res, i)
	if err != nil {
		return beatResult{}, err
	}
	out.view = view
	return out, nil
}
